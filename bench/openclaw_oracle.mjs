// OpenClaw's own verdicts for conformance scenarios: the oracle of the differential check (bench/difffuzz.py).
//
//   node bench/openclaw_oracle.mjs <openclaw package dir>  < scenarios.jsonl  > expected.jsonl
//
// Each input line is a scenario in the conformance format (docs/offline.md; ../shared/conformance/README.md):
// {"name", "config", "events", ...}. Each output line is {"name", "expected": [...]} with what OpenClaw's
// code decides for every event, in the fields of the scenarios' `expected` entries, or {"name", "error"}.
// Every scenario starts from empty state.
//
// What runs OpenClaw's own code, loaded from the install given (its dist/; nothing of OpenClaw is in this
// repository):
//   * tools.loopDetection (src/agents/tool-loop-detection.ts): detectToolCallLoop, recordToolCall,
//     recordToolCallOutcome (tool-name normalisation, hashing, detectors, history and its trimming);
//   * the per-agent overlay resolveToolLoopDetectionConfig (src/agents/tool-loop-detection-config.ts) with
//     OpenClaw's agent lookup and agent-id normalisation;
//   * the diagnostic session state getDiagnosticSessionState (src/logging/diagnostic-session-state.ts): the
//     lookup by session key and session id, moves and merges;
//   * from src/agents/agent-tools.before-tool-call.ts, taken out of the dist file by name and evaluated here:
//     shouldEmitLoopWarning (the warning buckets) and recordPreExecutionBlockedToolCall /
//     consumePreExecutionBlockedToolCall with buildAdjustedParamsKey (blocked calls, by run and call id, 1,024 kept);
//   * from src/agents/embedded-agent-runner/post-compaction-loop-guard.ts, the same way: the post-compaction
//     guard createPostCompactionLoopGuard.
//
// What this file emulates (the glue of runBeforeToolCallHook / recordLoopOutcome and the embedded runner, which
// cannot run without a model): the order of one tool cycle as runBeforeToolCallHook and recordLoopOutcome have
// it (detect and record only with a session key, block on critical, dedupe warnings, record the call unless
// enabled === false, record the outcome with a session key or id); one guard per run identity (the raw run id,
// else the session key, else the session id: spec §7) created with the config of the event that starts it; a
// deferred call (outcome_follows) keeps its context (run, config, tool, args, guard) until its tool_result, as the
// wrapper's closure does, found by tool_call_id in any session; the result is recorded in the session state its
// own session fields look up (spec §8.1 R7: a result with neither records nothing); a blocked deferred call is
// remembered (OpenClaw's functions) and its result ignored; every tool_result with a session looks its state up
// first, as the spec's lookup has it (§8.1; OpenClaw itself never sees a result of a blocked call). The differential
// check keeps its scenarios inside what this emulation decides for certain (bench/difffuzz.py).
//
// Without flags the 2026.7 line (e.g. openclaw@2026.7.35) is driven whole. For a 2026.9.x install give
// --detector-only (tool calls that carry their outcome, detected, deduped and recorded as 2026.9's admission does,
// up to the first critical detection: detectorOnlyRun; bench/difffuzz.py --profile openclaw-2026.9.6) or --runner
// (every tool call, past the recovery and terminal blocks, through 2026.9's own agent loop: runnerRun;
// bench/difffuzz.py --profile openclaw-2026.9.6 --runner).
//
//   node bench/openclaw_oracle.mjs <2026.9.x package dir> --runner  < scenarios.jsonl  > expected.jsonl
import { readFileSync, readdirSync } from "node:fs";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { createInterface } from "node:readline";

// OpenClaw's subsystem loggers write to the console and to a log file under /tmp/openclaw: off.
process.env.OPENCLAW_LOG_LEVEL = "silent";
for (const method of ["log", "info", "warn", "error", "debug"]) console[method] = () => {};

const args = process.argv.slice(2);
const detectorOnly = args.includes("--detector-only");
const pkg = args.find((arg) => !arg.startsWith("--"));
if (!pkg) {
  console.error("usage: node bench/openclaw_oracle.mjs <openclaw package dir> [--detector-only | --runner] < scenarios.jsonl");
  process.exit(2);
}
const dist = join(pkg, "dist");
const distFiles = readdirSync(dist).filter((file) => file.endsWith(".js") || file.endsWith(".mjs"));

// The module of dist/ whose name starts with `prefix` and whose export line names every one of `names`.
async function load(prefix, names) {
  for (const file of distFiles) {
    if (!file.startsWith(prefix)) continue;
    const text = readFileSync(join(dist, file), "utf8");
    const line = text.match(/^export \{([^}]*)\};?\s*$/m);
    if (!line) continue;
    const aliases = Object.fromEntries(line[1].split(",").map((part) => part.trim().split(/\s+as\s+/))
      .map(([local, exported]) => [local, exported ?? local]));
    if (!names.every((name) => name in aliases)) continue;
    const module = await import(pathToFileURL(join(dist, file)).href);
    return Object.fromEntries(names.map((name) => [name, module[aliases[name]]]));
  }
  throw new Error(`no dist/${prefix}* exporting ${names.join(", ")} in ${pkg}`);
}

