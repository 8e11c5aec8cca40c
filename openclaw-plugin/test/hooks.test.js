// The plugin as OpenClaw loads it (register(api)) against a fake gateway: what each hook sends,
// and what it returns to OpenClaw for each decision. Payload shapes: ./openclaw-payloads.js
// (cited there from OpenClaw's docs/plugins/hooks.md and docs/plugins/hooks/tool-policy.md).
import assert from "node:assert/strict";
import { after, test } from "node:test";

import plugin from "../index.js";
import { answer, fakeApi, startFakeGateway } from "./fake-gateway.js";
import * as oc from "./openclaw-payloads.js";

// The plugin's timeout in these tests unless one gives its own: they expect the fake's answer, and a
// loaded machine's first request can take seconds (the default 5 s is checked with timeoutMs: 5000).
const ANSWER_WAIT_MS = 15000;

const servers = [];
after(async () => Promise.all(servers.map((server) => server.close())));

const CRITICAL = "CRITICAL: Called read with identical arguments and identical outcomes 20 times. Session execution blocked to prevent runaway loops.";
const ABORT = "CRITICAL: tool read repeated 3 times with identical arguments and identical results within 3 attempts after auto-compaction. The compaction did not break the loop. Aborting to prevent runaway resource use.";

/**
 * @param {Parameters<typeof startFakeGateway>[0]} respond
 * @param {Record<string, unknown>} [settings] plugin config besides gatewayUrl
 */
async function loaded(respond, settings = {}, runtime = undefined) {
  const server = await startFakeGateway(respond);
  servers.push(server);
  const fake = fakeApi({ gatewayUrl: server.url, timeoutMs: ANSWER_WAIT_MS, ...settings }, runtime);
  plugin.register(fake.api);
  return {
    server,
    logs: fake.logs,
    registered: fake.registered,
    before: fake.handler("before_tool_call"),
    after: fake.handler("after_tool_call"),
    compaction: () => fake.handler("after_compaction"),
    persist: fake.handler("tool_result_persist"),
  };
}

test("registers before_tool_call, after_tool_call, tool_result_persist and after_compaction with api.on", async () => {
  const { registered } = await loaded(() => answer("allow"), { timeoutMs: 5000 });
  assert.deepEqual(registered.map((entry) => [entry.name, entry.opts.priority]), [
    ["before_tool_call", 1000], ["after_tool_call", 1000], ["tool_result_persist", 1000], ["after_compaction", 1000],
  ]);
  assert.equal(registered[0].opts.timeoutMs, undefined, "5 s fits OpenClaw's default 15 s budget");
});

test("allow: the tool_call carries OpenClaw's ids and params, outcome_follows; the hook returns no decision", async () => {
  const { server, before } = await loaded(() => answer("allow"));
  const ctx = oc.toolContext({ call: "call-1" });
  const called = Date.now();
  const result = await before(oc.beforeToolCall("read", { path: "/workspace/notes.md" }, { call: "call-1" }), ctx);
  const returned = Date.now();
  assert.equal(result, undefined);
  const { deadline, ...body } = server.requests[0].body;
  assert.deepEqual(body, {
    type: "tool_call", run_id: "run-1", session_id: "sess-1", session_key: "agent:main:main", agent_id: "main",
    runner: "openclaw", tool_call_id: "call-1", tool_name: "read", args: { path: "/workspace/notes.md" }, outcome_follows: true,
  });
  // fail open (the default): the runner's deadline, timeoutMs after the hook was called
  assert.ok(called + ANSWER_WAIT_MS <= deadline && deadline <= returned + ANSWER_WAIT_MS, `deadline ${deadline}, called ${called}`);
});

test("warn: the tool runs (no decision) and the warning is logged in OpenClaw's words", async () => {
  const warning = "WARNING: You have called read 10 times with identical arguments. If this is not making progress, stop retrying and report the task as failed.";
  const { before, logs } = await loaded(() => answer("warn", { detector: "generic_repeat", count: 10, message: warning }));
  const result = await before(oc.beforeToolCall("read", { path: "a" }, { call: "c" }), oc.toolContext({ call: "c" }));
  assert.equal(result, undefined);
  assert.deepEqual(logs.filter(([level]) => level === "warn"), [["warn", `loopwatch: ${warning}`]]);
});

