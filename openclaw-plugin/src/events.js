/**
 * OpenClaw hook payloads -> loopwatch events (the gateway's `POST /v1/events` body).
 *
 * OpenClaw hands `before_tool_call` and `after_tool_call` handlers `(event, ctx)`:
 *   event: `toolName`, `params`, optional `runId`, `toolCallId` (after_tool_call adds
 *          `result`, `error` (a string: the thrown error's message), `durationMs`);
 *   ctx:   `agentId`, `sessionKey`, `sessionId`, `runId`, `toolCallId`, ...
 * (docs/plugins/hooks.md "Tool call policy" and docs/plugins/hooks/tool-policy.md "Tool call
 * observation" in openclaw/openclaw; `PluginHookToolContext` in src/plugins/hook-types.ts).
 * Compaction hooks get `ctx` of type `PluginHookAgentContext` (`runId`, `agentId`,
 * `sessionKey`, `sessionId`).
 *
 * The ids go through unchanged, so loopwatch scopes history, runs and warnings as OpenClaw's own
 * engine does (loop-detection spec §8): a missing session key is sent as an explicit
 * `session_key: null` ("no session key": OpenClaw then skips detection, spec §8.1), never as
 * an absent field (which loopwatch would read as "same as the session id").
 */

import { toWire } from "./wire.js";

/**
 * @typedef {object} ToolHookEvent
 * @property {string} toolName
 * @property {Record<string, unknown>} [params]
 * @property {string} [runId]
 * @property {string} [toolCallId]
 * @property {unknown} [result]
 * @property {string} [error]
 * @property {number} [durationMs]
 */

/**
 * @typedef {object} HookContext
 * @property {string} [agentId]
 * @property {string} [sessionKey]
 * @property {string} [sessionId]
 * @property {string} [runId]
 * @property {string} [toolCallId]
 */

/**
 * @typedef {object} Ids
 * @property {string | null} run_id
 * @property {string | null} session_id
 * @property {string | null} session_key
 * @property {string | null} agent_id
 * @property {string} runner always `"openclaw"`: which runner's event (loopwatch's importer of OpenClaw sessions
 *   sets the same), what reports group by
 */

/** The `runner` of every event: the name loopwatch's importers give OpenClaw's recordings. */
export const RUNNER = "openclaw";

/**
 * The ids every event carries. The event's own `runId` / `toolCallId` win over the context's
 * (OpenClaw sets both to the same value where it has them).
 *
 * @param {ToolHookEvent | Record<string, unknown>} event
 * @param {HookContext} ctx
 * @returns {Ids}
 */
export function ids(event, ctx) {
  return {
    run_id: text(event.runId) ?? text(ctx.runId),
    session_id: text(ctx.sessionId),
    session_key: text(ctx.sessionKey),
    agent_id: text(ctx.agentId),
    runner: RUNNER,
  };
}

/**
 * @param {ToolHookEvent} event
 * @param {HookContext} ctx
 * @returns {string | null}
 */
export function toolCallId(event, ctx) {
  return text(event.toolCallId) ?? text(ctx.toolCallId);
}

/**
 * A `before_tool_call` as a `tool_call` whose outcome follows (`after_tool_call` reports it).
 *
 * @param {ToolHookEvent} event
 * @param {HookContext} ctx
 * @returns {Record<string, unknown>}
 */
export function toolCallEvent(event, ctx) {
  return withArgs(
    { type: "tool_call", ...ids(event, ctx), tool_call_id: toolCallId(event, ctx), tool_name: toolName(event) },
    event.params,
    { outcome_follows: true },
  );
}

/**
 * An `after_tool_call` as a `tool_result`, keeping a thrown error distinct from a returned
 * result (spec §4.3 rule 1 vs the others, §9): OpenClaw's engine hashes a thrown error's
 * message but a returned result's details and text, so the two must not be confused.
 *
 * What OpenClaw's embedded runner passes (src/agents/pi-embedded-subscribe.handlers.tools.ts,
 * `handleToolExecutionEnd`): `result` is always the (sanitized) tool result, and `error` is set
 * whenever the call counts as an error (`isToolError`): pi-agent flagged it (`isError`, for
 * errors pi-agent raised itself, e.g. "Tool X not found"), or the result's `details.status` is
 * `"error"` or `"timeout"` (`isToolResultError`, src/agents/pi-embedded-subscribe.tools.ts).
 * `error` is then only the message's first line (400 characters at most). The rules below are
 * those of the OpenClaw session importer (streams/importers/openclaw.py, `_outcome`), so a
 * backtest of a recorded session predicts what the plugin reports live:
 *
 *   1. `details` exactly `{status: "error", tool, error: <string>}`: OpenClaw's tool adapter
 *      caught what the tool threw (its loop-detection wrapper recorded a thrown error) ->
 *      `error` = `details.error` (the whole message), `result` = null;
 *   2. `error` set and the result is not an error-status result: pi-agent's own error -> `error`
 *      = the result's text blocks joined by "\n" (the Error's message; `event.error` when empty);
 *   3. otherwise the tool returned -> `result` = the returned value, `error` = null (an error-status
 *      result of the tool's own, e.g. an `exec` run with `exitCode`, is a returned result).
 * Neither present means the tool returned nothing (`result: null`: nothing is recorded, as in
 * OpenClaw).
 *
 * @param {ToolHookEvent} event
 * @param {HookContext} ctx
 * @returns {Record<string, unknown>}
 */
