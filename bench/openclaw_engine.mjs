// OpenClaw's own loop detection, driven over a loopwatch event file: the floor of bench/vs_openclaw.py.
//
//   node bench/openclaw_engine.mjs <openclaw package dir> <events.jsonl>
//
// Loads tools.loopDetection from the OpenClaw install given (its dist/tool-loop-detection-*.js and the
// normalizeToolName of dist/tool-policy-*.js, found by their export lines; nothing of OpenClaw is in this
// repository) and applies each event the way OpenClaw's before_tool_call hook and its outcome recording do
// (src/agents/agent-tools.before-tool-call.ts): detectToolCallLoop, the warning-bucket dedupe, recordToolCall
// unless the call is blocked, then recordToolCallOutcome with the call's result or thrown error. Session
// states are kept per session key, as OpenClaw's diagnostic session state is. compaction_retry events are
// counted and skipped (the post-compaction guard lives in OpenClaw's runner loop, not in this module).
//
// Protocol on stdin/stdout, one JSON line each: it prints {"ready": events, "parse_cpu_us": ...} once the
// file is parsed; "reset" empties the states and the verdict counts; "run A B" applies events A..B-1 and
// prints {"cpu_us": process CPU time of that, "wall_us": ..., "verdicts": {counts since the reset}}.
// EOF on stdin ends it.
import { createReadStream, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { createInterface } from "node:readline";

const [pkg, eventsPath] = process.argv.slice(2);
const dist = join(pkg, "dist");

async function load(prefix, names) {
  for (const file of readdirSync(dist)) {
    if (!file.startsWith(prefix) || !file.endsWith(".js")) continue;
    const text = readFileSync(join(dist, file), "utf8");
    const line = text.match(/^export \{([^}]*)\};?\s*$/m);
    if (!line) continue;
    const aliases = Object.fromEntries(line[1].split(",").map((part) => part.trim().split(/\s+as\s+/)));
    if (!names.every((name) => name in aliases)) continue;
    const module = await import(pathToFileURL(join(dist, file)).href);
    return Object.fromEntries(names.map((name) => [name, module[aliases[name]]]));
  }
  throw new Error(`no dist/${prefix}*.js exporting ${names.join(", ")} in ${pkg}`);
}

const { detectToolCallLoop, recordToolCall, recordToolCallOutcome } = await load("tool-loop-detection-",
  ["detectToolCallLoop", "recordToolCall", "recordToolCallOutcome"]);
const { normalizeToolName } = await load("tool-policy-", ["normalizeToolName"]);

const config = { enabled: true };
const events = [];
let parseCpu = 0;
for await (const line of createInterface({ input: createReadStream(eventsPath), crlfDelay: Infinity })) {
  if (!line) continue;
  const start = process.cpuUsage();
  events.push(JSON.parse(line));
  const spent = process.cpuUsage(start);
  parseCpu += spent.user + spent.system;
}

// src/agents/agent-tools.before-tool-call.ts shouldEmitLoopWarning (bucket size 10, at most 256 keys)
function shouldEmitLoopWarning(state, warningKey, count) {
  if (!state.toolLoopWarningBuckets) state.toolLoopWarningBuckets = new Map();
  const bucket = Math.floor(count / 10);
  if (bucket <= (state.toolLoopWarningBuckets.get(warningKey) ?? 0)) return false;
  state.toolLoopWarningBuckets.set(warningKey, bucket);
  if (state.toolLoopWarningBuckets.size > 256) {
    const oldest = state.toolLoopWarningBuckets.keys().next().value;
    if (oldest) state.toolLoopWarningBuckets.delete(oldest);
  }
  return true;
}

let states = new Map();
let verdicts = {};

function reset() {
  states = new Map();
  verdicts = { allow: 0, warn: 0, block: 0, skipped: 0 };
}

function run(first, end) {
  const wallStart = process.hrtime.bigint();
  const cpuStart = process.cpuUsage();
  for (let index = first; index < end; index += 1) {
    const event = events[index];
    if (event.type !== "tool_call") { verdicts.skipped += 1; continue; }
    const sessionKey = event.session_key ?? event.session_id;
    let state = states.get(sessionKey);
    if (state === undefined) { state = { sessionKey, sessionId: event.session_id }; states.set(sessionKey, state); }
    const toolName = normalizeToolName(event.tool_name || "tool");
    const params = event.args;
    const scope = event.run_id ? { runId: event.run_id } : undefined;
    const loop = detectToolCallLoop(state, toolName, params, config, scope);
    let verdict = "allow";
    if (loop.stuck) {
      if (loop.level === "critical") { verdicts.block += 1; continue; }
      const key = loop.warningKey ?? `${loop.detector}:${toolName}`;
      if (shouldEmitLoopWarning(state, event.run_id ? `${event.run_id}:${key}` : key, loop.count)) verdict = "warn";
    }
    recordToolCall(state, toolName, params, event.tool_call_id, config, scope);
    recordToolCallOutcome(state, {
      toolName, toolParams: params, toolCallId: event.tool_call_id, config,
      result: event.error == null ? event.result : undefined,
      error: event.error == null ? undefined : new Error(event.error),
      ...(event.run_id && { runId: event.run_id }),
    });
    verdicts[verdict] += 1;
  }
  const cpu = process.cpuUsage(cpuStart);
  const wall = Number(process.hrtime.bigint() - wallStart) / 1000;
  return { cpu_us: cpu.user + cpu.system, wall_us: wall, verdicts };
}

console.log(JSON.stringify({ ready: events.length, parse_cpu_us: parseCpu, node: process.version }));
for await (const line of createInterface({ input: process.stdin })) {
  const [command, first, end] = line.trim().split(/\s+/);
  if (command === "reset") reset();
  else if (command === "run") console.log(JSON.stringify(run(Number(first), Number(end))));
}