// The text of `function name(...) {...}` (a top-level function of a dist file starting with `prefix`).
function functionSource(prefix, name) {
  for (const file of distFiles) {
    if (!file.startsWith(prefix)) continue;
    const text = readFileSync(join(dist, file), "utf8");
    const start = text.search(new RegExp(`^function ${name}\\(`, "m"));
    if (start < 0) continue;
    const end = text.indexOf("\n}\n", start);
    return text.slice(start, end + 2);
  }
  throw new Error(`no function ${name} in dist/${prefix}* of ${pkg}`);
}

function optionalFunctionSource(prefix, name) {
  try {
    return functionSource(prefix, name);
  } catch {
    return "";
  }
}

function constantSource(prefix, name) {
  for (const file of distFiles) {
    if (!file.startsWith(prefix)) continue;
    const text = readFileSync(join(dist, file), "utf8");
    const match = text.match(new RegExp(`^const ${name} = [^;]*;`, "m"));
    if (match) return match[0];
  }
  throw new Error(`no const ${name} in dist/${prefix}* of ${pkg}`);
}

const { detectToolCallLoop, recordToolCall, recordToolCallOutcome } = await load("tool-loop-detection-",
  ["detectToolCallLoop", "recordToolCall", "recordToolCallOutcome"]);
// 2026.7 exports normalizeToolName; 2026.9 calls it normalizeToolPolicyName
const { normalizeToolName } = await load("tool-policy-", ["normalizeToolName"])
  .catch(() => load("tool-policy-", ["normalizeToolPolicyName"]))
  .then((found) => ({ normalizeToolName: found.normalizeToolName ?? found.normalizeToolPolicyName }));
const { stableStringify } = await load("stable-stringify-", ["stableStringify"]);
const { resolveToolLoopDetectionConfig } = await load("tool-loop-detection-config-", ["resolveToolLoopDetectionConfig"]);
const { getDiagnosticSessionState, resetDiagnosticSessionStateForTest } = await load("diagnostic-session-state-",
  ["getDiagnosticSessionState", "resetDiagnosticSessionStateForTest"]);

const BEFORE = "agent-tools.before-tool-call-";
const { shouldEmitLoopWarning, recordPreExecutionBlockedToolCall, consumePreExecutionBlockedToolCall,
  preExecutionBlockedToolCallIds } = new Function([
  constantSource(BEFORE, "LOOP_WARNING_BUCKET_SIZE"),
  constantSource(BEFORE, "MAX_LOOP_WARNING_KEYS"),
  constantSource(BEFORE, "MAX_TRACKED_ADJUSTED_PARAMS"),
  "const preExecutionBlockedToolCallIds = new Set();",
  optionalFunctionSource("map-size-", "pruneMapToMaxSize"), // 2026.9's shouldEmitLoopWarning calls it
  functionSource(BEFORE, "shouldEmitLoopWarning"),
  functionSource(BEFORE, "buildAdjustedParamsKey"),
  functionSource(BEFORE, "recordPreExecutionBlockedToolCall"),
  functionSource(BEFORE, "consumePreExecutionBlockedToolCall"),
  "return { shouldEmitLoopWarning, recordPreExecutionBlockedToolCall, consumePreExecutionBlockedToolCall,",
  "  preExecutionBlockedToolCallIds };",
].join("\n"))();

function guardFactory() {
  if (detectorOnly) return undefined;
  const quiet = { info() {}, warn() {}, error() {} };
  for (const file of distFiles) {
    if (!file.startsWith("embedded-agent-")) continue;
    const text = readFileSync(join(dist, file), "utf8");
    const marker = "//#region src/agents/embedded-agent-runner/post-compaction-loop-guard.ts";
    const start = text.indexOf(marker);
    if (start < 0) continue;
    const region = text.slice(start, text.indexOf("//#endregion", start))
      .replace(/^const log = createSubsystemLogger\([^)]*\);$/m, "")
      .replace(/^var PostCompactionLoopPersistedError[\s\S]*$/m, "");
    return new Function("log", `${region}\nreturn createPostCompactionLoopGuard;`)(quiet);
  }
  throw new Error(`no post-compaction guard in dist/embedded-agent-* of ${pkg}`);
}
const createPostCompactionLoopGuard = guardFactory();

const BLOCKED_RESULT_IGNORED = "tool call was blocked; no tool result exists in OpenClaw";

function argsHash(toolName, params) {
  return `${toolName}:${createHash("sha256").update(stableStringify(params)).digest("hex")}`;
}

function blank(value) {
  return typeof value !== "string" || value.trim() === "";
}

