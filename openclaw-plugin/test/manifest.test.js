// openclaw.plugin.json and package.json as OpenClaw reads them before loading the code
// (docs/plugins/manifest.md: `id` and an inline JSON Schema `configSchema` are required;
// docs/plugins/manifest/package-json.md: `openclaw.extensions` declares the entry point).
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { test } from "node:test";

import plugin, { PLUGIN_ID } from "../index.js";
import { resolveConfig } from "../src/config.js";

const root = new URL("../", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL("openclaw.plugin.json", root), "utf8"));
const pkg = JSON.parse(readFileSync(new URL("package.json", root), "utf8"));

test("the manifest id is the plugin's id (the plugins.entries key)", () => {
  assert.equal(manifest.id, "loopwatch");
  assert.equal(plugin.id, manifest.id);
  assert.equal(PLUGIN_ID, manifest.id);
});

test("package.json declares an ESM entry point that exists and has no npm dependencies", () => {
  assert.equal(pkg.type, "module");
  assert.deepEqual(pkg.openclaw.extensions, ["./index.js"]);
  assert.ok(existsSync(new URL(pkg.openclaw.extensions[0], root)));
  assert.equal(pkg.dependencies, undefined);
});

test("the config schema is strict and lists exactly the settings the code reads, with the same defaults", () => {
  const schema = manifest.configSchema;
  assert.equal(schema.type, "object");
  assert.equal(schema.additionalProperties, false);
  const defaults = resolveConfig({}, {});
  assert.deepEqual(Object.keys(schema.properties).sort(), Object.keys(defaults).sort());
  for (const [name, property] of Object.entries(schema.properties)) {
    if ("default" in property) {
      assert.deepEqual(property.default, defaults[name], `default of ${name}`);
    }
  }
  assert.deepEqual(schema.properties.failMode.enum, ["open", "closed"]);
});
