/**
 * The hook handlers: ask loopwatch before a tool call, report its outcome after, report
 * compactions, hand the model a warning's note; and turn loopwatch's verdict into what OpenClaw
 * understands.
 *
 * | loopwatch verdict                         | `before_tool_call` returns                  | also |
 * | ----------------------------------------- | ------------------------------------------- | ---- |
 * | allow                                     | nothing (no decision: the tool runs)        | |
 * | warn                                      | nothing (OpenClaw's warnings are advisory)  | logged; its `warning.note` (2026.9.6 profile) is appended to the call's tool result |
 * | block                                     | `{block: true, blockReason: <model text>}`  | the call's later outcome is not reported (docs/detection-rules.md §9) |
 * | abort (guard or policy abort, `run_ended`, 2026.9.6 terminal block) | `{block: true, blockReason: <model text>}` | the run has ended: every later call of it is blocked |
 *
 * The model text is the verdict's `block_text` when it has one (the 2026.9.6 profile: the
 * message with OpenClaw's recovery or terminal paragraph), else the gateway's `message` (the bare
 * `block_reason`), as OpenClaw itself words it (CONTRACTS 2).
 *
 * Ending a run. OpenClaw's plugin API has no run abort: `before_tool_call` can only block one call
 * (`{block, blockReason}`, whose tool result OpenClaw builds without `terminate`), and
 * `after_tool_call` is an observation hook whose return value is ignored (checked in the code of
 * 2026.7.35 and 2026.9.6: docs/runners/openclaw.md, "How a run ends"). So a run loopwatch ends is
 * ended here: it is remembered (by the guard's identity, docs/detection-rules.md §7: the run id, or the session when
 * there is none), and every later `before_tool_call` of it is blocked whatever the gateway answers
 * (the call is still reported, so loopwatch's record holds every call the model made, as OpenClaw's
 * session does). No later call of an ended run executes.
 *
 * Calls loopwatch never judged. OpenClaw raises `after_tool_call` also for calls that never ran
 * because its own loop detection or another plugin blocked them before this plugin was asked. The
 * plugin remembers the calls it asked about (bounded); the outcome of any other call is reported
 * with `judged: false` and `blocked_by`, which loopwatch does not apply (docs/detection-rules.md §9).
 *
 * Late calls. With `failMode: "open"` every `tool_call` carries `deadline` (epoch ms: when the
 * plugin stops waiting); a call the plugin let run without a verdict has its result reported with
 * `ran_without_verdict: true`, which loopwatch applies as executed (docs/events-and-verdicts.md,
 * "Late calls").
 *
 * Failures (no verdict: gateway down, timeout, 401, 413, ...). `failMode: "open"` lets the tool
 * run and logs why; `"closed"` blocks the call (before_tool_call) or ends the run (an outcome or
 * compaction that could not be reported), as loopwatch's Python client does with
 * `on_timeout="block"`. When the gateway itself answers `timed_out: true`, its decision already
 * applies the gateway operator's `on_timeout` and is followed as any other.
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
 * @typedef {{message: {role?: string, content?: unknown} & Record<string, unknown>, toolCallId?: string, toolName?: string}} PersistEvent
 * @typedef {{sessionKey?: string, toolCallId?: string, agentId?: string}} PersistContext
 */

/**
 * @param {object} options
 * @param {LoopwatchPluginConfig} options.config
 * @param {{send: (event: Record<string, unknown>, timeoutMs: number) => Promise<import("./gateway-client.js").SendOutcome>}} options.client
 * @param {Logger} [options.logger] OpenClaw's `api.logger`
 * @param {string | null} [options.profile] loopwatch behaviour profile put on every event (src/host.js); null: none
 * @param {() => number} [options.now] milliseconds clock (tests)
 */
