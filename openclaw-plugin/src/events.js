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
 */

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
 * whenever the call counts as an error, either because the tool threw (the runner then builds
 * a result holding the message) or because it *returned* a result whose `details.status` is
 * `"error"` or `"timeout"` (`isToolResultError` in src/agents/pi-embedded-subscribe.tools.ts).
 * So:
 *   - `error` set and the result is not such an error-status result: the tool threw ->
 *     `error` = the message, `result` = null;
 *   - otherwise the tool returned -> `result` = the returned value, `error` = null.
 * Neither present means the tool returned nothing (`result: null`: nothing is recorded, as in
 * OpenClaw).
 *
 * @param {ToolHookEvent} event
 * @param {HookContext} ctx
 * @returns {Record<string, unknown>}
 */
export function toolResultEvent(event, ctx) {
  const thrown = typeof event.error === "string" && !isErrorStatusResult(event.result);
  const result = thrown ? undefined : toWire(event.result);
  return withArgs(
    { type: "tool_result", ...ids(event, ctx), tool_call_id: toolCallId(event, ctx), tool_name: toolName(event) },
    event.params,
    { result: result === undefined ? null : result, error: thrown ? event.error : null },
  );
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
