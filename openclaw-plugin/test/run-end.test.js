// How a run ends through the plugin, on OpenClaw 2026.7.x and 2026.9.6: each stop path (guard
// abort, run_ended, 2026.9.6 terminal block, fail closed), the texts the model reads (block_text,
// warning.note), the profile put on every event, and outcomes of calls loopwatch never judged.
// Verdict fields: CONTRACTS 2 and 3 and ../shared/conformance/README.md ("Fields added by the
// 2026.9.6 profile"); OpenClaw's texts: docs/detection-rules.md §11.3.1, §11.3.3.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import plugin from "../index.js";
import { createHooks } from "../src/hooks.js";
import { profileForVersion } from "../src/host.js";
import { answer, fakeApi, startFakeGateway } from "./fake-gateway.js";
import * as oc from "./openclaw-payloads.js";

const servers = [];
after(async () => Promise.all(servers.map((server) => server.close())));

const REASON_20 = "CRITICAL: Called read with identical outcomes 20 times. Session execution blocked to prevent runaway loops.";
const REASON_21 = "CRITICAL: Called read with identical outcomes 21 times. Session execution blocked to prevent runaway loops.";
const RECOVERY = `${REASON_20}\n\nDo not repeat this exact tool action. Reassess the task. You may answer the user, ask for clarification, or continue with a different tool or different arguments.`;
const TERMINAL = `${REASON_21}\n\nCritical tool-loop recovery failed because another critical loop was detected. This run is stopping now.`;
const NOTE = "[System note: Tool-loop warning after 10 repeated calls. Change your approach or stop if you are not making progress.]";
const WARNING = "WARNING: You have called read 10 times with identical arguments. If this is not making progress, stop retrying and report the task as failed.";
const ENDED = "loopwatch: this run has ended (generic_repeat: terminal tool-loop block); the tool call was not executed";

async function loaded(respond, { settings = {}, version = "2026.9.6" } = {}) {
  const server = await startFakeGateway(respond);
  servers.push(server);
  // 15 s unless the test gives its own: the fake's answers are expected, and a loaded machine can be slow
  const fake = fakeApi({ gatewayUrl: server.url, timeoutMs: 15000, ...settings }, version === null ? undefined : { version });
  plugin.register(fake.api);
  return {
    server,
    logs: fake.logs,
    before: fake.handler("before_tool_call"),
    after: fake.handler("after_tool_call"),
    persist: fake.handler("tool_result_persist"),
    compaction: fake.handler("after_compaction"),
  };
}

/** call n of the scripted loop: `read {path: "missing.txt"}` with id call_n in run-1 */
function call(n, run = "run-1") {
  return [oc.beforeToolCall("read", { path: "missing.txt" }, { run, call: `call_${n}` }), oc.toolContext({ run, call: `call_${n}` })];
}

test("profile from OpenClaw's version: 2026.7.x -> openclaw-2026.7, 2026.9.x and later -> openclaw-2026.9.6, else none", () => {
  assert.equal(profileForVersion("2026.7.35"), "openclaw-2026.7");
  assert.equal(profileForVersion("2026.9.6"), "openclaw-2026.9.6");
  assert.equal(profileForVersion("2026.9.6-beta.2"), "openclaw-2026.9.6");
  assert.equal(profileForVersion("2026.12.1"), "openclaw-2026.9.6");
  assert.equal(profileForVersion("2027.1.0"), "openclaw-2026.9.6");
  assert.equal(profileForVersion("2026.8.3"), null);
  assert.equal(profileForVersion("2026.6.1"), null);
  assert.equal(profileForVersion("unknown"), null);
  assert.equal(profileForVersion(undefined), null);
});

