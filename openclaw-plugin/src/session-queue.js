/**
 * One session's events reach the gateway in the order OpenClaw raised them.
 *
 * OpenClaw runs `after_tool_call` handlers as observers that "may be awaited or dispatched
 * fire-and-forget" (docs/plugins/hooks/reference.md, "Registration and execution"). If a
 * tool's outcome reached loopwatch after the next call's check, that check would see the
 * earlier call as still pending, and the streaks (spec §5.1) would differ from OpenClaw's
 * own engine, which records each outcome before the next call is judged. So every request of
 * a session waits for the requests raised before it in that session; other sessions do not wait.
 */

export class SessionQueue {
  constructor() {
    /** @type {Map<string, Promise<unknown>>} */
    this.tails = new Map();
  }

  /**
   * Run `task` once every earlier task of `key` has settled.
   *
   * @template T
   * @param {string} key the session's state key (session key, else session id)
   * @param {() => Promise<T>} task
   * @returns {Promise<T>}
   */
  run(key, task) {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const current = previous.then(task, task);
    // the tail never rejects, so a failed request does not fail the ones queued after it
    const tail = current.then(noop, noop);
    this.tails.set(key, tail);
    tail.then(() => {
      if (this.tails.get(key) === tail) {
        this.tails.delete(key);
      }
    });
    return current;
  }

  /** Sessions with requests in flight (for tests and diagnostics). */
  get pending() {
    return this.tails.size;
  }
}

function noop() {}