export function createHooks({ config, client, logger = {}, profile = null, now = Date.now }) {
  const queue = new SessionQueue();
  /** @type {BoundedMap<string, string>} guard identity -> why the run ended (the text its calls get) */
  const endedRuns = new BoundedMap(REMEMBERED);
  /** @type {BoundedMap<string, true>} tool calls that did not run because of us */
  const blockedCalls = new BoundedMap(REMEMBERED);
  /** @type {BoundedMap<string, true>} tool calls loopwatch was asked about (their outcomes are reported) */
  const judgedCalls = new BoundedMap(REMEMBERED);
  /** @type {BoundedMap<string, true>} tool calls that ran without a verdict (fail open): their results say so */
  const lateCalls = new BoundedMap(REMEMBERED);
  /** @type {BoundedMap<string, string>} session key + tool call id -> warning note for its tool result */
  const notes = new BoundedMap(REMEMBERED);
  /** @type {BoundedMap<string, string>} session -> its latest run id (for compactions without one) */
  const latestRun = new BoundedMap(REMEMBERED);

  /** @param {Record<string, unknown>} event */
  function stamped(event) {
    return profile ? { ...event, profile } : event;
  }

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
      return client.send(stamped(event), left);
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
      return undefined; // OpenClaw records nothing for a call without session key or id (docs/detection-rules.md §8.1)
    }
    const guard = guardIdentity(id);
    if (id.run_id !== null) {
      latestRun.set(session, id.run_id);
    }
    const callId = toolCallId(event, ctx);
    const call = toolCallEvent(event, ctx);
    if (config.failMode === "open") {
      call.deadline = now() + config.timeoutMs; // when this runner stops waiting and runs the call
    }
    const outcome = await ask(session, call);
    if (callId !== null) {
      judgedCalls.set(callKey(id, callId), true);
    }
    const ended = endedRuns.get(guard);
    if (ended !== undefined) {
      // the run is over: no call of it runs again, whatever the answer (or its absence) says
      const denied = outcome.ok && (outcome.answer.decision === "block" || outcome.answer.decision === "abort");
      const text = denied ? modelText(outcome.answer) : null;
      return block(event, ctx, text ?? ended);
    }
    if (!outcome.ok) {
      if (config.failMode === "closed") {
        const reason = `loopwatch: no verdict (${outcome.reason}); failing closed: the tool call is blocked`;
        logger.warn?.(reason);
        return block(event, ctx, reason);
      }
      logger.warn?.(`loopwatch: no verdict (${outcome.reason}); failing open: the tool call goes ahead unchecked`);
      if (callId !== null) {
        lateCalls.set(callKey(id, callId), true);
      }
      return undefined;
    }
    const answer = outcome.answer;
    noteTimeout(answer);
    if (endsRun(answer)) {
      const text = modelText(answer) ?? "loopwatch: this run was ended by a loop detector";
      endedRuns.set(guard, text);
      logger.error?.(`loopwatch: ${text}`);
      return block(event, ctx, text);
    }
    if (answer.decision === "block") {
      const text = modelText(answer) ?? (answer.timed_out
        ? "loopwatch: no verdict in time; the loopwatch gateway fails closed (on_timeout: block)"
        : "loopwatch: the tool call was blocked");
      logger.error?.(`loopwatch: blocked ${event.toolName}: ${text}`);
      return block(event, ctx, text);
    }
    if (answer.decision === "warn") {
      if (answer.message) {
        logger.warn?.(`loopwatch: ${answer.message}`);
      }
      const note = warningNote(answer);
      if (note !== null && callId !== null) {
        notes.set(noteKey(id.session_key, callId), note);
      }
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
    const key = callKey(id, callId);
    if (blockedCalls.delete(key)) {
      judgedCalls.delete(key);
      return; // the call never ran in OpenClaw; any outcome reported for it is not one (docs/detection-rules.md §9)
    }
    if (!judgedCalls.delete(key)) {
      // OpenClaw's own loop detection or another plugin stopped this call before loopwatch was
      // asked: reported as never judged, so loopwatch does not apply it (events-and-verdicts.md)
      await ask(session, { ...toolResultEvent(event, ctx), judged: false, blocked_by: blockedBy(event.result) });
      return;
    }
    if (lateCalls.delete(key)) {
      // it ran without a verdict (fail open): loopwatch applies it as executed, its verdict late
      await ask(session, { ...toolResultEvent(event, ctx), ran_without_verdict: true });
      return;
    }
    const outcome = await ask(session, toolResultEvent(event, ctx));
    afterReport(id, outcome, "the tool outcome");
  }

  /**
   * `tool_result_persist` (synchronous, OpenClaw's only hook that rewrites a tool result): append
   * the emitted warning's note to the result of the call it was emitted for, as OpenClaw 2026.9.6
   * appends its own (docs/detection-rules.md §11.3.1). Nothing to do for other results.
   *
   * @param {PersistEvent} event
   * @param {PersistContext} ctx
   * @returns {{message: Record<string, unknown>} | undefined}
   */
  function toolResultPersist(event, ctx = {}) {
    const callId = typeof event?.toolCallId === "string" ? event.toolCallId : ctx.toolCallId;
    if (typeof callId !== "string" || !event?.message) {
      return undefined;
    }
    const key = noteKey(typeof ctx.sessionKey === "string" ? ctx.sessionKey : null, callId);
    const note = notes.get(key);
    if (note === undefined) {
      return undefined;
    }
    notes.delete(key);
    const content = Array.isArray(event.message.content) ? event.message.content : [];
    return { message: { ...event.message, content: [...content, { type: "text", text: note }] } };
  }

  /**
   * `after_compaction`: OpenClaw compacted the session and (for overflow and mid-turn
   * compactions) retries the prompt; the guard arms for the run (docs/detection-rules.md §7).
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
        endedRuns.set(guard, reason);
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
    if (endsRun(answer) || (answer.decision === "block" && answer.timed_out)) {
      const text = modelText(answer) ?? "loopwatch: the post-compaction guard aborted this run";
      endedRuns.set(guard, text);
      logger.error?.(`loopwatch: ${text}`);
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

  return { beforeToolCall, afterToolCall, afterCompaction, toolResultPersist, queue, endedRuns };
}

/**
 * Does this verdict end the run? A loopwatch `abort` (the guard's `compaction_loop_persisted`, a
 * policy abort, a 2026.9.6 terminal block, a call of a run that already ended: CONTRACTS 2 and
 * 3), or a record that says so even under another decision.
 * @param {GatewayAnswer} answer
 */
