"""What OpenClaw keeps per session, as one serialisable object per partition key.

A :class:`SessionState` holds (docs/detection-rules.md §1, §6, §7):

* ``history`` -- the rolling list of :class:`CallRecord`, newest last, capped
  at ``historySize`` for the whole state (docs/detection-rules.md §8.2: the cap is per session);
* ``warning_buckets`` -- the warning dedupe map, insertion-ordered, at most
  256 keys, first-inserted key evicted (docs/detection-rules.md §6);
* ``runs`` -- the post-compaction guards (with OpenClaw's aborted flag and loopwatch's run end) of the events
  applied to this state, by guard identity (docs/detection-rules.md §7,
  :func:`~streams.detection.events.guard_key`), when the caller keeps them
  with the state (the stream processor does; the offline store keeps one map
  for all sessions instead);
* ``calls`` -- calls whose outcome is still to come (``outcome_follows``),
  by tool-call id, so a later ``tool_result`` is recorded as theirs (docs/detection-rules.md §9);
* ``blocked`` -- deferred calls that were blocked, by run id and call id
  (:func:`~streams.detection.events.blocked_key`), so their result is ignored
  (docs/detection-rules.md §9), when the caller keeps them with the state (the stream
  processor does; the offline store keeps one map for all sessions).

How memory stays bounded: ``history`` by ``historySize``, ``warning_buckets``
by 256 keys, ``runs`` by :data:`MAX_RUNS` (idle guards evicted first),
``blocked`` by :data:`MAX_BLOCKED` (OpenClaw's own cap; oldest first).
``calls`` is *not* bounded by count: OpenClaw keeps a deferred call pending
until its result arrives or its session state expires, and dropping one
early would turn its late result into a result with no pending call, which
is recorded differently (docs/detection-rules.md §9). An entry leaves when its result arrives;
what is left is bounded by the state's lifetime: the stream processor deletes
a key's state after ``state_ttl_s`` idle (30 minutes by default, as OpenClaw
prunes idle sessions), and the offline store lives for one input. So a busy
key keeps one entry (about 100 bytes) per call whose result never comes,
until the key falls idle; runners that report every result (the client's
``report_result``) keep it at the calls in flight.

:meth:`SessionState.to_bytes` / :meth:`SessionState.from_bytes` give a compact
msgpack form for a Kafka changelog: hex digests travel as raw bytes and each
distinct string is written once.

Size: the record classes and their changelog form are one format (a field added to a record is a field
packed and unpacked, under one format version); kept in one file so they change together.
"""

from __future__ import annotations

import re
from typing import Any

import msgpack

from .outcomes_2026_9 import KIND_TERMINAL_EXEC_FAILURE

__all__ = ["hash_key", "CallRecord", "RunState", "PendingCall", "SessionState", "MAX_WARNING_KEYS", "MAX_RUNS",
           "MAX_BLOCKED", "remember_blocked"]

MAX_WARNING_KEYS = 256  # OpenClaw's dedupe map size (docs/detection-rules.md §6)
MAX_RUNS = 64  # guards kept per partition key; the oldest idle ones go first
MAX_BLOCKED = 1024  # blocked calls OpenClaw remembers (docs/detection-rules.md §9)


def remember_blocked(blocked: dict[str, "PendingCall"] | Any, key: str, call: "PendingCall") -> None:
    """Remember a blocked call by its key (docs/detection-rules.md §9); a new key beyond :data:`MAX_BLOCKED` evicts the oldest.

    A key already there keeps its place (a set's ``add``) and takes the newer
    call (what a result that ran without a verdict is recorded as).
    """
    if key not in blocked and len(blocked) >= MAX_BLOCKED:
        del blocked[next(iter(blocked))]
    blocked[key] = call

_FORMAT_VERSION = 3