// spec §10: session_key defaults to session_id; an explicit null means no key.
function sessionRef(event) {
  const sessionId = event.session_id ?? undefined;
  const sessionKey = "session_key" in event ? event.session_key ?? undefined : sessionId;
  return { sessionKey, sessionId };
}

// spec §7: the raw run id when not blank, else the session key when present, else the session id.
function guardIdentity(event) {
  if (!blank(event.run_id)) return `run\u0000${event.run_id}`;
  if ("session_key" in event && event.session_key !== null) return `key\u0000${event.session_key}`;
  return `sid\u0000${event.session_id}`;
}

function thrown(error) {
  if (error === null || error === undefined) return undefined;
  return typeof error === "string" ? new Error(error) : error;
}

function detectionView(loop) {
  if (!loop.stuck) return { stuck: false };
  const view = {
    stuck: true, level: loop.level, detector: loop.detector, count: loop.count, message: loop.message,
    warning_key: loop.warningKey,
  };
  if (loop.pairedToolName !== undefined) view.paired_tool_name = loop.pairedToolName;
  if (loop.livenessSignal !== undefined) view.liveness_signal = loop.livenessSignal;
  return view;
}

// The guard's observation of a recorded outcome (spec §7), as the event's `guard` field reports it: `armed` and
// `observed` say the guard was armed when it observed (spec §9/10); an abort marks the run aborted.
function observeGuard(guardEntry, observation) {
  const before = guardEntry.guard.snapshot();
  const verdict = guardEntry.guard.observe(observation);
  const observed = guardEntry.enabled && before.armed;
  const guard = { enabled: guardEntry.enabled, armed: observed, observed, remaining: verdict.remainingAttempts,
    abort: verdict.shouldAbort };
  if (verdict.shouldAbort) {
    Object.assign(guard, { detector: verdict.detector, count: verdict.count, tool_name: verdict.toolName,
      message: verdict.message });
    guardEntry.aborted = true;
  }
  return guard;
}

// One guard per run identity (spec §7), created with the config of the event that starts it (2026.7 takes the
// postCompactionGuard block and {enabled}; 2026.9 {enabled} alone, its window fixed).
function guardEntryFor(guards, identity, loopDetection) {
  let entry = guards.get(identity);
  if (!entry) {
    const enabled = loopDetection?.enabled !== false;
    const guard = runnerParts ? createPostCompactionLoopGuard({ enabled })
      : createPostCompactionLoopGuard(loopDetection?.postCompactionGuard, { enabled });
    entry = { guard, enabled, aborted: false };
    guards.set(identity, entry);
  }
  return entry;
}

// A compaction_retry: the run's guard arms (spec §7).
function compactionRetryView(entry) {
  entry.guard.armPostCompaction();
  const snap = entry.guard.snapshot();
  return { type: "compaction_retry", guard: {
    enabled: entry.enabled, window_size: snap.remainingAttempts,
    armed: entry.enabled && snap.armed, remaining: entry.enabled ? snap.remainingAttempts : 0 } };
}

class Scenario {
  constructor(config) {
    this.config = config ?? {};
    this.guards = new Map();
    this.pending = new Map();
    preExecutionBlockedToolCallIds.clear();
    resetDiagnosticSessionStateForTest();
  }

  loopConfig(agentId) {
    return resolveToolLoopDetectionConfig({ cfg: this.config, agentId: agentId ?? undefined });
  }

  guard(identity, loopDetection) {
    return guardEntryFor(this.guards, identity, loopDetection);
  }

  static guardView(entry) {
    const snap = entry.guard.snapshot();
    return { enabled: entry.enabled, armed: entry.enabled && snap.armed, observed: false,
      remaining: entry.enabled ? snap.remainingAttempts : 0, abort: false };
  }

  // recordLoopOutcome: needs a session key or id; the recorded outcome goes to the run's guard.
  outcome(ctx, toolName, params, toolCallId, result, error, guardEntry) {
    const view = { recorded: false, result_hash: null, unknown_tool_name: null };
    let guard = Scenario.guardView(guardEntry);
    if (!ctx.sessionKey && !ctx.sessionId) return { view, guard };
    const state = getDiagnosticSessionState({ sessionKey: ctx.sessionKey, sessionId: ctx.sessionId });
    const record = recordToolCallOutcome(state, {
      toolName, toolParams: params, toolCallId, result, error, config: ctx.loopDetection,
      ...ctx.runId && { runId: ctx.runId },
    });
    if (!record?.resultHash) return { view, guard };
    view.recorded = true;
    view.result_hash = record.resultHash;
    view.unknown_tool_name = record.unknownToolName ?? null;
    guard = observeGuard(guardEntry, { toolName: record.toolName, argsHash: record.argsHash,
      resultHash: record.resultHash });
    return { view, guard };
  }