for (const [version, settings, expected] of [
  ["2026.9.6", {}, "openclaw-2026.9.6"],
  ["2026.7.35", {}, "openclaw-2026.7"],
  [null, {}, undefined],
  ["2026.9.6", { profile: "openclaw-2026.7" }, "openclaw-2026.7"],
  ["2026.9.6", { profile: "none" }, undefined],
]) {
  test(`every event carries the host's profile: OpenClaw ${version ?? "(no runtime.version)"} ${JSON.stringify(settings)} -> ${expected}`, async () => {
    const { server, before, after, compaction } = await loaded(() => answer("allow"), { settings, version });
    const [event, ctx] = call(1);
    await before(event, ctx);
    await after(oc.afterToolCallResult("read", { path: "missing.txt" }, oc.textResult("x"), { run: "run-1", call: "call_1" }), ctx);
    await compaction(oc.afterCompaction(), { runId: "run-1", sessionKey: "agent:main:main", sessionId: "sess-1" });
    assert.deepEqual(server.requests.map((request) => request.body.profile), [expected, expected, expected]);
    assert.equal(server.requests.every((request) => ("profile" in request.body) === (expected !== undefined)), true);
  });
}

test("2026.9.6 recovery block: the model reads block_text (message + recovery paragraph); the run goes on", async () => {
  const { before } = await loaded((request) => request.body.tool_call_id === "call_21"
    ? answer("block", { detector: "generic_repeat", count: 20, message: REASON_20,
      verdict: { block_reason: REASON_20, block_text: RECOVERY, tool_loop_recovery: "recovery", veto_recorded: true, run_terminated: false } })
    : answer("allow"));
  assert.deepEqual(await before(...call(21)), { block: true, blockReason: RECOVERY });
  assert.equal(await before(...call(22)), undefined, "a recovery block does not end the run");
});

test("2026.9.6 terminal block: blockReason is the terminal text, and no later call of the run executes", async () => {
  const { server, before, logs } = await loaded((request) => {
    const n = Number(request.body.tool_call_id?.split("_")[1]);
    if (n === 22) {
      return answer("abort", { detector: "generic_repeat", count: 21, message: REASON_21,
        verdict: { block_reason: REASON_21, block_text: TERMINAL, tool_loop_recovery: "terminal", run_terminated: true } });
    }
    return n > 22
      ? answer("abort", { message: ENDED, verdict: { block_reason: ENDED, run_ended: { by: "generic_repeat", reason: "terminal tool-loop block" } } })
      : answer("allow");
  });
  assert.deepEqual(await before(...call(22)), { block: true, blockReason: TERMINAL });
  assert.deepEqual(await before(...call(23)), { block: true, blockReason: ENDED }, "run_ended: the verdict's own text");
  assert.deepEqual(logs.filter(([level]) => level === "error").map(([, m]) => m), [`loopwatch: ${TERMINAL}`]);
  assert.equal(server.requests.length, 2);
  const other = await before(...call(24, "run-2"));
  assert.deepEqual(other, { block: true, blockReason: ENDED }, "the gateway's word for another run is followed too");
});

test("an ended run stays ended when the gateway then allows, or cannot answer: blocked with the ending text", async () => {
  let down = false;
  const { before } = await loaded((request) => {
    if (down) {
      return { status: 503, body: { error: "down" } };
    }
    return request.body.tool_call_id === "call_22"
      ? answer("block", { message: REASON_21, verdict: { block_reason: REASON_21, block_text: TERMINAL, tool_loop_recovery: "terminal", run_terminated: true } })
      : answer("allow");
  });
  assert.deepEqual(await before(...call(22)), { block: true, blockReason: TERMINAL }, "terminal recovery ends the run even when the decision says block");
  assert.deepEqual(await before(...call(23)), { block: true, blockReason: TERMINAL }, "an allow does not reopen it");
  down = true;
  assert.deepEqual(await before(...call(24)), { block: true, blockReason: TERMINAL }, "fail open does not reopen it either");
  assert.equal(await before(...call(25, "run-2")), undefined, "another run goes on (fail open)");
});