def hash_key(full_hash: str) -> str:
    """The comparison key of an args or result hash: all but its last 32 hex digits.

    Detectors compare keys (128 bits of SHA-256, collision-free in practice);
    full hashes are needed only for what a verdict prints, and the serialised
    state keeps them only where that can happen (see :meth:`SessionState.to_bytes`).
    """
    return full_hash[:-32]


class CallRecord:
    """One entry of the rolling history (docs/detection-rules.md §1).

    ``run_id`` is the trimmed run id (None when blank); ``result_hash`` is None
    while the record is pending; ``ref`` is the caller's evidence reference
    (e.g. ``[event_id, partition, offset]``) or None. ``args_key`` and
    ``result_key`` (:func:`hash_key`) are what detectors compare; after a
    round trip through :meth:`SessionState.from_bytes` the full hashes of
    records that can no longer be printed are None.

    Kept by the 2026.9.6 profile only (docs/detection-rules.md §11.1; 0/False/None otherwise):
    ``kind`` (``outcomeKind``: 0 none, :data:`~streams.detection.outcomes_2026_9.KIND_VETO`
    for a veto record, :data:`~streams.detection.outcomes_2026_9.KIND_TERMINAL_EXEC_FAILURE`),
    ``no_progress`` and ``failure_key`` (:func:`hash_key` of the failure identity hash).
    """

    __slots__ = ("tool", "args_hash", "args_key", "call_id", "run_id", "result_hash", "result_key",
                 "unknown_tool", "ref", "kind", "no_progress", "failure_key", "_packed")

    def __init__(self, tool: str, args_hash: str | None, call_id: str | None, run_id: str | None,
                 result_hash: str | None = None, unknown_tool: str | None = None, ref: Any = None,
                 args_key: str | None = None, result_key: str | None = None, kind: int = 0,
                 no_progress: bool = False, failure_key: str | None = None) -> None:
        self.tool = tool
        self.args_hash = args_hash
        self.args_key = args_key if args_key is not None else args_hash[:-32]  # hash_key, inlined (hot)
        self.call_id = call_id
        self.run_id = run_id
        self.result_hash = result_hash
        self.result_key = result_key if result_key is not None or result_hash is None else result_hash[:-32]
        self.unknown_tool = unknown_tool
        self.ref = ref
        self.kind = kind
        self.no_progress = no_progress
        self.failure_key = failure_key
        self._packed: bytes | None = None  # serialised form, built once (records rarely change)

    def set_result(self, result_hash: str | None, unknown_tool: str | None, ref: Any = None, kind: int = 0,
                   no_progress: bool = False, failure_hash: str | None = None) -> None:
        """Attach an outcome to this pending record (docs/detection-rules.md §3 step 6; docs/detection-rules.md §11.3.1 step 6 for the rest).

        The call id is dropped (only pending records are matched by it); ``ref``
        is kept when the record has none yet.
        """
        self.result_hash = result_hash
        self.result_key = result_hash[:-32] if result_hash is not None else None  # hash_key, inlined (hot)
        self.unknown_tool = unknown_tool
        self.kind = kind
        self.no_progress = no_progress
        self.failure_key = hash_key(failure_hash) if failure_hash is not None else None
        self.call_id = None
        if self.ref is None:
            self.ref = ref
        self._packed = None

    def unveto(self) -> None:
        """A vetoed call the runner ran all the same (``ran_without_verdict``): this veto record becomes the
        call's pending record, for its outcome to attach to (the caller sets ``SessionState.maybe_pending``)."""
        self.kind = 0
        self._packed = None

    def rebind(self, args_hash: str) -> None:
        """Give this pending record another args hash (docs/detection-rules.md §11.3.1 step 5a); the caller re-counts
        :attr:`SessionState.args_counts`."""
        self.args_hash = args_hash
        self.args_key = hash_key(args_hash)
        self._packed = None

    def packed(self) -> bytes:
        """The msgpack of ``[tool, args key, call id, result key, unknown tool, ref]``, keys as raw bytes (cached),
        plus ``kind, no_progress, failure key`` when any is set (2026.9.6 records)."""
        packed = self._packed
        if packed is None:
            row = [
                self.tool, bytes.fromhex(self.args_key[len(self.tool) + 1:]), self.call_id,
                _pack_hash(self.result_key) if self.result_key is not None else None,
                self.unknown_tool, self.ref,
            ]
            if self.kind or self.no_progress or self.failure_key is not None:
                row += [self.kind, int(self.no_progress),
                        _pack_hash(self.failure_key) if self.failure_key is not None else None]
            packed = self._packed = _packb(row)
        return packed

    _IDENTITY = ("tool", "args_key", "call_id", "run_id", "result_key", "unknown_tool", "ref", "kind",
                 "no_progress", "failure_key")
    _SHOWN = ("tool", "args_hash", "args_key", "call_id", "run_id", "result_hash", "result_key", "unknown_tool", "ref",
              "kind", "no_progress", "failure_key")

    def __eq__(self, other: object) -> bool:
        """Records are equal when detectors cannot tell them apart (full hashes
        are display data that serialisation may drop where it cannot be printed)."""
        return isinstance(other, CallRecord) and all(
            getattr(self, name) == getattr(other, name) for name in self._IDENTITY
        )

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._SHOWN)
        return f"CallRecord({fields})"


