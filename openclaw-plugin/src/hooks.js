/**
 * The three hook handlers: ask loopwatch before a tool call, report its outcome after, report
 * compactions; and turn loopwatch's decision into what OpenClaw understands.
 *
 * | loopwatch decision | `before_tool_call` returns                     | also |
 * | ------------------ | ---------------------------------------------- | ---- |
 * | allow              | nothing (no decision: the tool runs)           | |
 * | warn               | nothing (OpenClaw's warnings are advisory, spec §3 step 3) | the warning is logged |
 * | block              | `{block: true, blockReason: <message>}`        | the call's later outcome is not reported (spec §9) |
 * | abort              | `{block: true, blockReason: <message>}`        | every later call of the run is blocked with it |
 *
 * `{block: true, blockReason}` is OpenClaw's `PluginHookBeforeToolCallResult`: terminal, lower
 * priority handlers are skipped (docs/plugins/hooks.md, "Tool call policy").
 *
 * Aborts. OpenClaw's post-compaction guard aborts a run after a tool outcome (spec §7). A
 * plugin cannot end a run from `after_tool_call`, an observation hook whose return value is
 * ignored (docs/plugins/hooks/tool-policy.md, "Tool call observation"). So an abort verdict on
 * an outcome is remembered for the run (the guard's identity, spec §7: the run id, or the
 * session when there is none), and every later `before_tool_call` of that run is blocked with
 * the guard's message without asking the gateway again: the run can make no further progress.
 *
 * Failures (no verdict: gateway down, timeout, 401, 413, ...). `failMode: "open"` lets the tool
 * run and logs why; `"closed"` blocks the call (before_tool_call) or treats the run as aborted
 * (an outcome or compaction that could not be reported), as loopwatch's Python client does with
 * `on_timeout="block"`. When the gateway itself answers `timed_out: true`, its decision
 * already applies the gateway operator's `on_timeout` and is followed as any other.
 */

import { BoundedMap } from "./bounded.js";
import { compactionEvent, ids, toolCallEvent, toolCallId, toolResultEvent } from "./events.js";
import { SessionQueue } from "./session-queue.js";

const REMEMBERED = 10000; // runs / tool calls / sessions kept in each memory map

/**
 * @typedef {import("./config.js").LoopwatchPluginConfig} LoopwatchPluginConfig
 * @typedef {import("./gateway-client.js").GatewayAnswer} GatewayAnswer
 * @typedef {import("./events.js").ToolHookEvent} ToolHookEvent
 * @typedef {import("./events.js").HookContext} HookContext
 * @typedef {{info?: (m: string) => void, warn?: (m: string) => void, error?: (m: string) => void, debug?: (m: string) => void}} Logger
 * @typedef {{block: true, blockReason: string}} BlockResult
 */

/**
 * @param {object} options
 * @param {LoopwatchPluginConfig} options.config
 * @param {{send: (event: Record<string, unknown>, timeoutMs: number) => Promise<import("./gateway-client.js").SendOutcome>}} options.client
 * @param {Logger} [options.logger] OpenClaw's `api.logger`
 * @param {() => number} [options.now] milliseconds clock (tests)
 */