  toolCall(event) {
    const { sessionKey, sessionId } = sessionRef(event);
    const loopDetection = this.loopConfig(event.agent_id);
    const ctx = { sessionKey, sessionId, runId: event.run_id ?? undefined, loopDetection };
    const guardEntry = this.guard(guardIdentity(event), loopDetection);
    const toolName = normalizeToolName(event.tool_name || "tool");
    const params = event.args;
    const out = { type: "tool_call", tool_name: toolName, args_hash: argsHash(toolName, params), decision: "allow",
      detection: { stuck: false }, warning: null, blocked: false, recorded_call: false };
    if (ctx.sessionKey) {
      const state = getDiagnosticSessionState({ sessionKey: ctx.sessionKey, sessionId: ctx.sessionId });
      const scope = ctx.runId ? { runId: ctx.runId } : undefined;
      const loop = detectToolCallLoop(state, toolName, params, loopDetection, scope);
      out.detection = detectionView(loop);
      if (loop.stuck && loop.level === "critical") {
        out.decision = "block";
        out.blocked = true;
        out.block_reason = loop.message;
        out.outcome = { recorded: false, result_hash: null, unknown_tool_name: null };
        out.guard = Scenario.guardView(guardEntry);
        out.run_aborted = guardEntry.aborted;
        if (event.outcome_follows === true) {
          recordPreExecutionBlockedToolCall(event.tool_call_id ?? undefined, ctx.runId);
        }
        return out;
      }
      if (loop.stuck) {
        const base = loop.warningKey ?? `${loop.detector}:${toolName}`;
        const key = ctx.runId ? `${ctx.runId}:${base}` : base;
        const emitted = shouldEmitLoopWarning(state, key, loop.count);
        out.warning = { emitted, key, bucket: Math.floor(loop.count / 10) };
        if (emitted) out.decision = "warn";
      }
      if (loopDetection?.enabled !== false) {
        recordToolCall(state, toolName, params, event.tool_call_id, loopDetection, scope);
        out.recorded_call = true;
      }
    }
    if (event.outcome_follows === true) {
      this.pending.set(event.tool_call_id, { ctx, toolName, params, guardEntry });
      out.outcome = { deferred: true };
      out.guard = Scenario.guardView(guardEntry);
    } else {
      const done = this.outcome(ctx, toolName, params, event.tool_call_id, event.result ?? undefined,
        thrown(event.error), guardEntry);
      out.outcome = done.view;
      out.guard = done.guard;
    }
    out.run_aborted = guardEntry.aborted;
    return out;
  }

  toolResult(event) {
    const callId = event.tool_call_id;
    // spec §8.1: every tool_result with a session key or id looks its state up first (moves and merges happen
    // even when the result then turns out to be a blocked call's)
    const ref = sessionRef(event);
    if (ref.sessionKey || ref.sessionId) getDiagnosticSessionState(ref);
    // a result without a call id never matches a blocked call (spec §9, R8)
    if (callId) {
      if (consumePreExecutionBlockedToolCall(callId, event.run_id ?? undefined)) {
        const toolName = normalizeToolName(event.tool_name || "tool");
        const entry = this.guard(guardIdentity(event), this.loopConfig(event.agent_id));
        return { type: "tool_result", tool_name: toolName, args_hash: argsHash(toolName, event.args),
          ignored: BLOCKED_RESULT_IGNORED, run_aborted: entry.aborted };
      }
    }
    let call = callId === undefined || callId === null ? undefined : this.pending.get(callId);
    if (call) {
      // the call's run, config, tool, args and guard (spec §9 R5), in the session the result names (§8.1 R7)
      this.pending.delete(callId);
      call = { ...call, ctx: { ...call.ctx, ...sessionRef(event) } };
    } else {
      const { sessionKey, sessionId } = sessionRef(event);
      const loopDetection = this.loopConfig(event.agent_id);
      const toolName = normalizeToolName(event.tool_name || "tool");
      call = { ctx: { sessionKey, sessionId, runId: event.run_id ?? undefined, loopDetection }, toolName,
        params: event.args, guardEntry: this.guard(guardIdentity(event), loopDetection) };
    }
    const done = this.outcome(call.ctx, call.toolName, call.params, callId ?? undefined, event.result ?? undefined,
      thrown(event.error), call.guardEntry);
    return { type: "tool_result", tool_name: call.toolName, args_hash: argsHash(call.toolName, call.params),
      outcome: done.view, guard: done.guard, run_aborted: call.guardEntry.aborted };
  }

  compactionRetry(event) {
    return compactionRetryView(this.guard(guardIdentity(event), this.loopConfig(event.agent_id)));
  }

  apply(event) {
    if (event.type === "tool_call") return this.toolCall(event);
    if (event.type === "tool_result") return this.toolResult(event);
    if (event.type === "compaction_retry") return this.compactionRetry(event);
    throw new Error(`unknown event type ${event.type}`);
  }
}