class RunState:
    """Per-run state: the post-compaction guard (docs/detection-rules.md §7), whether the run was aborted, whether it ended.

    ``guard_enabled`` and ``window_size`` are fixed when the run is first seen,
    for the run's agent; ``window`` holds ``(tool, args_hash, result_hash)``
    observations since the last arming, each with the caller's ``ref``.

    Under 2026.9.6, keyed like the guard (docs/detection-rules.md §11.3.3): ``recovery`` is the
    critical-tool-loop recovery flag (set by a recovery block, cleared by a
    ``compaction_retry``: a retry starts a new attempt) and ``terminated`` says a
    terminal block ended the run.

    ``aborted`` is OpenClaw's flag (the guard's abort, ``run_aborted`` of a
    verdict); ``ended`` is loopwatch's: ``(by, reason, ref)`` once anything
    ended the run (:mod:`~streams.detection.run_end`), else None.
    """

    __slots__ = ("guard_enabled", "window_size", "remaining", "window", "aborted", "recovery", "terminated", "ended")

    def __init__(self, guard_enabled: bool, window_size: int, remaining: int = 0,
                 window: list[tuple[str, str, str, Any]] | None = None, aborted: bool = False,
                 recovery: bool = False, terminated: bool = False,
                 ended: tuple[str, str | None, Any] | None = None) -> None:
        self.guard_enabled = guard_enabled
        self.window_size = window_size
        self.remaining = remaining
        self.window = window if window is not None else []
        self.aborted = aborted
        self.recovery = recovery
        self.terminated = terminated
        self.ended = ended

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunState) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__
        )

    @property
    def idle(self) -> bool:
        """Nothing here that a fresh RunState would not also say."""
        return (not self.remaining and not self.aborted and not self.recovery and not self.terminated
                and self.ended is None)


