/**
 * A Map that forgets its oldest entries past a size limit, so state kept per run or per tool
 * call cannot grow without bound in a long-lived OpenClaw gateway.
 *
 * @template K, V
 */
export class BoundedMap {
  /** @param {number} limit entries kept (> 0) */
  constructor(limit) {
    this.limit = limit;
    /** @type {Map<K, V>} */
    this.map = new Map();
  }

  /** @param {K} key @param {V} value */
  set(key, value) {
    this.map.delete(key); // re-inserted at the end: a refreshed entry is the newest
    this.map.set(key, value);
    while (this.map.size > this.limit) {
      this.map.delete(this.map.keys().next().value);
    }
  }

  /** @param {K} key @returns {V | undefined} */
  get(key) {
    return this.map.get(key);
  }

  /** @param {K} key */
  has(key) {
    return this.map.has(key);
  }

  /** @param {K} key */
  delete(key) {
    return this.map.delete(key);
  }

  get size() {
    return this.map.size;
  }
}