// --detector-only (a 2026.9.x install): what src/agents/tool-loop-admission.ts admitSingleToolCallLoop and
// recordLoopOutcome do for a call that carries its outcome, up to the first critical detection (from there on
// 2026.9 records the veto and runs its recovery, which live in the runner). Per tool_call event:
// {tool_name, args_hash, detection, warning, result_hash, [no_progress, outcome_kind, failure_identity_hash]};
// null for other events and after the first critical.
function detectorOnlyRun(scenario) {
  resetDiagnosticSessionStateForTest();
  const config = scenario.config ?? {};
  let critical = false;
  return scenario.events.map((event) => {
    if (event.type !== "tool_call" || critical) return null;
    const { sessionKey, sessionId } = sessionRef(event);
    const loopDetection = resolveToolLoopDetectionConfig({ cfg: config, agentId: event.agent_id ?? undefined });
    const toolName = normalizeToolName(event.tool_name || "tool");
    const scope = event.run_id ? { runId: event.run_id } : undefined;
    const out = { tool_name: toolName, args_hash: argsHash(toolName, event.args), detection: { stuck: false },
      warning: null, result_hash: null };
    if (sessionKey && loopDetection?.enabled === true) {
      const state = getDiagnosticSessionState({ sessionKey, sessionId });
      const loop = detectToolCallLoop(state, toolName, event.args, loopDetection, scope);
      out.detection = detectionView(loop);
      if (loop.stuck && loop.level === "critical") {
        critical = true;
        return out;
      }
      if (loop.stuck) {
        const base = loop.warningKey ?? `${loop.detector}:${toolName}`;
        const key = event.run_id ? `${event.run_id}:${base}` : base;
        out.warning = { emitted: shouldEmitLoopWarning(state, key, loop.count), key, bucket: Math.floor(loop.count / 10) };
      }
      recordToolCall(state, toolName, event.args, event.tool_call_id, loopDetection, scope);
    }
    if (sessionKey || sessionId) {
      const record = recordToolCallOutcome(getDiagnosticSessionState({ sessionKey, sessionId }), {
        toolName, toolParams: event.args, toolCallId: event.tool_call_id, result: event.result ?? undefined,
        error: thrown(event.error), config: loopDetection, ...event.run_id && { runId: event.run_id } });
      out.result_hash = record?.resultHash ?? null;
      if (record?.noProgress) out.no_progress = true;
      if (record?.outcomeKind) out.outcome_kind = record.outcomeKind;
      if (record?.failureIdentityHash) out.failure_identity_hash = record.failureIdentityHash;
    }
    return out;
  });
}

// --runner (a 2026.9.x install): the embedded runner's tool cycle past the first critical detection, run by
// OpenClaw's own agent loop. Each run's attempt is OpenClaw's runAgentLoop (packages/agent-core/src/agent-loop.ts:
// the recovery flag, completeToolLoopInterventionBatch's recovery and terminal blocks, the run's termination
// after a terminal block, the warning note) with the embedded runner's batch admission createToolLoopBatchAdmission
// (src/agents/embedded-agent-runner/run/tool-loop-recovery.ts, taken out of its dist file by name:
// admitToolCallBatch, veto records, commit at launch) and every tool wrapped by wrapToolWithBeforeToolCallHook
// (recordLoopOutcome, whose onToolOutcome feeds the run's post-compaction guard, as the embedded runner wires it;
// the guard is taken out of its dist file as for 2026.7). Nothing of that is emulated here. What this file
// supplies is the model and the tools: the model answers each turn with the scenario's next tool call of that run
// as a one-call assistant message (spec §3.1: the vectors' one-call batches), the tool returns the event's result
// or throws its error. What it reads back is observed: the tool result message (block text, note), the session
// history (veto record, committed call, outcome), the admission's answer (warnings), the run's terminal assistant
// message, the guard's verdicts. Glue, as the vectors model it (spec §3.3): a run whose attempt ended in a
// terminal block continues its transcript (runAgentLoop again with the same recovery state, as Agent.continue
// does) when the scenario has more calls of it; a compaction_retry starts a new attempt (a new prompt: a fresh
// recovery state), also of a terminated run (which stays terminated: run_terminated is true from a terminal block
// on, in that run; a guard's abort, which ends the run in OpenClaw, likewise leaves run_aborted true).
// Per tool_call event: {event, type, tool_name, args_hash, decision, detection, warning, blocked, [block_reason,
// block_text, tool_loop_recovery, veto_recorded], recorded_call, outcome, guard, run_aborted, run_terminated};
// per compaction_retry event {event, type, guard}; per tool_result event {event, type, tool_name, args_hash,
// ignored, run_aborted, run_terminated} (its call was blocked: it never ran) or {event, type, tool_name,
// args_hash, outcome, guard, run_aborted, run_terminated} (a deferred call's tool, waiting since its tool_call,
// returns the result or throws the error; its warning note goes to the call's entry). Scenarios
// (bench/difffuzz.py runner_decides): tool calls with their outcome (a result object or a thrown error) or
// deferred (outcome_follows, the tool_result before the run's next event, in the call's session fields), tool
// call ids, object args.
const TERMINATED = "OpenClaw stopped this run because tool-loop recovery encountered another critical loop. " +
  "No blocked tool action was executed.";
