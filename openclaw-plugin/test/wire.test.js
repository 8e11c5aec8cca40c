// toWire must give JSON whose canonical form (loop-detection spec §4.1, "Edge cases" table)
// is what OpenClaw's serialiser writes for the live JavaScript value.
import assert from "node:assert/strict";
import { test } from "node:test";

import { toWire } from "../src/wire.js";

test("JSON-safe values pass through unchanged", () => {
  const value = { b: 1, a: [true, null, "x", 1.5], nested: { k: "v" } };
  assert.deepEqual(toWire(value), value);
});

test("non-finite numbers become OpenClaw's quoted names, not JSON's null", () => {
  assert.deepEqual(toWire({ n: NaN, p: Infinity, m: -Infinity }), { n: "NaN", p: "Infinity", m: "-Infinity" });
});

test("a BigInt becomes its decimal digits as a string", () => {
  assert.deepEqual(toWire({ big: 9007199254740993n }), { big: "9007199254740993" });
});

test("functions and symbols inside objects become null", () => {
  assert.deepEqual(toWire({ f() {}, s: Symbol("s") }), { f: null, s: null });
});

test("toJSON is not called: a Date is an object without own keys, a Map too", () => {
  assert.deepEqual(toWire({ when: new Date(0), map: new Map([["a", 1]]) }), { when: {}, map: {} });
  assert.deepEqual(toWire({ b: 1, toJSON() { return "x"; } }), { b: 1, toJSON: null });
});

test("an Error is {message, name, stack}", () => {
  const error = new TypeError("boom");
  assert.deepEqual(toWire(error), { message: "boom", name: "TypeError", stack: error.stack });
});

test("Uint8Array and Buffer are {data: base64, type: Uint8Array}", () => {
  assert.deepEqual(toWire(new Uint8Array([1, 2, 3])), { data: "AQID", type: "Uint8Array" });
  assert.deepEqual(toWire({ b: Buffer.from([1, 2, 3]) }), { b: { data: "AQID", type: "Uint8Array" } });
});

test("a cycle is replaced by [Circular]; a shared (non-cyclic) object is written twice", () => {
  const self = { a: 1 };
  self.self = self;
  assert.deepEqual(toWire(self), { a: 1, self: "[Circular]" });
  const shared = { x: 1 };
  assert.deepEqual(toWire({ p: shared, q: shared }), { p: { x: 1 }, q: { x: 1 } });
});

test("undefined: dropped from objects, null in arrays, undefined at the top (the caller omits the field)", () => {
  assert.deepEqual(toWire({ a: undefined, b: 1 }), { b: 1 });
  assert.deepEqual(toWire([1, undefined, 3]), [1, null, 3]);
  assert.equal(toWire(undefined), undefined);
});