class PendingCall:
    """A call whose outcome arrives later as a ``tool_result`` (docs/detection-rules.md §9).

    The outcome is recorded as this call's: ``run_id`` (trimmed, None
    when blank), ``tool`` and ``args_hash``; ``profile`` is the outcome rule
    chosen from the call's tool and args
    (:func:`~streams.detection.fingerprint.outcome_profile`); ``guard`` the
    identity of the call's guard (:func:`~streams.detection.events.guard_key`)
    and ``agent`` and ``behaviour`` the call's ``agent_id`` and behaviour
    ``profile`` field (they pick the settings the outcome is recorded with).
    ``refused`` is ``[verdict, event id, by]`` when loopwatch's verdict of the call was
    ``block`` or ``abort`` (``by``: the detector or rule of its ``decided_by``), else None: a
    result the runner sends with ``ran_without_verdict`` then corrects that verdict
    (docs/events-and-verdicts.md, Late calls).
    """

    __slots__ = ("tool", "args_hash", "run_id", "profile", "guard", "agent", "behaviour", "refused")

    def __init__(self, tool: str, args_hash: str, run_id: str | None, profile: int, guard: str | None,
                 agent: str | None = None, behaviour: str | None = None, refused: list | None = None) -> None:
        self.tool = tool
        self.args_hash = args_hash
        self.run_id = run_id
        self.profile = profile
        self.guard = guard
        self.agent = agent
        self.behaviour = behaviour
        self.refused = refused

    def packed(self) -> list:
        """``[tool, args, run id, profile, 0]``, plus ``[guard, agent, behaviour]`` unless they are
        ``[run id, None, None]`` and no ``refused`` follows, plus ``refused`` when set (see
        :meth:`SessionState.to_bytes`)."""
        entry = [self.tool, _pack_hash(self.args_hash[len(self.tool) + 1:]), self.run_id, self.profile, 0]
        if self.guard != self.run_id or self.agent is not None or self.behaviour is not None or self.refused:
            entry += (self.guard, self.agent, self.behaviour)
        if self.refused:
            entry.append(list(self.refused))
        return entry

    @classmethod
    def unpacked(cls, entry: list) -> "PendingCall":
        """Inverse of :meth:`packed` (also reads the entries of states written before the guard was kept)."""
        tool, args_bin, run_id, profile, _blocked, *more = entry
        guard, agent, behaviour, refused = (*more, None)[:4] if more else (run_id, None, None, None)
        return cls(tool, tool + ":" + _unpack_hash(args_bin), run_id, profile, guard, agent, behaviour,
                   list(refused) if refused else None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PendingCall) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__
        )