test("block: OpenClaw's {block: true, blockReason}, and the blocked call's outcome is not reported", async () => {
  const { server, before, after } = await loaded(() => answer("block", { detector: "generic_repeat", count: 20, message: CRITICAL }));
  const ctx = oc.toolContext({ call: "c21" });
  const result = await before(oc.beforeToolCall("read", { path: "a" }, { call: "c21" }), ctx);
  assert.deepEqual(result, { block: true, blockReason: CRITICAL });
  await after(oc.afterToolCallError("read", { path: "a" }, "blocked", { call: "c21" }), ctx);
  assert.equal(server.requests.length, 1, "no tool_result for a call that never ran");
});

test("abort on an outcome: every later call of that run is blocked with the guard's message, whatever the gateway answers", async () => {
  const { server, before, after } = await loaded((request) =>
    request.body.type === "tool_result" ? answer("abort", { detector: "compaction_loop_persisted", count: 3, message: ABORT }) : answer("allow"));
  await before(oc.beforeToolCall("read", { path: "a" }, { call: "c1" }), oc.toolContext({ call: "c1" }));
  await after(oc.afterToolCallResult("read", { path: "a" }, oc.textResult("same"), { call: "c1" }), oc.toolContext({ call: "c1" }));
  const next = await before(oc.beforeToolCall("exec", { command: "ls" }, { call: "c2" }), oc.toolContext({ call: "c2" }));
  assert.deepEqual(next, { block: true, blockReason: ABORT });
  assert.equal(server.requests.length, 3, "the ended run's next call is still reported (loopwatch records every call made)");
  assert.equal(server.requests[2].body.tool_call_id, "c2");
  const otherRun = await before(oc.beforeToolCall("read", { path: "a" }, { run: "run-2", call: "c3" }), oc.toolContext({ run: "run-2", call: "c3" }));
  assert.equal(otherRun, undefined, "another run of the session goes on");
});

test("abort answered to a tool call (a run already aborted): blocked, and so are the run's later calls", async () => {
  const { server, before } = await loaded(() => answer("abort", { message: ABORT }));
  const first = await before(oc.beforeToolCall("read", { path: "a" }, { call: "c1" }), oc.toolContext({ call: "c1" }));
  const second = await before(oc.beforeToolCall("read", { path: "b" }, { call: "c2" }), oc.toolContext({ call: "c2" }));
  assert.deepEqual([first, second], [{ block: true, blockReason: ABORT }, { block: true, blockReason: ABORT }]);
  assert.equal(server.requests.length, 2);
});

test("a returned result and a thrown error are reported apart (result vs error)", async () => {
  const { server, before, after } = await loaded(() => answer("allow"));
  const thrown = "HTTP 503 Service Unavailable\n  at fetchPage (web.js:10)";
  const calls = [
    ["c1", oc.afterToolCallResult("exec", { command: "make" }, oc.textResult("Error: HTTP 503"), { call: "c1" })],
    ["c2", oc.afterToolCallError("exec", { command: "make" }, thrown, { call: "c2" })],
    ["c3", oc.afterToolCallErrorStatus("exec", { command: "make" }, "HTTP 503 Service Unavailable", { call: "c3" })],
    ["c4", oc.afterToolCallAgentError("weather", { city: "Oslo" }, "Tool weather not found", { call: "c4" })],
  ];
  for (const [call, outcome] of calls) {
    const ctx = oc.toolContext({ call });
    await before(oc.beforeToolCall(outcome.toolName, outcome.params, { call }), ctx);
    await after(outcome, ctx);
  }
  const results = server.requests.map((request) => request.body).filter((body) => body.type === "tool_result");
  assert.deepEqual(results[0], {
    type: "tool_result", run_id: "run-1", session_id: "sess-1", session_key: "agent:main:main", agent_id: "main",
    runner: "openclaw", tool_call_id: "c1", tool_name: "exec", args: { command: "make" },
    result: { content: [{ type: "text", text: "Error: HTTP 503" }], details: { ok: true } }, error: null,
  });
  // thrown, caught by OpenClaw's tool adapter: the whole message (event.error has only its first line)
  assert.deepEqual([results[1].error, results[1].result], [thrown, null]);
  // returned by the tool with its own error status: a result, although OpenClaw sets `error` too
  assert.equal(results[2].error, null);
  assert.deepEqual(results[2].result.details, { status: "error", exitCode: 1, durationMs: 40, error: "HTTP 503 Service Unavailable" });
  // pi-agent's own error: the message is the result's text
  assert.deepEqual([results[3].error, results[3].result], ["Tool weather not found", null]);
});

