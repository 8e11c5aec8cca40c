import assert from "node:assert/strict";
import { test } from "node:test";

import { ConfigError, resolveConfig } from "../src/config.js";

test("defaults: local gateway, 5 s, fail open, compactions reported, no token, profile from the host", () => {
  assert.deepEqual(resolveConfig(undefined, {}), {
    gatewayUrl: "http://127.0.0.1:8787", token: null, timeoutMs: 5000, failMode: "open", reportCompactions: true, profile: "auto",
  });
});

test("settings are taken as given; a trailing slash is dropped from the URL", () => {
  const config = resolveConfig({ gatewayUrl: "https://lw.internal:9000/", token: "s3cret", timeoutMs: 800, failMode: "closed", reportCompactions: false, profile: "openclaw-2026.7" }, {});
  assert.deepEqual(config, { gatewayUrl: "https://lw.internal:9000", token: "s3cret", timeoutMs: 800, failMode: "closed", reportCompactions: false, profile: "openclaw-2026.7" });
});

test("the token falls back to LOOPWATCH_GATEWAY_TOKEN; the setting wins over it", () => {
  assert.equal(resolveConfig({}, { LOOPWATCH_GATEWAY_TOKEN: "from-env" }).token, "from-env");
  assert.equal(resolveConfig({ token: "given" }, { LOOPWATCH_GATEWAY_TOKEN: "from-env" }).token, "given");
});

for (const [name, raw, pattern] of [
  ["unknown key", { gatewayURL: "http://x" }, /unknown loopwatch plugin setting "gatewayURL"/],
  ["bad URL", { gatewayUrl: "127.0.0.1:8787" }, /gatewayUrl must be an http/],
  ["non-integer timeout", { timeoutMs: 2.5 }, /timeoutMs must be a whole number .* got number 2.5/],
  ["zero timeout", { timeoutMs: 0 }, /timeoutMs must be a whole number/],
  ["failMode typo", { failMode: "close" }, /failMode must be "open" or "closed", got "close"/],
  ["token not a string", { token: 42 }, /token must be a string, got number 42/],
  ["not an object", ["x"], /must be an object, got an array/],
  ["unknown profile", { profile: "openclaw-2026.8" }, /profile must be one of "auto", "none", "openclaw-2026.7", "openclaw-2026.9.6", got "openclaw-2026.8"/],
]) {
  test(`rejected with a clear message: ${name}`, () => {
    assert.throws(() => resolveConfig(raw, {}), (error) => error instanceof ConfigError && pattern.test(error.message));
  });
}

test("without a setting or LOOPWATCH_GATEWAY_TOKEN, the token is read from the gateway's token file", async () => {
  const { mkdtempSync, writeFileSync, mkdirSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const home = mkdtempSync(join(tmpdir(), "lw-token-"));
  mkdirSync(join(home, ".config", "loopwatch"), { recursive: true });
  writeFileSync(join(home, ".config", "loopwatch", "gateway-token"), "made-by-the-gateway\n", { mode: 0o600 });
  assert.equal(resolveConfig({}, { HOME: home }).token, "made-by-the-gateway");
  assert.equal(resolveConfig({}, { HOME: home, LOOPWATCH_GATEWAY_TOKEN: "from-env" }).token, "from-env");
  assert.equal(resolveConfig({ token: "given" }, { HOME: home }).token, "given");
  const named = join(home, "elsewhere");
  writeFileSync(named, "named-file\n");
  assert.equal(resolveConfig({}, { HOME: home, LOOPWATCH_GATEWAY_TOKEN_FILE: named }).token, "named-file");
  assert.equal(resolveConfig({}, { XDG_CONFIG_HOME: join(home, ".config") }).token, "made-by-the-gateway");
  assert.equal(resolveConfig({}, { HOME: join(home, "nobody") }).token, null);
});
