"""What OpenClaw keeps per session, as one serialisable object per partition key.

A :class:`SessionState` holds (Spec §1, §6, §7):

* ``history`` -- the rolling list of :class:`CallRecord`, newest last, capped
  at ``historySize`` for the whole state (Spec §8.2: the cap is per session);
* ``warning_buckets`` -- the warning dedupe map, insertion-ordered, at most
  256 keys, first-inserted key evicted (Spec §6);
* ``runs`` -- per run id, the post-compaction guard and the aborted flag (Spec §7);
* ``calls`` -- calls whose outcome is still to come (``outcome_follows``) or
  that were blocked, by tool-call id, so a later ``tool_result`` can be
  applied or ignored (Spec §9).

:meth:`SessionState.to_bytes` / :meth:`SessionState.from_bytes` give a compact
msgpack form for a Kafka changelog: hex digests travel as raw bytes and each
distinct string is written once.
"""

from __future__ import annotations

import re
from typing import Any

import msgpack

__all__ = ["CallRecord", "RunState", "PendingCall", "SessionState", "MAX_WARNING_KEYS", "MAX_PENDING_CALLS"]

MAX_WARNING_KEYS = 256  # OpenClaw's dedupe map size (Spec §6)
MAX_PENDING_CALLS = 64  # deferred or blocked calls remembered per state
MAX_RUNS = 64  # run states kept per partition key; the oldest idle ones go first

_FORMAT_VERSION = 1


class CallRecord:
    """One entry of the rolling history (Spec §1).

    ``run_id`` is the trimmed run id (None when blank); ``result_hash`` is None
    while the record is pending; ``ref`` is the caller's evidence reference
    (e.g. ``[event_id, partition, offset]``) or None.
    """

    __slots__ = ("tool", "args_hash", "call_id", "run_id", "result_hash", "unknown_tool", "ref")

    def __init__(self, tool: str, args_hash: str, call_id: str | None, run_id: str | None,
                 result_hash: str | None = None, unknown_tool: str | None = None, ref: Any = None) -> None:
        self.tool = tool
        self.args_hash = args_hash
        self.call_id = call_id
        self.run_id = run_id
        self.result_hash = result_hash
        self.unknown_tool = unknown_tool
        self.ref = ref

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CallRecord) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__
        )

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"CallRecord({fields})"


class RunState:
    """Per-run state: the post-compaction guard (Spec §7) and whether the run was aborted.

    ``guard_enabled`` and ``window_size`` are fixed when the run is first seen,
    for the run's agent; ``window`` holds ``(tool, args_hash, result_hash)``
    observations since the last arming, each with the caller's ``ref``.
    """

    __slots__ = ("guard_enabled", "window_size", "remaining", "window", "aborted")

    def __init__(self, guard_enabled: bool, window_size: int, remaining: int = 0,
                 window: list[tuple[str, str, str, Any]] | None = None, aborted: bool = False) -> None:
        self.guard_enabled = guard_enabled
        self.window_size = window_size
        self.remaining = remaining
        self.window = window if window is not None else []
        self.aborted = aborted

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunState) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__
        )

    @property
    def idle(self) -> bool:
        """Nothing here that a fresh RunState would not also say."""
        return not self.remaining and not self.aborted


class PendingCall:
    """A call whose outcome arrives later as a ``tool_result``, or that was blocked.

    ``profile`` is the outcome rule chosen from the call's tool and args
    (:func:`~streams.detection.fingerprint.outcome_profile`).
    """

    __slots__ = ("tool", "args_hash", "run_id", "profile", "blocked")

    def __init__(self, tool: str, args_hash: str, run_id: str | None, profile: int, blocked: bool) -> None:
        self.tool = tool
        self.args_hash = args_hash
        self.run_id = run_id
        self.profile = profile
        self.blocked = blocked

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PendingCall) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__
        )


