/**
 * The plugin's settings, read from `plugins.entries.loopwatch.config` in OpenClaw's config
 * (OpenClaw hands it to the plugin as `api.pluginConfig`; the JSON Schema in
 * openclaw.plugin.json validates it before the plugin loads).
 *
 * | setting             | default                   | meaning |
 * | ------------------- | ------------------------- | ------- |
 * | `gatewayUrl`        | `http://127.0.0.1:8787`   | base URL of `loopwatch gateway` |
 * | `token`             | `LOOPWATCH_GATEWAY_TOKEN` env, else the gateway's token file, else none | bearer token sent as `Authorization: Bearer <token>` |
 * | `timeoutMs`         | 5000                      | per request, queueing behind earlier events of the same session included |
 * | `failMode`          | `"open"`                  | what to do when no verdict can be had: `"open"` lets the tool run, `"closed"` blocks it |
 * | `reportCompactions` | true                      | report `after_compaction` as a compaction retry (arms the post-compaction guard) |
 * | `profile`           | `"auto"`                  | loopwatch behaviour profile the events ask for: `"auto"` (from the host's version, src/host.js), `"openclaw-2026.7"`, `"openclaw-2026.9.6"` or `"none"` (loopwatch's configured default) |
 *
 * The gateway's token file is the one `loopwatch gateway` makes on its first start:
 * `LOOPWATCH_GATEWAY_TOKEN_FILE`, else `$XDG_CONFIG_HOME/loopwatch/gateway-token`, else
 * `$HOME/.config/loopwatch/gateway-token` (so a plugin on the gateway's machine needs no setting).
 *
 * `timeoutMs` must stay under OpenClaw's own `before_tool_call` budget (15 s by default,
 * `plugins.entries.<id>.hooks.timeoutMs`): when OpenClaw's budget expires first, OpenClaw
 * itself fails closed and blocks the call, whatever `failMode` says.
 */

import { readFileSync } from "node:fs";
import { join } from "node:path";

export const DEFAULT_GATEWAY_URL = "http://127.0.0.1:8787";
export const DEFAULT_TIMEOUT_MS = 5000;
export const MAX_TIMEOUT_MS = 600000; // OpenClaw's ceiling for any hook budget
export const TOKEN_ENV = "LOOPWATCH_GATEWAY_TOKEN";
export const TOKEN_FILE_ENV = "LOOPWATCH_GATEWAY_TOKEN_FILE";

/**
 * @typedef {object} LoopwatchPluginConfig
 * @property {string} gatewayUrl base URL without a trailing slash
 * @property {string | null} token bearer token, or null for none
 * @property {number} timeoutMs positive integer, milliseconds
 * @property {"open" | "closed"} failMode
 * @property {boolean} reportCompactions
 * @property {"auto" | "none" | "openclaw-2026.7" | "openclaw-2026.9.6"} profile
 */

const KNOWN = new Set(["gatewayUrl", "token", "timeoutMs", "failMode", "reportCompactions", "profile"]);
export const PROFILE_CHOICES = ["auto", "none", "openclaw-2026.7", "openclaw-2026.9.6"];

/** A setting that does not fit; the message names the setting and what it got. */
export class ConfigError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "ConfigError";
  }
}

/**
 * @param {unknown} raw `api.pluginConfig` (undefined or an object)
 * @param {Record<string, string | undefined>} [env] environment (for the token fallback)
 * @returns {LoopwatchPluginConfig}
 * @throws {ConfigError} an unknown key, or a value of the wrong type or range
 */
export function resolveConfig(raw, env = process.env) {
  if (raw === undefined || raw === null) {
    raw = {};
  }
  if (typeof raw !== "object" || Array.isArray(raw)) {
    throw new ConfigError(`loopwatch plugin config must be an object, got ${describe(raw)}`);
  }
  const given = /** @type {Record<string, unknown>} */ (raw);
  for (const key of Object.keys(given)) {
    if (!KNOWN.has(key)) {
      throw new ConfigError(`unknown loopwatch plugin setting ${JSON.stringify(key)} (known: ${[...KNOWN].join(", ")})`);
    }
  }

  const gatewayUrl = given.gatewayUrl ?? DEFAULT_GATEWAY_URL;
  if (typeof gatewayUrl !== "string" || !isHttpUrl(gatewayUrl)) {
    throw new ConfigError(`gatewayUrl must be an http:// or https:// URL, got ${describe(gatewayUrl)}`);
  }

  let token = given.token ?? (env[TOKEN_ENV] || null) ?? readTokenFile(env);
  if (token !== null && typeof token !== "string") {
    throw new ConfigError(`token must be a string, got ${describe(token)}`);
  }
  if (token === "") {
    token = null;
  }

  const timeoutMs = given.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (typeof timeoutMs !== "number" || !Number.isInteger(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_TIMEOUT_MS) {
    throw new ConfigError(`timeoutMs must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}, got ${describe(timeoutMs)}`);
  }

  const failMode = given.failMode ?? "open";
  if (failMode !== "open" && failMode !== "closed") {
    throw new ConfigError(`failMode must be "open" or "closed", got ${describe(failMode)}`);
  }

  const reportCompactions = given.reportCompactions ?? true;
  if (typeof reportCompactions !== "boolean") {
    throw new ConfigError(`reportCompactions must be true or false, got ${describe(reportCompactions)}`);
  }

  const profile = given.profile ?? "auto";
  if (typeof profile !== "string" || !PROFILE_CHOICES.includes(profile)) {
    throw new ConfigError(`profile must be one of ${PROFILE_CHOICES.map((p) => JSON.stringify(p)).join(", ")}, got ${describe(profile)}`);
  }

  return {
    gatewayUrl: gatewayUrl.replace(/\/+$/, ""), token, timeoutMs, failMode, reportCompactions,
    profile: /** @type {LoopwatchPluginConfig["profile"]} */ (profile),
  };
}

/**
 * The first line of the gateway's token file, or null (no such file, unreadable, empty).
 *
 * @param {Record<string, string | undefined>} env
 * @returns {string | null}
 */
export function readTokenFile(env) {
  const path = tokenPath(env);
  if (path === null) {
    return null;
  }
  try {
    return readFileSync(path, "utf8").split("\n", 1)[0].trim() || null;
  } catch {
    return null;
  }
}

/**
 * Where `loopwatch gateway` keeps its token, from `env` alone (null when it names no place).
 *
 * @param {Record<string, string | undefined>} env
 * @returns {string | null}
 */
export function tokenPath(env) {
  if (env[TOKEN_FILE_ENV]) {
    return env[TOKEN_FILE_ENV];
  }
  const base = env.XDG_CONFIG_HOME || (env.HOME ? join(env.HOME, ".config") : null);
  return base ? join(base, "loopwatch", "gateway-token") : null;
}

/** @param {string} text */
function isHttpUrl(text) {
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}

/** @param {unknown} value */
function describe(value) {
  if (typeof value === "string") {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return "an array";
  }
  return value === null ? "null" : `${typeof value} ${String(value)}`;
}