const runnerParts = args.includes("--runner") ? await loadRunner() : undefined;

async function loadRunner() {
  const { runAgentLoop } = await load("agent-core-", ["runAgentLoop"]);
  const { wrapToolWithBeforeToolCallHook, admitToolCallBatch, clearBatchAdmittedToolCallsForRun } = await load(
    BEFORE, ["wrapToolWithBeforeToolCallHook", "admitToolCallBatch", "clearBatchAdmittedToolCallsForRun"]);
  const { attachInternalToolBatchLifecycle } = await load("internal-hooks-", ["attachInternalToolBatchLifecycle"]);
  const { normalizeCodeModeExecBeforeHookParams } = await load("code-mode-control-tools-",
    ["normalizeCodeModeExecBeforeHookParams"]);
  const { hashToolCall } = await load("tool-loop-detection-", ["hashToolCall"]);
  const source = functionSource("builtin-openclaw-", "createToolLoopBatchAdmission");
  const logName = source.match(/\b(log\$?\d*)\.error\(/)?.[1] ?? "log";
  const createToolLoopBatchAdmission = new Function("normalizeCodeModeExecBeforeHookParams", "admitToolCallBatch",
    "attachInternalToolBatchLifecycle", "hashToolCall", logName, `${source}\nreturn createToolLoopBatchAdmission;`)(
    normalizeCodeModeExecBeforeHookParams, admitToolCallBatch, attachInternalToolBatchLifecycle, hashToolCall,
    { error() {}, warn() {}, info() {}, debug() {} });
  return { runAgentLoop, wrapToolWithBeforeToolCallHook, createToolLoopBatchAdmission,
    clearBatchAdmittedToolCallsForRun };
}

const USAGE = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };

function assistant(content, stopReason) {
  const message = { role: "assistant", content, stopReason, api: "oracle", provider: "oracle", model: "oracle",
    usage: USAGE, timestamp: Date.now() };
  return { async *[Symbol.asyncIterator]() { yield { type: "done", reason: stopReason, message }; },
    result: async () => message };
}

// One attempt of one run: OpenClaw's agent loop, fed one tool call per model turn by the driver.
class Attempt {
  constructor(scenario, ctx, recovery) {
    this.scenario = scenario;
    this.turn = undefined;
    this.terminated = false;
    this.ended = false;
    this.results = [];
    const tools = [...scenario.toolNames].map((name) => runnerParts.wrapToolWithBeforeToolCallHook({
      name, label: name, description: name, parameters: { type: "object" },
      execute: async () => {
        let event = scenario.current;
        if (event.outcome_follows === true) {
          // the tool runs until the scenario's tool_result for it: the loop waits here
          event = await new Promise((resolve) => {
            scenario.running.set(event.tool_call_id, { attempt: this, resolve });
            this.markIdle();
          });
        }
        if (event.error !== undefined && event.error !== null) throw thrown(event.error);
        return JSON.parse(JSON.stringify(event.result));
      },
    }, ctx));
    const admission = runnerParts.createToolLoopBatchAdmission(ctx);
    const beforeToolBatch = admission && (async (input, signal) => {
      const answer = await admission(input, signal);
      scenario.admission = answer;
      return answer;
    });
    const model = { id: "oracle", provider: "oracle", api: "oracle" };
    this.idle = this.nextIdle();
    const streamFn = () => new Promise((resolve) => {
      this.take = resolve;
      this.markIdle();
    });
    const emit = async (event) => {
      if (event.type === "turn_end" && event.toolResults?.length) this.results.push(...event.toolResults);
      if (event.type === "message_end" && event.message?.role === "assistant"
        && event.message.content?.[0]?.text === TERMINATED) this.terminated = true;
      if (event.type === "agent_end" && ctx.runId) runnerParts.clearBatchAdmittedToolCallsForRun(ctx.runId);
    };
    this.loop = runnerParts.runAgentLoop([{ role: "user", content: "go", timestamp: Date.now() }],
      { systemPrompt: "", messages: [], tools }, { model, convertToLlm: (messages) => messages, beforeToolBatch,
        toolLoopRecoveryState: recovery }, emit, undefined, streamFn)
      .catch((error) => { this.failure = error; })
      .finally(() => { this.ended = true; this.markIdle(); });
  }

  nextIdle() {
    return new Promise((resolve) => { this.markIdle = resolve; });
  }

  // the tool call of `event` as the model's next turn; resolves when the loop waits for the next turn or has ended
  async call(event) {
    this.results = [];
    this.idle = this.nextIdle();
    const take = this.take;
    this.take = undefined;
    take(assistant([{ type: "toolCall", id: event.tool_call_id ?? undefined, name: event.tool_name,
      arguments: event.args }],
      "toolUse"));
    await this.idle;
    if (this.failure) throw this.failure;
    return this.results;
  }