class SessionState:
    """Mutable per-partition-key state; see the module docstring."""

    __slots__ = ("history", "warning_buckets", "runs", "calls", "blocked", "last_offsets", "args_counts",
                 "policy_runs", "maybe_pending", "newest_of_run")
    _COMPARED = __slots__[:-2]  # maybe_pending is a hint, newest_of_run an index of history: not state

    def __init__(self) -> None:
        # Change ``history`` only through append/trim/reindex: ``args_counts``
        # (args key -> records holding it) lets the detectors skip a call that
        # repeats nothing without scanning the history.
        self.history: list[CallRecord] = []
        self.args_counts: dict[str, int] = {}
        # trimmed run id -> its newest record in ``history``: the detectors' first look at a call that
        # repeats nothing, without walking the other runs' records of the session
        self.newest_of_run: dict[str | None, CallRecord] = {}
        self.warning_buckets: dict[str, int] = {}
        self.runs: dict[str, RunState] = {}
        self.calls: dict[str, PendingCall] = {}
        self.blocked: dict[str, PendingCall] = {}  # blocked_key -> the blocked call, oldest first
        # source partition -> last applied offset; kept by the stream processor
        # in the same changelog record so state and progress move together.
        self.last_offsets: dict[str, int] = {}
        # raw run id -> what loopwatch's run policies remember (streams.detection.policies.run_rules);
        # empty, and absent from the serialised form, unless a run policy is on.
        self.policy_runs: dict[str, list] = {}
        # False only when no record of ``history`` is pending without an outcome kind: lets 2026.9.6's
        # pre-launch rebind (engine._rebind_pending) skip its scan. The engine sets it when it leaves
        # such a record; reindex() and that scan make it exact again.
        self.maybe_pending = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionState) and all(
            getattr(self, name) == getattr(other, name) for name in self._COMPARED
        )

    def __repr__(self) -> str:
        return (f"SessionState(history={len(self.history)}, warning_keys={len(self.warning_buckets)}, "
                f"runs={len(self.runs)}, calls={len(self.calls)}, blocked={len(self.blocked)})")

    # ------------------------------------------------------------------ mutation

    def append(self, record: CallRecord, history_size: int) -> None:
        """Add a record, then drop the oldest beyond ``history_size`` (docs/detection-rules.md §3 steps 4 and 6)."""
        self.history.append(record)
        self.newest_of_run[record.run_id] = record
        counts = self.args_counts
        counts[record.args_key] = counts.get(record.args_key, 0) + 1
        if len(self.history) > history_size:
            self.trim(history_size)

    def trim(self, history_size: int) -> None:
        """Drop the oldest records beyond ``history_size``."""
        excess = len(self.history) - history_size
        if excess > 0:
            counts = self.args_counts
            newest = self.newest_of_run
            for record in self.history[:excess]:
                left = counts[record.args_key] - 1
                if left:
                    counts[record.args_key] = left
                else:
                    del counts[record.args_key]
                if newest.get(record.run_id) is record:  # its run has no record left
                    del newest[record.run_id]
            del self.history[:excess]

    def rebind(self, record: CallRecord, args_hash: str) -> None:
        """Give a pending record of ``history`` another args hash (docs/detection-rules.md §11.3.1 step 5a), keeping
        ``args_counts`` right."""
        counts = self.args_counts
        left = counts[record.args_key] - 1
        if left:
            counts[record.args_key] = left
        else:
            del counts[record.args_key]
        record.rebind(args_hash)
        counts[record.args_key] = counts.get(record.args_key, 0) + 1

    def reindex(self) -> None:
        """Recount ``args_counts`` (and ``newest_of_run``) after ``history`` was replaced or extended wholesale."""
        counts: dict[str, int] = {}
        newest: dict[str | None, CallRecord] = {}
        pending = False
        for record in self.history:
            counts[record.args_key] = counts.get(record.args_key, 0) + 1
            newest[record.run_id] = record
            if record.result_key is None and not record.kind:
                pending = True
        self.maybe_pending = pending
        self.args_counts = counts
        self.newest_of_run = newest

    def store_warning_bucket(self, key: str, bucket: int) -> None:
        """Set a dedupe bucket; a new 257th key evicts the first-inserted one (docs/detection-rules.md §6)."""
        buckets = self.warning_buckets
        if key not in buckets and len(buckets) >= MAX_WARNING_KEYS:
            del buckets[next(iter(buckets))]
        buckets[key] = bucket

    def remember_call(self, call_id: str, call: PendingCall) -> None:
        """Keep a deferred call until its result arrives (no count limit: see the module docstring)."""
        calls = self.calls
        calls.pop(call_id, None)  # a reused id is the newest call
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

    def to_bytes(self, full_result_min_calls: int = 1) -> bytes:
        """Compact msgpack form: hash keys as raw bytes, run ids in a table.

        Arguments:
            full_result_min_calls: a call's result hash can only be printed (in a
                warning key) once at least this many records of that call form a
                no-progress streak: pass the smallest ``warningThreshold`` in
                effect (:attr:`OpenClawConfig.smallest_warning_threshold`) so
                calls seen fewer times keep only their 128-bit key. 1 keeps all.

        Layout (format 3): ``[3, run_ids, run_of_record, rows, full_args,
        full_results, warning_buckets, runs, calls, last_offsets]``, plus
        ``policy_runs`` as an 11th element when a run policy keeps memory or a
        12th follows, and the ``blocked`` keys as a 12th when there are any (a
        run as :func:`_pack_run` packs it; ``calls`` entries are ``[tool, args,
        run id, profile, 0]``, plus the guard identity, agent id and behaviour
        profile unless they are the run id, None and None, plus the refused verdict of the call
        when it had one (:class:`PendingCall`); ``blocked`` maps a
        key to such an entry), where
        ``rows[i]`` is ``[tool, args key, call id, result key, unknown tool,
        ref]`` (:meth:`CallRecord.packed`, encoded once per record: a state is
        re-encoded at every checkpoint that follows a change, and its history
        is the bulk of it), ``run_of_record`` is None when every record has
        ``run_ids[0]`` (the usual case with run keys), and
        ``full_args``/``full_results`` map a record index to the second half of
        its full hash.
        """
        history = self.history
        run_ids: dict[str | None, int] = {}
        for record in history:
            if record.run_id not in run_ids:
                run_ids[record.run_id] = len(run_ids)
        single_run = len(run_ids) <= 1
        run_of = None if single_run else [run_ids[r.run_id] for r in history]

        # Full hashes only where a verdict can print them: the args hash of each
        # run's newest record (ping-pong's paired signature) and the result hash
        # of the newest resulted record per call (the {r} of warning keys) when
        # the call is frequent enough to reach a threshold. Eviction drops the
        # oldest first, so these stay the newest until a newer (full) record
        # replaces them. The rest keep 128-bit keys.
        full_args: dict[int, bytes] = {}
        full_results: dict[int, bytes] = {}
        if single_run:  # the usual case with run keys: calls are args keys, counted already
            calls_per_key: dict[Any, int] = self.args_counts
        else:
            calls_per_key = {}
            for r in history:
                group = (r.run_id, r.args_key)
                calls_per_key[group] = calls_per_key.get(group, 0) + 1
        frequent = {group for group, count in calls_per_key.items() if count >= full_result_min_calls}
        runs_left = set(run_ids)  # runs whose newest record is still to come
        for index in range(len(history) - 1, -1, -1):
            if not (runs_left or frequent):
                break
            r = history[index]
            if r.run_id in runs_left:
                runs_left.discard(r.run_id)
                if r.args_hash is not None:
                    full_args[index] = bytes.fromhex(r.args_hash[-32:])
            if r.result_key is not None and frequent:
                group = r.args_key if single_run else (r.run_id, r.args_key)
                if group in frequent:  # its newest resulted record
                    frequent.discard(group)
                    if r.result_hash is not None:
                        full_results[index] = bytes.fromhex(r.result_hash[-32:])
        for index, r in enumerate(history):
            # 2026.9.6's terminal-failure streak can print the result hash of a record of other args
            if r.kind == KIND_TERMINAL_EXEC_FAILURE and r.result_hash is not None:
                full_results[index] = bytes.fromhex(r.result_hash[-32:])
        runs = {key: _pack_run(run) for key, run in self.runs.items()}
        calls = {key: call.packed() for key, call in self.calls.items()}
        tail = [full_args, full_results, self.warning_buckets, runs, calls, self.last_offsets]
        # an 11th and 12th element only when used: states without them stay byte-identical
        if self.policy_runs or self.blocked:
            tail.append(self.policy_runs)
        if self.blocked:
            tail.append({key: call.packed() for key, call in self.blocked.items()})
        return b"".join((
            _HEADS[len(tail)], _packb(list(run_ids)), _packb(run_of),
            _array_header(len(history)), *[r.packed() for r in history], _packb(tail)[1:],
        ))

    @classmethod
    def from_bytes(cls, data: bytes) -> "SessionState":
        """Inverse of :meth:`to_bytes` (also reads format 2). Raises ``ValueError`` for an unknown format."""
        doc = msgpack.unpackb(data, raw=False, strict_map_key=False, unicode_errors="surrogatepass")
        if not isinstance(doc, list) or not doc or doc[0] not in (2, _FORMAT_VERSION) or len(doc) not in (
                (12,) if doc[0] == 2 else (10, 11, 12)):
            raise ValueError("not a loopwatch session state (unknown format version)")
        if doc[0] == 2:  # rows without their tool: [args key, call id, result key, unknown tool, ref]
            _, tools, run_ids, tool_of, run_of, rows, *rest = doc
            rows = [[tools[tool_of[index]], *row] for index, row in enumerate(rows)]
        else:
            _, run_ids, run_of, rows, *rest = doc
        full_args, full_results, buckets, runs, calls, offsets, *optional = rest
        state = cls()
        history = state.history
        for index, (tool, args_bin, call_id, result_bin, unknown, ref, *extra) in enumerate(rows):
            args_key = tool + ":" + args_bin.hex()
            result_key = _unpack_hash(result_bin) if result_bin is not None else None
            tail = full_args.get(index)
            result_tail = full_results.get(index)
            record = CallRecord(
                tool, args_key + tail.hex() if tail is not None else None, call_id,
                run_ids[run_of[index] if run_of is not None else 0],
                result_key + result_tail.hex() if result_tail is not None else None, unknown, ref,
                args_key=args_key, result_key=result_key,
            )
            if extra:  # a 2026.9.6 record: kind, no-progress, failure key
                kind, no_progress, failure_bin = extra
                record.kind, record.no_progress = kind, bool(no_progress)
                record.failure_key = _unpack_hash(failure_bin) if failure_bin is not None else None
            history.append(record)
        state.reindex()
        state.warning_buckets = dict(buckets)
        for key, (enabled, window_size, remaining, aborted, window, *rest) in runs.items():
            state.runs[key] = RunState(
                bool(enabled), window_size, remaining,
                [(t, t + ":" + _unpack_hash(a), _unpack_hash(h), ref) for t, a, h, ref in window], bool(aborted),
                *(bool(flag) for flag in rest[:2]), ended=tuple(rest[2]) if len(rest) > 2 else None,
            )
        for key, entry in calls.items():
            if entry[4]:  # written before blocked calls were kept apart: keyed by call id alone
                remember_blocked(state.blocked, key, PendingCall.unpacked(entry))
            else:
                state.calls[key] = PendingCall.unpacked(entry)
        state.last_offsets = dict(offsets)
        if optional and optional[0]:
            state.policy_runs = dict(optional[0])
        for key, entry in (optional[1] if len(optional) > 1 else {}).items():
            remember_blocked(state.blocked, key, PendingCall.unpacked(entry))
        return state


