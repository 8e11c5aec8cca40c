/**
 * A stand-in for `loopwatch gateway` in unit tests: a real HTTP server on 127.0.0.1 that records
 * every request and answers with what the test's `respond` function returns.
 */

import http from "node:http";

/**
 * @typedef {{method: string, url: string, headers: http.IncomingHttpHeaders, body: any}} Recorded
 * @typedef {{status?: number, body?: unknown, delayMs?: number}} Reply
 */

/**
 * @param {(request: Recorded, index: number) => Reply | Promise<Reply>} respond
 * @returns {Promise<{url: string, requests: Recorded[], answered: () => number, close: () => Promise<void>}>}
 *   (`answered`: how many answers the server has sent so far)
 */
export async function startFakeGateway(respond) {
  /** @type {Recorded[]} */
  const requests = [];
  let answered = 0;
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", async () => {
      const text = Buffer.concat(chunks).toString("utf8");
      /** @type {Recorded} */
      const recorded = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: text ? JSON.parse(text) : null };
      const index = requests.length;
      requests.push(recorded);
      const reply = await respond(recorded, index);
      if (reply.delayMs) {
        await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
      }
      res.writeHead(reply.status ?? 200, { "content-type": "application/json" });
      res.end(typeof reply.body === "string" ? reply.body : JSON.stringify(reply.body ?? {}));
      answered += 1;
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const address = /** @type {import("node:net").AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    answered: () => answered,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve(undefined));
    }),
  };
}

/**
 * A 200 answer of the gateway's shape.
 * @param {"allow" | "warn" | "block" | "abort"} decision
 * @param {Record<string, unknown>} [extra]
 */
export function answer(decision, extra = {}) {
  return {
    status: 200,
    body: { decision, detector: null, count: null, message: null, timed_out: false, on_timeout: "allow", verdict: null, ...extra },
  };
}

/**
 * A fake OpenClaw plugin API that records registrations and log lines.
 * @param {unknown} pluginConfig `api.pluginConfig`
 * @param {{version?: string}} [runtime] `api.runtime` (OpenClaw's version is `runtime.version`)
 */
export function fakeApi(pluginConfig, runtime = undefined) {
  /** @type {Array<{name: string, handler: Function, opts: any}>} */
  const registered = [];
  /** @type {Array<[string, string]>} */
  const logs = [];
  const logger = {
    info: (m) => logs.push(["info", m]),
    warn: (m) => logs.push(["warn", m]),
    error: (m) => logs.push(["error", m]),
    debug: (m) => logs.push(["debug", m]),
  };
  return {
    api: { pluginConfig, logger, runtime, on: (name, handler, opts) => registered.push({ name, handler, opts }) },
    registered,
    logs,
    /** @param {string} name */
    handler(name) {
      const found = registered.find((entry) => entry.name === name);
      if (!found) {
        throw new Error(`no ${name} handler registered`);
      }
      return found.handler;
    },
  };
}