export function createHooks({ config, client, logger = {}, now = Date.now }) {
  const queue = new SessionQueue();
  /** @type {BoundedMap<string, string>} guard identity -> the abort message */
  const abortedRuns = new BoundedMap(REMEMBERED);
  /** @type {BoundedMap<string, true>} tool calls that did not run because of us */
  const blockedCalls = new BoundedMap(REMEMBERED);
  /** @type {BoundedMap<string, string>} session -> its latest run id (for compactions without one) */
  const latestRun = new BoundedMap(REMEMBERED);

  /**
   * Send `event` after the session's earlier events; the deadline counts from the hook's call.
   * @param {string} session
   * @param {Record<string, unknown>} event
   */
  function ask(session, event) {
    const deadline = now() + config.timeoutMs;
    return queue.run(session, async () => {
      const left = deadline - now();
      if (left <= 0) {
        return /** @type {const} */ ({ ok: false, reason: `no answer within ${config.timeoutMs} ms (waiting behind this session's earlier events)` });
      }
      return client.send(event, left);
    });
  }

  /**
   * @param {ToolHookEvent} event
   * @param {HookContext} ctx
   * @returns {Promise<BlockResult | undefined>}
   */
  async function beforeToolCall(event, ctx = {}) {
    const id = ids(event, ctx);
    const session = sessionOf(id);
    if (session === null) {
      return undefined; // OpenClaw records nothing for a call without session key or id (spec §8.1)
    }
    const guard = guardIdentity(id);
    const abortMessage = abortedRuns.get(guard);
    if (abortMessage !== undefined) {
      return block(event, ctx, abortMessage);
    }
    if (id.run_id !== null) {
      latestRun.set(session, id.run_id);
    }
    const outcome = await ask(session, toolCallEvent(event, ctx));
    if (!outcome.ok) {
      if (config.failMode === "closed") {
        const reason = `loopwatch: no verdict (${outcome.reason}); failing closed: the tool call is blocked`;
        logger.warn?.(reason);
        return block(event, ctx, reason);
      }
      logger.warn?.(`loopwatch: no verdict (${outcome.reason}); failing open: the tool call goes ahead unchecked`);
      return undefined;
    }
    const answer = outcome.answer;
    noteTimeout(answer);
    if (answer.decision === "abort" || answer.verdict?.run_aborted === true) {
      const message = answer.message ?? guardMessage(answer) ?? "loopwatch: this run was aborted by the post-compaction guard";
      abortedRuns.set(guard, message);
      logger.error?.(`loopwatch: ${message}`);
      return block(event, ctx, message);
    }
    if (answer.decision === "block") {
      const message = answer.message ?? (answer.timed_out
        ? "loopwatch: no verdict in time; the loopwatch gateway fails closed (on_timeout: block)"
        : "loopwatch: the tool call was blocked");
      logger.error?.(`loopwatch: blocked ${event.toolName}: ${message}`);
      return block(event, ctx, message);
    }
    if (answer.decision === "warn" && answer.message) {
      logger.warn?.(`loopwatch: ${answer.message}`);
    }
    return undefined;
  }

  /**
   * @param {ToolHookEvent} event
   * @param {HookContext} ctx
   * @returns {Promise<void>}
   */
  async function afterToolCall(event, ctx = {}) {
    const id = ids(event, ctx);
    const session = sessionOf(id);
    const callId = toolCallId(event, ctx);
    if (session === null) {
      return;
    }
    if (callId === null) {
      // loopwatch matches an outcome to its call by tool call id; OpenClaw always sets one on agent tool calls
      logger.debug?.(`loopwatch: outcome of ${event.toolName} not reported: it has no tool call id`);
      return;
    }
    if (blockedCalls.delete(callKey(id, callId))) {
      return; // the call never ran in OpenClaw; any outcome reported for it is not one (spec §9)
    }
    const outcome = await ask(session, toolResultEvent(event, ctx));
    afterReport(id, outcome, "the tool outcome");
  }

  /**
   * `after_compaction`: OpenClaw compacted the session and (for overflow and mid-turn
   * compactions) retries the prompt; the guard arms for the run (spec §7).
   *
   * @param {unknown} _event `{messageCount, compactedCount, tokenCount?, sessionFile?}`: not needed
   * @param {HookContext} ctx
   * @returns {Promise<void>}
   */
  async function afterCompaction(_event, ctx = {}) {
    if (!config.reportCompactions) {
      return;
    }
    const id = ids({}, ctx);
    const session = sessionOf(id);
    if (session === null) {
      return;
    }
    // some compaction paths give no run id: the compacted run is the session's latest one
    const runId = id.run_id ?? latestRun.get(session) ?? null;
    const outcome = await ask(session, compactionEvent(ctx, runId));
    afterReport({ ...id, run_id: runId }, outcome, "the compaction");
  }

  /**
   * @param {import("./events.js").Ids} id
   * @param {import("./gateway-client.js").SendOutcome} outcome
   * @param {string} what
   */
  function afterReport(id, outcome, what) {
    const guard = guardIdentity(id);
    if (!outcome.ok) {
      if (config.failMode === "closed") {
        const reason = `loopwatch: ${what} could not be reported (${outcome.reason}); failing closed: the run is stopped`;
        abortedRuns.set(guard, reason);
        logger.warn?.(reason);
      } else {
        logger.warn?.(`loopwatch: ${what} could not be reported (${outcome.reason}); failing open`);
      }
      return;
    }
    const answer = outcome.answer;
    noteTimeout(answer);
    // a gateway failing closed answers its on_timeout ("block") for an outcome too: for a run
    // whose outcome went unchecked that means stopping it, as the Python client's "abort"
    if (answer.decision === "abort" || (answer.decision === "block" && answer.timed_out)) {
      const message = answer.message ?? guardMessage(answer) ?? "loopwatch: the post-compaction guard aborted this run";
      abortedRuns.set(guard, message);
      logger.error?.(`loopwatch: ${message}`);
    }
  }

  /**
   * @param {ToolHookEvent} event
   * @param {HookContext} ctx
   * @param {string} reason
   * @returns {BlockResult}
   */
  function block(event, ctx, reason) {
    const callId = toolCallId(event, ctx);
    if (callId !== null) {
      blockedCalls.set(callKey(ids(event, ctx), callId), true);
    }
    return { block: true, blockReason: reason };
  }

  /** @param {GatewayAnswer} answer */
  function noteTimeout(answer) {
    if (answer.timed_out) {
      logger.warn?.(`loopwatch: the gateway had no verdict in time and answered its on_timeout choice (${answer.on_timeout}): ${answer.decision}`);
    }
  }

  return { beforeToolCall, afterToolCall, afterCompaction, queue, abortedRuns };
}

/**
 * OpenClaw's session-state key: the session key, else the session id (spec §8.1); null: none.
 * @param {import("./events.js").Ids} id
 */
function sessionOf(id) {
  return id.session_key || id.session_id || null;
}

/**
 * The post-compaction guard's identity (spec §7): the run id as sent when not blank, else the session.
 * @param {import("./events.js").Ids} id
 */
function guardIdentity(id) {
  if (id.run_id !== null && id.run_id.trim() !== "") {
    return `run:${id.run_id}`;
  }
  return `session:${id.session_key ?? id.session_id}`;
}

/**
 * @param {import("./events.js").Ids} id
 * @param {string} callId
 */
function callKey(id, callId) {
  return `${id.run_id ?? ""}\u0000${callId}`;
}

/** @param {GatewayAnswer} answer */
function guardMessage(answer) {
  const guard = /** @type {Record<string, unknown> | undefined} */ (answer.verdict?.guard);
  return guard && typeof guard.message === "string" ? guard.message : null;
}