  // the result of a call whose tool is running (outcome_follows): the tool returns it, the turn ends
  async finish(running, event) {
    this.results = [];
    this.idle = this.nextIdle();
    running.resolve(event);
    await this.idle;
    if (this.failure) throw this.failure;
    return this.results;
  }

  async end() {
    if (!this.ended && this.take) {
      this.idle = this.nextIdle();
      this.take(assistant([{ type: "text", text: "done" }], "stop"));
    }
    await this.loop;
  }
}

function historyOf(event) {
  const { sessionKey, sessionId } = sessionRef(event);
  if (!sessionKey && !sessionId) return [];
  return getDiagnosticSessionState({ sessionKey, sessionId }).toolCallHistory ?? [];
}

// The model-visible texts of a tool result message.
function resultTexts(message) {
  return (message?.content ?? []).filter((block) => block?.type === "text").map((block) => block.text);
}

// The outcome of the record a call left in the session history (its own record, committed at launch and then
// given its outcome, or with detection off appended with it).
function outcomeView(record) {
  const view = { recorded: Boolean(record?.resultHash || record?.outcomeKind), result_hash: record?.resultHash ?? null,
    unknown_tool_name: record?.unknownToolName ?? null };
  if (record?.noProgress) view.no_progress = true;
  if (record?.outcomeKind) view.outcome_kind = record.outcomeKind;
  if (record?.failureIdentityHash) view.failure_identity_hash = record.failureIdentityHash;
  return view;
}

const NOTE = "[System note: Tool-loop warning";

async function runnerRun(scenario) {
  resetDiagnosticSessionStateForTest();
  const config = scenario.config ?? {};
  const state = { toolNames: new Set(scenario.events.filter((e) => e.type === "tool_call").map((e) => e.tool_name)),
    current: undefined, admission: undefined, running: new Map() };
  const attempts = new Map();
  const recoveries = new Map();
  const guards = new Map();
  const terminated = new Set();
  const calls = new Map(); // tool call id -> {out, event} of a deferred call, until its result
  const expected = [];
  try {
    for (const event of scenario.events) {
      const identity = guardIdentity(event);
      const loopDetection = resolveToolLoopDetectionConfig({ cfg: config, agentId: event.agent_id ?? undefined });
      // the embedded runner's guard (one per run, spec §7) observes what recordLoopOutcome hands its onToolOutcome
      const guardEntry = guardEntryFor(guards, identity, loopDetection);
      if (event.type === "compaction_retry") {
        const own = new Set(attempts.get(identity)?.values() ?? []);
        if ([...state.running.values()].some((running) => own.has(running.attempt))) {
          throw new Error("a compaction_retry while a call of that run waits for its tool_result");
        }
        for (const attempt of own) await attempt.end();
        attempts.delete(identity);
        recoveries.set(identity, { criticalToolLoopSeen: false });
        expected.push(compactionRetryView(guardEntry));
        continue;
      }
      if (event.type === "tool_result") {
        expected.push(await runnerResult(event, state, calls, terminated.has(identity), guardEntry));
        continue;
      }
      if (event.type !== "tool_call") throw new Error(`--runner takes no ${event.type} events`);
      const { sessionKey, sessionId } = sessionRef(event);
      // one attempt per hook context (run id, session, agent: a blank run id is its own run to OpenClaw's hooks),
      // the recovery state shared by the guard identity (spec §3.3)
      if (!attempts.has(identity)) attempts.set(identity, new Map());
      const contextKey = JSON.stringify([event.run_id ?? null, sessionKey ?? null, sessionId ?? null,
        event.agent_id ?? null]);
      let attempt = attempts.get(identity).get(contextKey);
      if (attempt?.ended) attempt = undefined;
      if (!attempt) {
        if (!recoveries.has(identity)) recoveries.set(identity, { criticalToolLoopSeen: false });
        attempt = new Attempt(state, { sessionKey, sessionId, runId: event.run_id ?? undefined,
          agentId: event.agent_id ?? undefined, loopDetection, onToolOutcome: (observation) => {
            if (!observation.presentationOnly) state.guarded = observeGuard(guardEntry, observation);
          } }, recoveries.get(identity));
        attempts.get(identity).set(contextKey, attempt);
        await attempt.idle;
      }
      const toolName = normalizeToolName(event.tool_name || "tool");
      const out = { type: "tool_call", tool_name: toolName, args_hash: argsHash(toolName, event.args),
        decision: "allow", detection: { stuck: false }, warning: null, blocked: false };
      // what the admission's detection sees (it detects on a copy of the history, as here)
      if (sessionKey && loopDetection?.enabled === true) {
        const live = getDiagnosticSessionState({ sessionKey, sessionId });
        const loop = detectToolCallLoop({ ...live, toolCallHistory: [...live.toolCallHistory ?? []] }, toolName,
          event.args, loopDetection, event.run_id ? { runId: event.run_id } : undefined);
        out.detection = detectionView(loop);
        if (loop.stuck && loop.level !== "critical") {
          const base = loop.warningKey ?? `${loop.detector}:${toolName}`;
          out.warning = { key: event.run_id ? `${event.run_id}:${base}` : base, bucket: Math.floor(loop.count / 10) };
        }
      }
      const before = new Set(historyOf(event));
      state.current = event;
      state.admission = undefined;
      state.guarded = undefined;
      const results = await attempt.call(event);
      const callId = event.tool_call_id ?? undefined;
      const running = state.running.has(callId);
      const message = results.find((result) => result.toolCallId === callId);
      if (!message && !running) throw new Error(`no tool result for ${event.tool_call_id}`);
      const texts = resultTexts(message);
      const details = message?.details ?? {};
      const added = historyOf(event).filter((record) => !before.has(record) && record.toolCallId === callId);
      if (details.status === "blocked" && details.deniedReason === "tool-loop" && details.intervention) {
        out.decision = "block";
        out.blocked = true;
        out.block_reason = details.intervention.reason;
        out.block_text = texts.join("\n");
        if (attempt.terminated) terminated.add(identity);
        out.tool_loop_recovery = attempt.terminated ? "terminal" : "recovery";
        out.veto_recorded = added.some((record) => record.outcomeKind === "tool-loop-veto");
      }
      if (out.warning) {
        const warned = (state.admission?.warnings ?? []).some((entry) => entry.toolCallId === (callId ?? ""));
        out.warning.emitted = warned;
        const note = texts.at(-1);
        if (warned && typeof note === "string" && note.startsWith(NOTE)) out.warning.note = note;
        if (warned && !out.blocked) out.decision = "warn";
      }
      // a blocked call added its veto record, any other call its own record
      const record = out.blocked ? undefined : added.at(-1);
      out.recorded_call = !out.blocked && Boolean(sessionKey) && loopDetection?.enabled === true
        && record !== undefined;
      out.outcome = running ? { deferred: true } : outcomeView(record);
      out.guard = state.guarded ?? Scenario.guardView(guardEntry);
      out.run_aborted = guardEntry.aborted;
      out.run_terminated = terminated.has(identity);
      if (running) calls.set(callId, { out, event });
      expected.push(out);
    }
    if (state.running.size) throw new Error(`calls without their tool_result: ${[...state.running.keys()]}`);
  } finally {
    for (const running of state.running.values()) {
      await running.attempt.finish(running, { error: "the scenario ended" }).catch(() => {});
    }
    state.running.clear();
    for (const contexts of attempts.values()) for (const attempt of contexts.values()) await attempt.end();
  }
  return expected;
}