test("a 2026.7 guard abort on an outcome ends the run: later calls are blocked with the guard's message", async () => {
  const abort = "CRITICAL: tool read repeated 3 times with identical arguments and identical results within 3 attempts after auto-compaction. The compaction did not break the loop. Aborting to prevent runaway resource use.";
  const { before, after } = await loaded((request) => request.body.type === "tool_result"
    ? answer("abort", { detector: "compaction_loop_persisted", count: 3, message: null, verdict: { run_aborted: true, guard: { message: abort } } })
    : answer("allow"), { version: "2026.7.35" });
  const [event, ctx] = call(1);
  await before(event, ctx);
  await after(oc.afterToolCallResult("read", { path: "missing.txt" }, oc.textResult("same"), { run: "run-1", call: "call_1" }), ctx);
  assert.deepEqual(await before(...call(2)), { block: true, blockReason: abort });
});

test("warning note: appended to the warned call's tool result in tool_result_persist, once; other results untouched", async () => {
  const { before, persist, logs } = await loaded((request) => request.body.tool_call_id === "call_11"
    ? answer("warn", { detector: "generic_repeat", count: 10, message: WARNING, verdict: { warning: { emitted: true, note: NOTE } } })
    : answer("allow"));
  assert.equal(await before(...call(11)), undefined, "a warning lets the call run");
  assert.deepEqual(logs.filter(([level]) => level === "warn").map(([, m]) => m), [`loopwatch: ${WARNING}`]);
  const result = { role: "toolResult", toolCallId: "call_11", toolName: "read", content: [{ type: "text", text: "File not found" }], isError: true };
  const ctx = { sessionKey: "agent:main:main", toolCallId: "call_11", toolName: "read" };
  const rewritten = persist({ toolName: "read", toolCallId: "call_11", message: result }, ctx);
  assert.deepEqual(rewritten, { message: { ...result, content: [{ type: "text", text: "File not found" }, { type: "text", text: NOTE }] } });
  assert.equal(persist({ toolName: "read", toolCallId: "call_11", message: result }, ctx), undefined, "the note is given once");
  assert.equal(persist({ toolName: "read", toolCallId: "call_12", message: { ...result, toolCallId: "call_12" } }, { ...ctx, toolCallId: "call_12" }), undefined);
  assert.equal(persist({ toolName: "read", toolCallId: "call_11", message: result }, { ...ctx, sessionKey: "agent:other:main" }), undefined,
    "call ids repeat across sessions: the note belongs to its session");
});

test("a 2026.7 warning (no note) leaves the tool result alone", async () => {
  const { before, persist } = await loaded(() => answer("warn", { message: WARNING, verdict: { warning: { emitted: true } } }), { version: "2026.7.35" });
  await before(...call(11));
  const result = { role: "toolResult", toolCallId: "call_11", content: [{ type: "text", text: "x" }] };
  assert.equal(persist({ toolCallId: "call_11", message: result }, { sessionKey: "agent:main:main", toolCallId: "call_11" }), undefined);
});

test("outcomes of calls loopwatch never judged (OpenClaw's own detector or another plugin blocked them) are marked judged: false", async () => {
  const { server, after, before } = await loaded(() => answer("allow"));
  const veto = { content: [{ type: "text", text: RECOVERY }], details: { status: "blocked", deniedReason: "tool-loop", intervention: { kind: "critical-tool-loop" } } };
  const denied = { content: [{ type: "text", text: "no" }], details: { status: "blocked", deniedReason: "plugin-before-tool-call", reason: "no" } };
  await after(oc.afterToolCallResult("read", { path: "missing.txt" }, veto, { run: "run-1", call: "call_9" }), oc.toolContext({ run: "run-1", call: "call_9" }));
  await after(oc.afterToolCallResult("read", { path: "missing.txt" }, denied, { run: "run-1", call: "call_10" }), oc.toolContext({ run: "run-1", call: "call_10" }));
  assert.deepEqual(server.requests.map((request) => [request.body.type, request.body.tool_call_id, request.body.judged, request.body.blocked_by]), [
    ["tool_result", "call_9", false, "openclaw:loop-detection"], ["tool_result", "call_10", false, "openclaw:plugin"],
  ]);
  // a call it judged is reported as judged, once: a second after_tool_call for the same id is a never-judged one
  const [event, ctx] = call(11);
  await before(event, ctx);
  await after(oc.afterToolCallResult("read", { path: "missing.txt" }, oc.textResult("x"), { run: "run-1", call: "call_11" }), ctx);
  await after(oc.afterToolCallResult("read", { path: "missing.txt" }, oc.textResult("x"), { run: "run-1", call: "call_11" }), ctx);
  assert.deepEqual(server.requests.slice(2).map((request) => [request.body.type, request.body.tool_call_id, request.body.judged]), [
    ["tool_call", "call_11", undefined], ["tool_result", "call_11", undefined], ["tool_result", "call_11", false],
  ]);
});

