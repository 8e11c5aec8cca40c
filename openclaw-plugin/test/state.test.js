// The plugin's in-memory state: bounded maps and the per-session ordering queue.
import assert from "node:assert/strict";
import { test } from "node:test";

import { BoundedMap } from "../src/bounded.js";
import { SessionQueue } from "../src/session-queue.js";

test("BoundedMap forgets the oldest entries past its limit; a refreshed entry counts as newest", () => {
  const map = new BoundedMap(2);
  map.set("a", 1);
  map.set("b", 2);
  map.set("a", 3); // refreshed: b is now the oldest
  map.set("c", 4);
  assert.deepEqual([...map.map.entries()], [["a", 3], ["c", 4]]);
  assert.equal(map.has("b"), false);
});

test("SessionQueue runs one session's tasks in order, other sessions alongside, and survives a failure", async () => {
  const queue = new SessionQueue();
  const order = [];
  const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const first = queue.run("s1", async () => { await wait(60); order.push("s1-a"); throw new Error("boom"); });
  const second = queue.run("s1", async () => { order.push("s1-b"); return "b"; });
  const other = queue.run("s2", async () => { order.push("s2-a"); return "x"; });
  await assert.rejects(first, /boom/);
  assert.equal(await second, "b");
  assert.equal(await other, "x");
  assert.deepEqual(order, ["s2-a", "s1-a", "s1-b"]);
  await wait(0);
  assert.equal(queue.pending, 0, "finished sessions are forgotten");
});
