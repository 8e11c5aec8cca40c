/**
 * loopwatch for OpenClaw: fleet-wide tool-loop detection through `loopwatch gateway`.
 *
 * Registers four typed plugin hooks with `api.on(name, handler, opts)` (docs/plugins/hooks.md
 * in openclaw/openclaw):
 *   - `before_tool_call`: asks loopwatch; a block comes back as `{block: true, blockReason}`;
 *   - `after_tool_call`: reports the outcome (a thrown error apart from a returned result);
 *   - `tool_result_persist`: appends an emitted warning's note to the call's tool result;
 *   - `after_compaction`: reports the compaction, which arms the post-compaction guard.
 * Every event carries the loopwatch behaviour profile of the host's OpenClaw version (src/host.js).
 * Settings: see src/config.js (`plugins.entries.loopwatch.config`).
 *
 * A plain plugin object rather than `definePluginEntry(...)` so the package needs nothing from
 * npm: OpenClaw accepts a default export with `id`, `name`, `description` and `register(api)`
 * (`OpenClawPluginDefinition`, src/plugins/types.ts).
 */

import { MAX_TIMEOUT_MS, resolveConfig } from "./src/config.js";
import { GatewayClient } from "./src/gateway-client.js";
import { createHooks } from "./src/hooks.js";
import { hostVersion, profileForVersion } from "./src/host.js";

export const PLUGIN_ID = "loopwatch";

// Run before other plugins' before_tool_call handlers, as OpenClaw's own loop check runs before
// plugin hooks: a lower-priority plugin that blocks or rewrites a call then cannot hide it.
const PRIORITY = 1000;
// OpenClaw's default before_tool_call budget; past it OpenClaw blocks the call itself
const OPENCLAW_DEFAULT_HOOK_BUDGET_MS = 15000;

/**
 * @param {{pluginConfig?: unknown, logger?: import("./src/hooks.js").Logger, runtime?: {version?: unknown},
 *          on: (name: string, handler: Function, opts?: Record<string, unknown>) => void}} api
 *   OpenClaw's plugin API (`OpenClawPluginApi`)
 * @param {{fetch?: typeof fetch, env?: Record<string, string | undefined>}} [overrides] tests only
 * @returns {ReturnType<typeof createHooks>} the handlers (OpenClaw ignores the return value)
 */
export function register(api, overrides = {}) {
  const config = resolveConfig(api.pluginConfig, overrides.env ?? process.env);
  const client = new GatewayClient(config, overrides.fetch ?? globalThis.fetch);
  const logger = api.logger ?? {};
  const version = hostVersion(api);
  const profile = config.profile === "auto" ? profileForVersion(version) : config.profile === "none" ? null : config.profile;
  const hooks = createHooks({ config, client, logger, profile });

  /** @type {Record<string, unknown>} */
  const toolOptions = { priority: PRIORITY };
  if (config.timeoutMs >= OPENCLAW_DEFAULT_HOOK_BUDGET_MS) {
    // leave room for our own timeout to fire first, so failMode decides rather than OpenClaw
    toolOptions.timeoutMs = Math.min(config.timeoutMs + 1000, MAX_TIMEOUT_MS);
  }
  api.on("before_tool_call", hooks.beforeToolCall, toolOptions);
  api.on("after_tool_call", hooks.afterToolCall, toolOptions);
  api.on("tool_result_persist", hooks.toolResultPersist, { priority: PRIORITY });
  if (config.reportCompactions) {
    api.on("after_compaction", hooks.afterCompaction, { priority: PRIORITY });
  }
  logger.info?.(
    `loopwatch: checking tool calls with ${config.gatewayUrl} (timeout ${config.timeoutMs} ms, fail ${config.failMode}; `
      + `OpenClaw ${version ?? "version unknown"}, profile ${profile ?? "loopwatch's default"})`,
  );
  return hooks;
}

export default {
  id: PLUGIN_ID,
  name: "loopwatch",
  description: "Fleet-wide tool-loop detection: asks a loopwatch gateway before every tool call",
  register,
};