test("a session without a session key is sent with session_key: null (OpenClaw then skips detection)", async () => {
  const { server, before } = await loaded(() => answer("allow"));
  const ctx = oc.toolContext({ call: "c1", sessionKey: null });
  await before(oc.beforeToolCall("read", { path: "a" }, { call: "c1" }), ctx);
  assert.equal(server.requests[0].body.session_key, null);
  assert.ok("session_key" in server.requests[0].body);
});

test("no session key and no session id: nothing to check, nothing sent", async () => {
  const { server, before } = await loaded(() => answer("block", { message: CRITICAL }));
  const result = await before(oc.beforeToolCall("read", {}, { call: "c1" }), { runId: "run-1", toolCallId: "c1" });
  assert.equal(result, undefined);
  assert.equal(server.requests.length, 0);
});

test("fail open: gateway down -> no decision, logged", async () => {
  const { before, logs } = await loaded(() => ({ status: 503, body: { error: "down" } }));
  const result = await before(oc.beforeToolCall("read", {}, { call: "c1" }), oc.toolContext({ call: "c1" }));
  assert.equal(result, undefined);
  assert.match(logs.find(([level]) => level === "warn")[1], /no verdict \(the loopwatch gateway answered HTTP 503: down\); failing open/);
});

test("fail closed: no verdict in time -> the call is blocked saying why; its outcome is not reported", async () => {
  const { server, before, after } = await loaded(() => ({ ...answer("allow"), delayMs: 300 }), { failMode: "closed", timeoutMs: 50 });
  const ctx = oc.toolContext({ call: "c1" });
  const result = await before(oc.beforeToolCall("read", {}, { call: "c1" }), ctx);
  assert.equal(result.block, true);
  assert.match(result.blockReason, /^loopwatch: no verdict \(no answer from the loopwatch gateway .* within \d+ ms\); failing closed: the tool call is blocked$/);
  await after(oc.afterToolCallResult("read", {}, oc.textResult("x"), { call: "c1" }), ctx);
  await new Promise((resolve) => setTimeout(resolve, 400)); // let a late request land, if one was sent
  // the tool_call itself may or may not have reached the slow gateway; no tool_result ever does
  assert.ok(server.requests.length <= 1);
  assert.ok(server.requests.every((request) => request.body.type === "tool_call"));
});

test("fail closed: an outcome that cannot be reported stops the run (later calls blocked)", async () => {
  const { before, after } = await loaded((request) => (request.body.type === "tool_result" ? { status: 413, body: "too big" } : answer("allow")), { failMode: "closed" });
  await before(oc.beforeToolCall("read", {}, { call: "c1" }), oc.toolContext({ call: "c1" }));
  await after(oc.afterToolCallResult("read", {}, oc.textResult("x".repeat(100)), { call: "c1" }), oc.toolContext({ call: "c1" }));
  const next = await before(oc.beforeToolCall("read", {}, { call: "c2" }), oc.toolContext({ call: "c2" }));
  assert.equal(next.block, true);
  assert.match(next.blockReason, /the tool outcome could not be reported \(the loopwatch gateway refused the event as too large \(413\)\); failing closed: the run is stopped/);
});

test("the gateway's own timeout answer is followed: block with a reason when its on_timeout is block", async () => {
  const { before } = await loaded(() => answer("block", { timed_out: true, on_timeout: "block", message: null }));
  const result = await before(oc.beforeToolCall("read", {}, { call: "c1" }), oc.toolContext({ call: "c1" }));
  assert.deepEqual(result, { block: true, blockReason: "loopwatch: no verdict in time; the loopwatch gateway fails closed (on_timeout: block)" });
});

