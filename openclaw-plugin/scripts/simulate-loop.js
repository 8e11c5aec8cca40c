#!/usr/bin/env node
/**
 * Drive the plugin's hooks the way OpenClaw does for two stuck runs, against a running
 * `loopwatch gateway`, and print what OpenClaw gets back from each hook.
 *
 *   node scripts/simulate-loop.js [--gateway http://127.0.0.1:8787] [--token T] [--calls 25] [--json]
 *
 * Run 1 ("repeat"): the same `read` with the same result, `--calls` times. With OpenClaw's
 * default thresholds the 11th call warns and the 21st is blocked.
 * Run 2 ("compaction"): a compaction (`after_compaction`), then the same `exec` with the same
 * result: the post-compaction guard aborts the run on the window's last outcome (3 by
 * default), and the next call of the run is blocked with the guard's message.
 *
 * Needs the worker's config to enable loop detection (`tools.loopDetection.enabled: true`) for
 * run 1; run 2 works with the defaults (`--window` = the config's postCompactionGuard.windowSize).
 * Ids are fresh on every invocation. Exit status 0; 1 when a hook throws.
 *
 * Payload shapes are OpenClaw's (docs/plugins/hooks.md "Tool call policy",
 * docs/plugins/hooks/tool-policy.md "Tool call observation", src/plugins/hook-types.ts; see
 * test/openclaw-payloads.js): `before_tool_call(event {toolName, params, runId, toolCallId},
 * ctx {agentId, sessionKey, sessionId, runId, toolName, toolCallId})`, `after_tool_call` with
 * the event plus `result` and `durationMs`, `after_compaction({messageCount, compactedCount,
 * tokenCount}, ctx {agentId, sessionKey, sessionId, runId})`.
 */

import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";

import { register } from "../index.js";

/**
 * @param {{gatewayUrl: string, token?: string, calls: number, timeoutMs?: number, windowCalls?: number}} options
 * @returns {Promise<Array<{run: string, n: number, hook: string, tool: string, returned: unknown, logged: string[]}>>}
 */
export async function simulate({ gatewayUrl, token, calls, timeoutMs = 5000, windowCalls = 4 }) {
  /** @type {string[]} */
  let logged = [];
  const logger = {
    info: () => {},
    debug: () => {},
    warn: (/** @type {string} */ m) => logged.push(`warn: ${m}`),
    error: (/** @type {string} */ m) => logged.push(`error: ${m}`),
  };
  /** @type {Record<string, Function>} */
  const handlers = {};
  const config = { gatewayUrl, timeoutMs, ...(token ? { token } : {}) };
  register({ pluginConfig: config, logger, on: (name, handler) => { handlers[name] = handler; } });

  const tag = randomUUID().slice(0, 8);
  const sessionKey = `agent:main:sim-${tag}`;
  const steps = [];
  /** @param {string} run @param {number} n @param {string} hook @param {string} tool @param {unknown} returned */
  const record = (run, n, hook, tool, returned) => {
    steps.push({ run, n, hook, tool, returned, logged });
    logged = [];
  };

  /**
   * One tool call as OpenClaw's runner raises it: before_tool_call, then (if not blocked) the
   * tool runs and after_tool_call reports its result.
   * @param {string} run @param {number} n @param {string} tool @param {Record<string, unknown>} params @param {string} text
   */
  async function toolCall(run, n, tool, params, text) {
    const call = `${run}-call-${n}`;
    const ctx = { agentId: "main", sessionKey, sessionId: `sess-${tag}`, runId: run, toolName: tool, toolCallId: call };
    const decision = await handlers.before_tool_call({ toolName: tool, params, runId: run, toolCallId: call }, ctx);
    record(run, n, "before_tool_call", tool, decision ?? null);
    if (decision?.block) {
      return;
    }
    const result = { content: [{ type: "text", text }], details: { ok: true } };
    await handlers.after_tool_call({ toolName: tool, params, runId: run, toolCallId: call, result, durationMs: 5 }, ctx);
    record(run, n, "after_tool_call", tool, null);
  }

  const repeat = `sim-${tag}-repeat`;
  for (let n = 1; n <= calls; n += 1) {
    await toolCall(repeat, n, "read", { path: "/workspace/notes.md" }, "same file contents");
  }

  const compaction = `sim-${tag}-compaction`;
  await toolCall(compaction, 1, "exec", { command: "npm test" }, "1 failing");
  const ctx = { agentId: "main", sessionKey, sessionId: `sess-${tag}`, runId: compaction };
  await handlers.after_compaction({ messageCount: -1, compactedCount: -1, tokenCount: 1200 }, ctx);
  record(compaction, 1, "after_compaction", "", null);
  for (let n = 2; n <= windowCalls + 1; n += 1) {
    await toolCall(compaction, n, "exec", { command: "npm test" }, "1 failing");
  }
  return steps;
}

async function main() {
  const { values } = parseArgs({
    options: {
      gateway: { type: "string", default: "http://127.0.0.1:8787" },
      token: { type: "string" },
      calls: { type: "string", default: "25" },
      window: { type: "string", default: "3" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    process.stdout.write("usage: node scripts/simulate-loop.js [--gateway URL] [--token T] [--calls N] [--window N] [--json]\n");
    return;
  }
  const calls = Number.parseInt(values.calls ?? "25", 10);
  const windowCalls = Number.parseInt(values.window ?? "3", 10) + 1;
  const steps = await simulate({ gatewayUrl: values.gateway ?? "", token: values.token, calls, windowCalls });
  for (const step of steps) {
    if (values.json) {
      process.stdout.write(`${JSON.stringify(step)}\n`);
      continue;
    }
    if (step.hook !== "before_tool_call" && step.logged.length === 0) {
      continue;
    }
    const what = step.hook === "before_tool_call"
      ? (step.returned ? JSON.stringify(step.returned) : "no decision (the tool runs)")
      : step.hook;
    process.stdout.write(`${step.run.split("-").pop()} #${step.n} ${step.tool} -> ${what}\n`);
    for (const line of step.logged) {
      process.stdout.write(`    log ${line}\n`);
    }
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error) => {
    process.stderr.write(`simulate-loop: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