class SessionState:
    """Mutable per-partition-key state; see the module docstring."""

    __slots__ = ("history", "warning_buckets", "runs", "calls", "last_offsets", "args_counts")

    def __init__(self) -> None:
        # Change ``history`` only through append/trim/reindex: ``args_counts``
        # (args hash -> records holding it) lets the detectors skip a call that
        # repeats nothing without scanning the history.
        self.history: list[CallRecord] = []
        self.args_counts: dict[str, int] = {}
        self.warning_buckets: dict[str, int] = {}
        self.runs: dict[str, RunState] = {}
        self.calls: dict[str, PendingCall] = {}
        # source partition -> last applied offset; kept by the stream processor
        # in the same changelog record so state and progress move together.
        self.last_offsets: dict[str, int] = {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionState) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__
        )

    def __repr__(self) -> str:
        return (f"SessionState(history={len(self.history)}, warning_keys={len(self.warning_buckets)}, "
                f"runs={len(self.runs)}, calls={len(self.calls)})")

    # ------------------------------------------------------------------ mutation

    def append(self, record: CallRecord, history_size: int) -> None:
        """Add a record, then drop the oldest beyond ``history_size`` (Spec §3 steps 4 and 6)."""
        self.history.append(record)
        counts = self.args_counts
        counts[record.args_hash] = counts.get(record.args_hash, 0) + 1
        if len(self.history) > history_size:
            self.trim(history_size)

    def trim(self, history_size: int) -> None:
        """Drop the oldest records beyond ``history_size``."""
        excess = len(self.history) - history_size
        if excess > 0:
            counts = self.args_counts
            for record in self.history[:excess]:
                left = counts[record.args_hash] - 1
                if left:
                    counts[record.args_hash] = left
                else:
                    del counts[record.args_hash]
            del self.history[:excess]

    def reindex(self) -> None:
        """Recount ``args_counts`` after ``history`` was replaced or extended wholesale."""
        counts: dict[str, int] = {}
        for record in self.history:
            counts[record.args_hash] = counts.get(record.args_hash, 0) + 1
        self.args_counts = counts

    def store_warning_bucket(self, key: str, bucket: int) -> None:
        """Set a dedupe bucket; a new 257th key evicts the first-inserted one (Spec §6)."""
        buckets = self.warning_buckets
        if key not in buckets and len(buckets) >= MAX_WARNING_KEYS:
            del buckets[next(iter(buckets))]
        buckets[key] = bucket

    def remember_call(self, call_id: str, call: PendingCall) -> None:
        calls = self.calls
        calls.pop(call_id, None)
        if len(calls) >= MAX_PENDING_CALLS:
            del calls[next(iter(calls))]
        calls[call_id] = call

    def run(self, run_key: str, guard_enabled: bool, window_size: int) -> RunState:
        """The run's state, created (with the given guard config) on first sight."""
        run = self.runs.get(run_key)
        if run is None:
            if len(self.runs) >= MAX_RUNS:
                self._evict_run()
            run = self.runs[run_key] = RunState(guard_enabled, window_size)
        return run

    def _evict_run(self) -> None:
        for key, run in self.runs.items():
            if run.idle:
                del self.runs[key]
                return
        del self.runs[next(iter(self.runs))]

    # -------------------------------------------------------------- serialisation

    def to_bytes(self) -> bytes:
        """Compact msgpack form (strings interned, hex digests as bytes)."""
        table: dict[Any, int] = {}
        strings: list[Any] = []

        def intern(value: Any) -> int:
            if value is None:
                return -1
            index = table.get(value)
            if index is None:
                index = table[value] = len(strings)
                strings.append(_pack_hash(value))
            return index

        history = [
            [intern(r.tool), intern(r.args_hash[len(r.tool) + 1:]), intern(r.call_id), intern(r.run_id),
             intern(r.result_hash), intern(r.unknown_tool)] + ([r.ref] if r.ref is not None else [])
            for r in self.history
        ]
        runs = {
            key: [int(run.guard_enabled), run.window_size, run.remaining, int(run.aborted),
                  [[intern(t), intern(a[len(t) + 1:]), intern(h), ref] for t, a, h, ref in run.window]]
            for key, run in self.runs.items()
        }
        calls = {
            key: [intern(c.tool), intern(c.args_hash[len(c.tool) + 1:]), intern(c.run_id), c.profile, int(c.blocked)]
            for key, c in self.calls.items()
        }
        doc = [_FORMAT_VERSION, strings, history, self.warning_buckets, runs, calls, self.last_offsets]
        return msgpack.packb(doc, use_bin_type=True)

    @classmethod
    def from_bytes(cls, data: bytes) -> "SessionState":
        """Inverse of :meth:`to_bytes`. Raises ``ValueError`` for an unknown format."""
        doc = msgpack.unpackb(data, raw=False, strict_map_key=False)
        if not isinstance(doc, list) or not doc or doc[0] != _FORMAT_VERSION:
            raise ValueError("not a loopwatch session state (unknown format version)")
        _, strings, history, buckets, runs, calls, offsets = doc
        strings = [_unpack_hash(s) for s in strings]

        def get(index: int) -> Any:
            return None if index < 0 else strings[index]

        state = cls()
        for row in history:
            tool = get(row[0])
            state.history.append(CallRecord(
                tool, tool + ":" + get(row[1]), get(row[2]), get(row[3]), get(row[4]), get(row[5]),
                row[6] if len(row) > 6 else None,
            ))
        state.reindex()
        state.warning_buckets = dict(buckets)
        for key, (enabled, window_size, remaining, aborted, window) in runs.items():
            state.runs[key] = RunState(
                bool(enabled), window_size, remaining,
                [(get(t), get(t) + ":" + get(a), get(h), ref) for t, a, h, ref in window], bool(aborted),
            )
        for key, (tool_i, args_i, run_i, profile, blocked) in calls.items():
            tool = get(tool_i)
            state.calls[key] = PendingCall(tool, tool + ":" + get(args_i), get(run_i), profile, bool(blocked))
        state.last_offsets = dict(offsets)
        return state


# Hex digests (64 lower-case hex chars, optionally "error:"-prefixed) are the bulk
# of a state; they travel as 32 raw bytes (33 with a marker byte for "error:").
_ERROR_PREFIX = "error:"


_HEX64 = re.compile(r"[0-9a-f]{64}")


def _pack_hash(value: str) -> Any:
    if _HEX64.fullmatch(value):
        return bytes.fromhex(value)
    if value.startswith(_ERROR_PREFIX) and _HEX64.fullmatch(value, 6):
        return b"\x01" + bytes.fromhex(value[6:])
    return value


def _unpack_hash(value: Any) -> Any:
    if isinstance(value, bytes):
        if len(value) == 33:
            return _ERROR_PREFIX + value[1:].hex()
        return value.hex()
    return value