export function endsRun(answer) {
  const verdict = answer.verdict ?? {};
  return answer.decision === "abort" || verdict.run_aborted === true || verdict.run_terminated === true
    || verdict.tool_loop_recovery === "terminal" || (verdict.run_ended !== undefined && verdict.run_ended !== null);
}

/**
 * What the model reads for a denied call, first present of (docs/events-and-verdicts.md, "Runs that
 * ended"): `run_ended.message`, a policy's `message`, `block_text` (2026.9.6 profile: the message
 * with OpenClaw's recovery or terminal paragraph), the gateway's `message`, `block_reason`, the
 * guard's message.
 * @param {GatewayAnswer} answer
 * @returns {string | null}
 */
export function modelText(answer) {
  const verdict = answer.verdict ?? {};
  const candidates = [
    field(verdict.run_ended, "message"), field(verdict.policy, "message"), verdict.block_text,
    answer.message, verdict.block_reason, field(verdict.guard, "message"),
  ];
  const text = candidates.find((candidate) => typeof candidate === "string" && candidate !== "");
  return typeof text === "string" ? text : null;
}

/**
 * @param {unknown} value
 * @param {string} name
 */
function field(value, name) {
  return value && typeof value === "object" ? /** @type {Record<string, unknown>} */ (value)[name] : undefined;
}

/**
 * Who refused a call loopwatch never judged, from the blocked result OpenClaw made for it
 * (`details.deniedReason`: `tool-loop` for its own loop detection, `plugin-before-tool-call`
 * for a plugin's `before_tool_call`), as `blocked_by` free text.
 * @param {unknown} result
 */
export function blockedBy(result) {
  const details = field(result, "details");
  const reason = field(details, "deniedReason");
  if (reason === "tool-loop") {
    return "openclaw:loop-detection";
  }
  if (reason === "plugin-before-tool-call") {
    return "openclaw:plugin";
  }
  return typeof reason === "string" && reason !== "" ? `openclaw:${reason}` : "openclaw";
}

/**
 * The note an emitted warning appends to its call's tool result (`warning.note`, 2026.9.6 profile).
 * @param {GatewayAnswer} answer
 * @returns {string | null}
 */
export function warningNote(answer) {
  const warning = /** @type {Record<string, unknown> | undefined} */ (answer.verdict?.warning);
  return warning && typeof warning.note === "string" && warning.note !== "" ? warning.note : null;
}

/**
 * OpenClaw's session-state key: the session key, else the session id (docs/detection-rules.md §8.1); null: none.
 * @param {import("./events.js").Ids} id
 */
function sessionOf(id) {
  return id.session_key || id.session_id || null;
}

/**
 * The post-compaction guard's identity (docs/detection-rules.md §7): the run id as sent when not blank, else the session.
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

/**
 * Warning notes are matched in `tool_result_persist`, whose context has the session key and the
 * tool call id but no run id.
 * @param {string | null} sessionKey
 * @param {string} callId
 */
function noteKey(sessionKey, callId) {
  return `${sessionKey ?? ""}\u0000${callId}`;
}
