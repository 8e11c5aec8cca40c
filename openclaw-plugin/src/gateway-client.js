/**
 * HTTP client for `loopwatch gateway`: one event in, its verdict out.
 *
 * Contract (the gateway's `POST /v1/events`):
 *   request  body = one event as JSON; `Authorization: Bearer <token>` when a token is set;
 *   200      `{decision: "allow"|"warn"|"block"|"abort", detector, count, message,
 *             timed_out, on_timeout: "allow"|"block", verdict}`;
 *   400      `{error: reason}` (malformed or wrong-shaped event), 401 (missing or wrong token),
 *   413      (body over the gateway's size limit).
 *
 * `send` never throws: every failure (connection refused, timeout, non-200 status, an answer
 * that is not a verdict) comes back as `{ok: false, reason}` with a reason that says what
 * happened, so the caller can apply its fail-open / fail-closed choice.
 */

export const DECISIONS = new Set(["allow", "warn", "block", "abort"]);

/**
 * @typedef {object} GatewayAnswer
 * @property {"allow" | "warn" | "block" | "abort"} decision
 * @property {string | null} detector
 * @property {number | null} count
 * @property {string | null} message
 * @property {boolean} timed_out the gateway got no verdict from the worker in time and answered its own `on_timeout`
 * @property {"allow" | "block"} on_timeout
 * @property {Record<string, unknown> | null} verdict the worker's full verdict record
 */

/**
 * @typedef {{ok: true, answer: GatewayAnswer} | {ok: false, reason: string}} SendOutcome
 */

export class GatewayClient {
  /**
   * @param {{gatewayUrl: string, token: string | null}} options
   * @param {typeof fetch} [fetchImpl] injected in tests; defaults to Node's global fetch
   */
  constructor({ gatewayUrl, token }, fetchImpl = globalThis.fetch) {
    this.eventsUrl = `${gatewayUrl}/v1/events`;
    this.token = token;
    this.fetch = fetchImpl;
  }

  /**
   * POST one event and read the verdict.
   *
   * @param {Record<string, unknown>} event a loopwatch event (`type` tool_call, tool_result or compaction_retry)
   * @param {number} timeoutMs milliseconds left for this request (> 0)
   * @returns {Promise<SendOutcome>}
   */
  async send(event, timeoutMs) {
    /** @type {Record<string, string>} */
    const headers = { "content-type": "application/json" };
    if (this.token) {
      headers.authorization = `Bearer ${this.token}`;
    }
    let body;
    try {
      body = JSON.stringify(event);
    } catch (error) {
      return { ok: false, reason: `the event could not be encoded as JSON (${errorText(error)})` };
    }
    let response;
    let text;
    try {
      // one signal for the whole exchange: connecting, sending and reading the answer
      const signal = AbortSignal.timeout(timeoutMs);
      response = await this.fetch(this.eventsUrl, { method: "POST", headers, body, signal });
      text = await response.text();
    } catch (error) {
      if (isTimeout(error)) {
        return { ok: false, reason: `no answer from the loopwatch gateway at ${this.eventsUrl} within ${timeoutMs} ms` };
      }
      return { ok: false, reason: `the loopwatch gateway at ${this.eventsUrl} could not be reached (${errorText(error)})` };
    }
    if (response.status !== 200) {
      return { ok: false, reason: statusReason(response.status, text) };
    }
    return parseAnswer(text);
  }
}

/**
 * @param {number} status
 * @param {string} text the response body
 */
function statusReason(status, text) {
  let detail = "";
  try {
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed.error === "string") {
      detail = `: ${parsed.error}`;
    }
  } catch {
    // not JSON: the status alone says enough
  }
  if (status === 401) {
    return `the loopwatch gateway refused the request (401: missing or wrong bearer token; set the plugin's token)${detail}`;
  }
  if (status === 413) {
    return `the loopwatch gateway refused the event as too large (413)${detail}`;
  }
  if (status === 400) {
    return `the loopwatch gateway refused the event (400)${detail}`;
  }
  return `the loopwatch gateway answered HTTP ${status}${detail}`;
}

/**
 * @param {string} text
 * @returns {SendOutcome}
 */
export function parseAnswer(text) {
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ok: false, reason: `the loopwatch gateway's answer is not JSON: ${JSON.stringify(text.slice(0, 200))}` };
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    return { ok: false, reason: "the loopwatch gateway's answer is not a JSON object" };
  }
  if (!DECISIONS.has(parsed.decision)) {
    return { ok: false, reason: `the loopwatch gateway's answer has no known decision (got ${JSON.stringify(parsed.decision)})` };
  }
  return {
    ok: true,
    answer: {
      decision: parsed.decision,
      detector: typeof parsed.detector === "string" ? parsed.detector : null,
      count: typeof parsed.count === "number" ? parsed.count : null,
      message: typeof parsed.message === "string" ? parsed.message : null,
      timed_out: parsed.timed_out === true,
      on_timeout: parsed.on_timeout === "block" ? "block" : "allow",
      verdict: parsed.verdict && typeof parsed.verdict === "object" ? parsed.verdict : null,
    },
  };
}

/** @param {unknown} error */
function isTimeout(error) {
  return error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
}

/** @param {unknown} error */
function errorText(error) {
  if (error instanceof Error) {
    const cause = /** @type {{cause?: unknown}} */ (error).cause;
    const causeText = cause instanceof Error ? `: ${cause.message}` : "";
    return `${error.message}${causeText}`;
  }
  return String(error);
}
