/**
 * Hook payloads shaped as OpenClaw documents them, for the tests.
 *
 * Sources (openclaw/openclaw, as stored by the search index, late 2026):
 *   - docs/plugins/hooks.md, "Tool call policy": `before_tool_call` receives `event.toolName`,
 *     `event.params`, optional `event.runId`, optional `event.toolCallId`, and context fields
 *     `ctx.agentId`, `ctx.sessionKey`, `ctx.sessionId`, `ctx.runId`; it returns
 *     `{params?, block?, blockReason?, requireApproval?}`.
 *   - docs/plugins/hooks/tool-policy.md, "Tool call observation": `after_tool_call` gets the same
 *     ctx and `{toolName, params, runId?, toolCallId?, result?, error?: string, durationMs?}`.
 *   - src/plugins/hook-types.ts: `PluginHookToolContext` (agentId, sessionKey, sessionId, runId,
 *     toolName, toolCallId, ...), `PluginHookAfterCompactionEvent` ({messageCount, tokenCount?,
 *     compactedCount, sessionFile?}) and `PluginHookAgentContext` (runId, agentId, sessionKey,
 *     sessionId, ...), the compaction hooks' ctx.
 *   - src/agents/pi-embedded-subscribe.handlers.tools.ts (`handleToolExecutionEnd`): the embedded
 *     runner raises `after_tool_call` fire-and-forget with `result` = the sanitized result and
 *     `error` = `extractToolErrorMessage(result)` when the call errored (thrown, or a returned
 *     result with `details.status` "error"/"timeout", `isToolResultError` in
 *     src/agents/pi-embedded-subscribe.tools.ts).
 *
 * The values (ids, tool names, results) are made up for the tests.
 */

/**
 * A tool hook's ctx. `sessionKey: null` leaves the session key out (a session without one).
 * @param {{run?: string, session?: string, sessionKey?: string | null, agent?: string, call: string}} ids
 */
export function toolContext({ run = "run-1", session = "sess-1", sessionKey = "agent:main:main", agent = "main", call }) {
  /** @type {Record<string, unknown>} */
  const ctx = { agentId: agent, sessionId: session, runId: run, toolName: "read", toolCallId: call };
  if (sessionKey !== null) {
    ctx.sessionKey = sessionKey;
  }
  return ctx;
}

/**
 * `before_tool_call` event.
 * @param {string} toolName
 * @param {Record<string, unknown>} params
 * @param {{run?: string, call: string}} ids
 */
export function beforeToolCall(toolName, params, { run = "run-1", call }) {
  return { toolName, params, runId: run, toolCallId: call };
}

/**
 * `after_tool_call` event for a tool that returned `result`.
 * @param {string} toolName
 * @param {Record<string, unknown>} params
 * @param {unknown} result an AgentToolResult-like `{content: [{type: "text", text}], details}`
 * @param {{run?: string, call: string}} ids
 */
export function afterToolCallResult(toolName, params, result, { run = "run-1", call }) {
  return { toolName, params, runId: run, toolCallId: call, result, durationMs: 12 };
}

/**
 * `after_tool_call` event for a tool that threw. OpenClaw's tool adapter catches the throw and
 * returns `{details: {status: "error", tool, error: <message>}}` (the shape the OpenClaw session
 * importer, streams/importers/openclaw.py, reads as a thrown error); the runner then sets
 * `error` from it: `extractToolErrorMessage`, the message's first line
 * (src/agents/pi-embedded-subscribe.tools.ts).
 * @param {string} toolName
 * @param {Record<string, unknown>} params
 * @param {string} message
 * @param {{run?: string, call: string}} ids
 */
export function afterToolCallError(toolName, params, message, { run = "run-1", call }) {
  const result = { content: [{ type: "text", text: message }], details: { status: "error", tool: toolName, error: message } };
  return { toolName, params, runId: run, toolCallId: call, result, error: message.split("\n")[0], durationMs: 3 };
}

/**
 * `after_tool_call` event for an error pi-agent raised itself (an unknown tool, failed argument
 * validation): `isError`, the message as the result's text, no details.
 * @param {string} toolName
 * @param {Record<string, unknown>} params
 * @param {string} message
 * @param {{run?: string, call: string}} ids
 */
export function afterToolCallAgentError(toolName, params, message, { run = "run-1", call }) {
  return { toolName, params, runId: run, toolCallId: call, result: { content: [{ type: "text", text: message }] }, error: message.split("\n")[0], durationMs: 1 };
}

/**
 * `after_tool_call` event for a tool that *returned* an error-status result of its own (an
 * `exec` run that failed): OpenClaw sets `error` for it too (`isToolResultError`).
 * @param {string} toolName
 * @param {Record<string, unknown>} params
 * @param {string} message
 * @param {{run?: string, call: string}} ids
 */
export function afterToolCallErrorStatus(toolName, params, message, { run = "run-1", call }) {
  const result = { content: [{ type: "text", text: message }], details: { status: "error", exitCode: 1, durationMs: 40, error: message } };
  return { toolName, params, runId: run, toolCallId: call, result, error: message, durationMs: 3 };
}

/** `after_compaction` event as the overflow-recovery path raises it (counts unknown: -1). */
export function afterCompaction() {
  return { messageCount: -1, compactedCount: -1, tokenCount: 4200, sessionFile: "/tmp/sess-1.jsonl" };
}

/** A tool result as OpenClaw tools return them. @param {string} text */
export function textResult(text) {
  return { content: [{ type: "text", text }], details: { ok: true } };
}