test("a gateway failing closed on an outcome (block, timed_out) stops the run with its message", async () => {
  const stopped = "loopwatch: no verdict within 2 s (the loopwatch worker is down or lagging, or Kafka is unreachable); failing closed (on_timeout='block'): the run is stopped";
  const { before, after } = await loaded((request) =>
    request.body.type === "tool_result" ? answer("block", { timed_out: true, on_timeout: "block", message: stopped }) : answer("allow"));
  await before(oc.beforeToolCall("read", {}, { call: "c1" }), oc.toolContext({ call: "c1" }));
  await after(oc.afterToolCallResult("read", {}, oc.textResult("x"), { call: "c1" }), oc.toolContext({ call: "c1" }));
  const next = await before(oc.beforeToolCall("read", {}, { call: "c2" }), oc.toolContext({ call: "c2" }));
  assert.deepEqual(next, { block: true, blockReason: stopped });
});

test("one session's events reach the gateway in hook order, even when after_tool_call is not awaited", async () => {
  // the outcome is answered slowly; the next call's check must still arrive after it
  const { server, before, after } = await loaded((request) => (request.body.type === "tool_result" ? { ...answer("allow"), delayMs: 150 } : answer("allow")));
  await before(oc.beforeToolCall("read", { path: "a" }, { call: "c1" }), oc.toolContext({ call: "c1" }));
  const reported = after(oc.afterToolCallResult("read", { path: "a" }, oc.textResult("x"), { call: "c1" }), oc.toolContext({ call: "c1" }));
  const checked = before(oc.beforeToolCall("read", { path: "a" }, { call: "c2" }), oc.toolContext({ call: "c2" }));
  await Promise.all([reported, checked]);
  assert.deepEqual(server.requests.map((request) => [request.body.type, request.body.tool_call_id]), [
    ["tool_call", "c1"], ["tool_result", "c1"], ["tool_call", "c2"],
  ]);
});

test("after_compaction is a compaction_retry for the run in the hook context", async () => {
  const { server, compaction } = await loaded(() => answer("allow"));
  await compaction()(oc.afterCompaction(), { runId: "run-7", agentId: "main", sessionKey: "agent:main:main", sessionId: "sess-2" });
  assert.deepEqual(server.requests[0].body, {
    type: "compaction_retry", run_id: "run-7", session_id: "sess-2", session_key: "agent:main:main", agent_id: "main", runner: "openclaw",
  });
});

test("after_compaction without a run id arms the session's latest run", async () => {
  const { server, before, compaction } = await loaded(() => answer("allow"));
  await before(oc.beforeToolCall("read", {}, { run: "run-9", call: "c1" }), oc.toolContext({ run: "run-9", call: "c1" }));
  await compaction()(oc.afterCompaction(), { sessionKey: "agent:main:main" });
  assert.equal(server.requests[1].body.type, "compaction_retry");
  assert.equal(server.requests[1].body.run_id, "run-9");
});

test("reportCompactions: false registers no compaction hook", async () => {
  const { registered } = await loaded(() => answer("allow"), { reportCompactions: false });
  assert.deepEqual(registered.map((entry) => entry.name), ["before_tool_call", "after_tool_call", "tool_result_persist"]);
});

test("a long timeout raises OpenClaw's per-hook budget above it, so failMode decides first", async () => {
  const { registered } = await loaded(() => answer("allow"), { timeoutMs: 20000 });
  assert.equal(registered[0].opts.timeoutMs, 21000);
  const longest = await loaded(() => answer("allow"), { timeoutMs: 600000 });
  assert.equal(longest.registered[0].opts.timeoutMs, 600000, "OpenClaw takes at most 600000 ms");
});

test("a bad setting fails registration with the setting named", () => {
  const fake = fakeApi({ failMode: "sometimes" });
  assert.throws(() => plugin.register(fake.api), /failMode must be "open" or "closed", got "sometimes"/);
});