export function toolResultEvent(event, ctx) {
  return withArgs(
    { type: "tool_result", ...ids(event, ctx), tool_call_id: toolCallId(event, ctx), tool_name: toolName(event) },
    event.params,
    outcomeOf(event),
  );
}

/**
 * The `{result, error}` of an `after_tool_call` (see {@link toolResultEvent}).
 * @param {ToolHookEvent} event
 * @returns {{result: unknown, error: string | null}}
 */
export function outcomeOf(event) {
  const thrownByTool = adapterError(event.result);
  if (thrownByTool !== null) {
    return { result: null, error: thrownByTool };
  }
  if (typeof event.error === "string" && !isErrorStatusResult(event.result)) {
    const content = event.result && typeof event.result === "object" ? /** @type {{content?: unknown}} */ (event.result).content : undefined;
    return { result: null, error: joinedText(content) || event.error };
  }
  const result = toWire(event.result);
  return { result: result === undefined ? null : result, error: null };
}

/**
 * The message OpenClaw's tool adapter kept when the tool threw: `details` with exactly the keys
 * status ("error"), tool and error (a string); else null.
 * @param {unknown} result
 * @returns {string | null}
 */
function adapterError(result) {
  if (!result || typeof result !== "object") {
    return null;
  }
  const details = /** @type {{details?: unknown}} */ (result).details;
  if (!details || typeof details !== "object" || Array.isArray(details)) {
    return null;
  }
  const keys = Object.keys(details).sort();
  const record = /** @type {Record<string, unknown>} */ (details);
  if (keys.length === 3 && keys[0] === "error" && keys[1] === "status" && keys[2] === "tool"
      && record.status === "error" && typeof record.error === "string") {
    return record.error;
  }
  return null;
}

/**
 * The text of a result's `content`: a string as is, or its blocks' `text` joined by "\n".
 * @param {unknown} content
 */
function joinedText(content) {
  if (typeof content === "string") {
    return content;
  }
  if (!Array.isArray(content)) {
    return "";
  }
  return content
    .filter((block) => block && typeof block === "object" && typeof block.text === "string")
    .map((block) => block.text)
    .join("\n");
}

/**
 * OpenClaw's `isToolResultError`: a returned result whose `details.status` is error or timeout.
 * @param {unknown} result
 */
export function isErrorStatusResult(result) {
  if (!result || typeof result !== "object") {
    return false;
  }
  const details = /** @type {{details?: unknown}} */ (result).details;
  if (!details || typeof details !== "object") {
    return false;
  }
  const status = /** @type {{status?: unknown}} */ (details).status;
  if (typeof status !== "string") {
    return false;
  }
  const normalized = status.trim().toLowerCase();
  return normalized === "error" || normalized === "timeout";
}

/**
 * A successful compaction as a `compaction_retry` for `runId` (arms the run's post-compaction
 * guard, spec §7).
 *
 * @param {HookContext} ctx
 * @param {string | null} runId the context's run id, or the session's latest run when OpenClaw gave none
 * @returns {Record<string, unknown>}
 */
export function compactionEvent(ctx, runId) {
  return { type: "compaction_retry", ...ids({}, ctx), run_id: runId };
}

/**
 * @param {Record<string, unknown>} base
 * @param {unknown} params
 * @param {Record<string, unknown>} rest
 */
function withArgs(base, params, rest) {
  const args = toWire(params);
  // absent args = JavaScript undefined on the loopwatch side, as OpenClaw hashes a missing params
  return args === undefined ? { ...base, ...rest } : { ...base, args, ...rest };
}

/** @param {ToolHookEvent} event */
function toolName(event) {
  return typeof event.toolName === "string" ? event.toolName : null;
}

/** @param {unknown} value */
function text(value) {
  return typeof value === "string" ? value : null;
}