test("fail open: a call run without a verdict has its result sent with ran_without_verdict: true", async () => {
  let down = true;
  const { server, before, after } = await loaded(() => (down ? { status: 503, body: { error: "down" } } : answer("allow")));
  const [event, ctx] = call(1);
  assert.equal(await before(event, ctx), undefined);
  down = false;
  await after(oc.afterToolCallResult("read", { path: "missing.txt" }, oc.textResult("x"), { run: "run-1", call: "call_1" }), ctx);
  const [event2, ctx2] = call(2);
  await before(event2, ctx2);
  await after(oc.afterToolCallResult("read", { path: "missing.txt" }, oc.textResult("x"), { run: "run-1", call: "call_2" }), ctx2);
  assert.deepEqual(server.requests.map((request) => [request.body.type, request.body.tool_call_id, request.body.ran_without_verdict]), [
    ["tool_call", "call_1", undefined], ["tool_result", "call_1", true], ["tool_call", "call_2", undefined], ["tool_result", "call_2", undefined],
  ]);
  assert.equal(typeof server.requests[0].body.deadline, "number");
});

test("fail closed: no deadline is sent (the runner never runs a call without its verdict)", async () => {
  const { server, before } = await loaded(() => answer("allow"), { settings: { failMode: "closed" } });
  await before(...call(1));
  assert.equal("deadline" in server.requests[0].body, false);
});

test("an ended run's calls read run_ended.message first (the gateway's order), then block_text", async () => {
  const ranEnded = "loopwatch: this run has ended: CRITICAL: ... (generic_repeat). No further tool call of it runs.";
  const { before } = await loaded(() => answer("abort", { message: REASON_21,
    verdict: { block_reason: REASON_21, block_text: TERMINAL, run_ended: { by: "generic_repeat", reason: REASON_21, message: ranEnded } } }));
  assert.deepEqual(await before(...call(30)), { block: true, blockReason: ranEnded });
});

test("the judged-call memory is bounded: past 10,000 calls the oldest are forgotten", async () => {
  const sent = [];
  const client = { send: async (event) => { sent.push(event); return { ok: true, answer: { decision: "allow", verdict: null } }; } };
  const config = { gatewayUrl: "http://unused", token: null, timeoutMs: 1000, failMode: "open", reportCompactions: true, profile: "auto" };
  const hooks = createHooks({ config, client });
  for (let n = 0; n <= 10000; n += 1) {
    await hooks.beforeToolCall(oc.beforeToolCall("read", {}, { run: "r", call: `c${n}` }), oc.toolContext({ run: "r", call: `c${n}` }));
  }
  const before = sent.length;
  await hooks.afterToolCall(oc.afterToolCallResult("read", {}, oc.textResult("x"), { run: "r", call: "c0" }), oc.toolContext({ run: "r", call: "c0" }));
  await hooks.afterToolCall(oc.afterToolCallResult("read", {}, oc.textResult("x"), { run: "r", call: "c10000" }), oc.toolContext({ run: "r", call: "c10000" }));
  assert.deepEqual(sent.slice(before).map((event) => [event.tool_call_id, event.judged]), [["c0", false], ["c10000", undefined]]);
});