// A tool_result event: the result of a deferred call whose tool is running (its tool returns it; the call's
// warning note, if any, is on the result message and goes to the call's entry), or of a call that never ran (a
// blocked one: OpenClaw has no result for it).
async function runnerResult(event, state, calls, runTerminated, guardEntry) {
  const callId = event.tool_call_id ?? undefined;
  const running = state.running.get(callId);
  if (!running) {
    const toolName = normalizeToolName(event.tool_name || "tool"); // the result's own fields, as for 2026.7
    return { type: "tool_result", tool_name: toolName, args_hash: argsHash(toolName, event.args),
      ignored: BLOCKED_RESULT_IGNORED, run_aborted: guardEntry.aborted, run_terminated: runTerminated };
  }
  state.running.delete(callId);
  const call = calls.get(callId);
  calls.delete(callId);
  const before = new Set(historyOf(call.event));
  state.guarded = undefined;
  const results = await running.attempt.finish(running, { ...call.event, result: event.result, error: event.error });
  const message = results.find((result) => result.toolCallId === callId);
  const note = resultTexts(message).at(-1);
  if (call.out.warning?.emitted && typeof note === "string" && note.startsWith(NOTE)) call.out.warning.note = note;
  // the call's record: committed at launch (then matched by this outcome), or appended with it
  const record = historyOf(call.event).filter((entry) => entry.toolCallId === callId && (!before.has(entry)
    || entry.resultHash || entry.outcomeKind)).at(-1);
  return { type: "tool_result", tool_name: call.out.tool_name, args_hash: call.out.args_hash,
    outcome: outcomeView(record), guard: state.guarded ?? Scenario.guardView(guardEntry),
    run_aborted: guardEntry.aborted, run_terminated: runTerminated };
}

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  const scenario = JSON.parse(line);
  try {
    let expected;
    if (runnerParts) expected = (await runnerRun(scenario)).map((entry, index) => ({ event: index, ...entry }));
    else if (detectorOnly) expected = detectorOnlyRun(scenario);
    else {
      const run = new Scenario(scenario.config);
      expected = scenario.events.map((event, index) => ({ event: index, ...run.apply(event) }));
    }
    process.stdout.write(`${JSON.stringify({ name: scenario.name, expected })}\n`);
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ name: scenario.name, error: String(error?.stack ?? error) })}\n`);
  }
}