def _pack_run(run: RunState) -> list:
    """``[guard enabled, window size, remaining, aborted, window]``, plus ``recovery, terminated`` when either
    is set (2026.9.6 runs) or the run ended, plus ``[by, reason, ref]`` when it ended (loopwatch's run end);
    other states stay byte-identical."""
    packed = [int(run.guard_enabled), run.window_size, run.remaining, int(run.aborted),
              [[t, _pack_hash(a[len(t) + 1:]), _pack_hash(h), ref] for t, a, h, ref in run.window]]
    if run.recovery or run.terminated or run.ended is not None:
        packed += [int(run.recovery), int(run.terminated)]
    if run.ended is not None:
        packed.append(list(run.ended))
    return packed


# surrogatepass: ids and tool names from JSON input may hold lone surrogates; they round-trip exactly.
_packb = msgpack.Packer(use_bin_type=True, unicode_errors="surrogatepass").pack
_array_header = msgpack.Packer().pack_array_header
_HEADS = {6 + extra: _array_header(10 + extra) + _packb(_FORMAT_VERSION) for extra in (0, 1, 2)}


# Hex digests and keys (64 or 32 lower-case hex chars, optionally "error:"-prefixed)
# are the bulk of a state; they travel as raw bytes (plus a marker byte for "error:").
_ERROR_PREFIX = "error:"


_HEX = re.compile(r"[0-9a-f]{64}|[0-9a-f]{32}")


def _pack_hash(value: str) -> Any:
    if _HEX.fullmatch(value):
        return bytes.fromhex(value)
    if value.startswith(_ERROR_PREFIX) and _HEX.fullmatch(value, 6):
        return b"\x01" + bytes.fromhex(value[6:])
    return value


def _unpack_hash(value: Any) -> Any:
    if isinstance(value, bytes):
        if len(value) in (17, 33):
            return _ERROR_PREFIX + value[1:].hex()
        return value.hex()
    return value
