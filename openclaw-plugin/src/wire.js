/**
 * Tool arguments and results as JSON that loopwatch hashes exactly as OpenClaw hashes the live values.
 *
 * OpenClaw's loop detection hashes a canonical serialisation of the JavaScript value itself
 * (loop-detection spec §4.1), not of `JSON.stringify(value)`. The two differ for values JSON
 * cannot carry or carries differently: `JSON.stringify` calls `toJSON` (a Date becomes a string,
 * a Buffer `{type: "Buffer", data: [...]}`), turns `NaN` into `null`, throws on a BigInt or a
 * cycle. `toWire` walks the value the way OpenClaw's serialiser does and returns plain JSON
 * whose canonical form on the loopwatch side is the same text:
 *
 * | live value                         | OpenClaw serialises as        | `toWire` gives               |
 * | ---------------------------------- | ----------------------------- | ---------------------------- |
 * | `NaN`, `Infinity`, `-Infinity`     | the strings `"NaN"`, ...      | the same strings             |
 * | BigInt `12n`                       | the string `"12"`             | `"12"`                       |
 * | function / symbol (object value)   | `null`                        | `null`                       |
 * | `Error`                            | `{message, name, stack}`      | that object                  |
 * | `Uint8Array` / `Buffer`            | `{data: <base64>, type: "Uint8Array"}` | that object         |
 * | Date, Map, Set, RegExp, class      | own enumerable keys only (`{}` for the first four) | the same |
 * | an object that is its own ancestor | `"[Circular]"`                | `"[Circular]"`               |
 *
 * Not representable in JSON, so not exactly reproduced (documented in the README):
 * an object property whose value is `undefined` (OpenClaw writes `"a":undefined`; it is
 * dropped here) and `undefined` or a hole inside an array (OpenClaw writes `undefined`;
 * `null` here). A top-level `undefined` is returned as `undefined`, and the caller leaves
 * the field out (for `args` loopwatch then hashes JavaScript `undefined`, as OpenClaw does).
 */

/**
 * @param {unknown} value any JavaScript value (tool params or a tool result)
 * @returns {unknown} plain JSON data (or `undefined` for a top-level `undefined`)
 */
export function toWire(value) {
  return walk(value, new Set(), false);
}

/**
 * @param {unknown} value
 * @param {Set<object>} ancestors objects on the path from the root (cycle detection, spec §4.1)
 * @param {boolean} inContainer true inside an array or object (functions/symbols become null there)
 * @returns {unknown}
 */
function walk(value, ancestors, inContainer) {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      // JSON.stringify would write null; OpenClaw writes the quoted names
      return Number.isFinite(value) ? value : String(value);
    case "bigint":
      return value.toString();
    case "undefined":
      return inContainer ? null : undefined;
    case "function":
    case "symbol":
      return null;
    default:
      break;
  }
  if (value === null) {
    return null;
  }
  const object = /** @type {object} */ (value);
  if (ancestors.has(object)) {
    return "[Circular]";
  }
  ancestors.add(object);
  try {
    if (object instanceof Uint8Array) {
      return { data: Buffer.from(object.buffer, object.byteOffset, object.byteLength).toString("base64"), type: "Uint8Array" };
    }
    if (object instanceof Error) {
      return {
        message: walk(object.message, ancestors, true),
        name: walk(object.name, ancestors, true),
        stack: walk(object.stack, ancestors, true),
      };
    }
    if (Array.isArray(object)) {
      const out = [];
      for (let i = 0; i < object.length; i += 1) {
        out.push(walk(object[i], ancestors, true));
      }
      return out;
    }
    /** @type {Record<string, unknown>} */
    const out = {};
    for (const key of Object.keys(object)) {
      const item = /** @type {Record<string, unknown>} */ (object)[key];
      if (item === undefined) {
        continue; // JSON has no undefined; see the module comment
      }
      out[key] = walk(item, ancestors, true);
    }
    return out;
  } finally {
    ancestors.delete(object);
  }
}
