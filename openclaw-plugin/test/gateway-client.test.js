// The HTTP exchange with `loopwatch gateway` (POST /v1/events): answers and every failure.
import assert from "node:assert/strict";
import http from "node:http";
import { after, test } from "node:test";

import { GatewayClient, parseAnswer } from "../src/gateway-client.js";
import { answer, startFakeGateway } from "./fake-gateway.js";

const servers = [];
after(async () => Promise.all(servers.map((server) => server.close())));

/** @param {Parameters<typeof startFakeGateway>[0]} respond */
async function gateway(respond) {
  const server = await startFakeGateway(respond);
  servers.push(server);
  return server;
}

// Long enough for a loaded machine: these tests expect the answer, and a slow one only costs time here.
const ANSWER_WAIT_MS = 15000;

const EVENT = { type: "tool_call", run_id: "r1", session_id: "s1", session_key: "k1", tool_call_id: "c1", tool_name: "read", args: { path: "a" }, outcome_follows: true };

test("posts the event as JSON to /v1/events with the bearer token, and reads the verdict", async () => {
  const server = await gateway(() => answer("warn", { detector: "generic_repeat", count: 10, message: "WARNING: ..." }));
  const client = new GatewayClient({ gatewayUrl: server.url, token: "t0k" });
  const outcome = await client.send(EVENT, ANSWER_WAIT_MS);
  assert.deepEqual(outcome, {
    ok: true,
    answer: { decision: "warn", detector: "generic_repeat", count: 10, message: "WARNING: ...", timed_out: false, on_timeout: "allow", verdict: null },
  });
  const [request] = server.requests;
  assert.equal(request.method, "POST");
  assert.equal(request.url, "/v1/events");
  assert.equal(request.headers.authorization, "Bearer t0k");
  assert.equal(request.headers["content-type"], "application/json");
  assert.deepEqual(request.body, EVENT);
});

test("no Authorization header without a token", async () => {
  const server = await gateway(() => answer("allow"));
  await new GatewayClient({ gatewayUrl: server.url, token: null }).send(EVENT, ANSWER_WAIT_MS);
  assert.equal(server.requests[0].headers.authorization, undefined);
});

for (const [status, body, pattern] of [
  [401, { error: "missing bearer token" }, /401: missing or wrong bearer token; set the plugin's token\): missing bearer token/],
  [400, { error: "tool_call_id must be a string or null, got int" }, /refused the event \(400\): tool_call_id must be a string/],
  [413, "payload too large", /too large \(413\)$/],
  [503, { error: "starting" }, /answered HTTP 503: starting/],
]) {
  test(`HTTP ${status} is a failure whose reason says why`, async () => {
    const server = await gateway(() => ({ status, body }));
    const outcome = await new GatewayClient({ gatewayUrl: server.url, token: null }).send(EVENT, ANSWER_WAIT_MS);
    assert.equal(outcome.ok, false);
    assert.match(outcome.reason, pattern);
  });
}

test("a gateway slower than the timeout is a timeout failure", async () => {
  const server = await gateway(() => ({ ...answer("allow"), delayMs: 3000 }));
  const outcome = await new GatewayClient({ gatewayUrl: server.url, token: null }).send(EVENT, 100);
  assert.equal(outcome.ok, false);
  assert.match(outcome.reason, /no answer from the loopwatch gateway at http:\/\/127\.0\.0\.1:\d+\/v1\/events within 100 ms/);
  // the fake runs in this process: its 3 s timer cannot fire before the client's 100 ms one, however loaded
  assert.equal(server.answered(), 0, "gave up at its timeout, not when the answer came");
});

test("a closed port is a could-not-reach failure", async () => {
  const probe = http.createServer();
  await new Promise((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  const outcome = await new GatewayClient({ gatewayUrl: `http://127.0.0.1:${port}`, token: null }).send(EVENT, ANSWER_WAIT_MS);
  assert.equal(outcome.ok, false);
  assert.match(outcome.reason, /could not be reached \(fetch failed: connect ECONNREFUSED/);
});

test("an answer that is not a verdict is a failure", () => {
  assert.match(parseAnswer("<html>").reason, /not JSON: "<html>"/);
  assert.match(parseAnswer("[1]").reason, /not a JSON object/);
  assert.match(parseAnswer('{"decision": "deny"}').reason, /no known decision \(got "deny"\)/);
});

test("timed_out and on_timeout are read as given", () => {
  const outcome = parseAnswer(JSON.stringify({ decision: "block", timed_out: true, on_timeout: "block", message: null }));
  assert.equal(outcome.ok, true);
  assert.equal(outcome.answer.timed_out, true);
  assert.equal(outcome.answer.on_timeout, "block");
  assert.equal(outcome.answer.message, null);
});
