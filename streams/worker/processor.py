"""Per-event logic of the worker, with no Kafka and no Faust: testable offline.

:class:`Processor` turns one input record into what the worker publishes:

* :meth:`Processor.decode` -- record value -> event, or a dead letter;
* :meth:`Processor.state_key` -- the record key, else the key derived from the
  event (:func:`streams.wire.keys.record_key`);
* :meth:`Processor.apply` -- one event against the :class:`SessionState` of
  its key: the engine's verdict as a verdict record and its loop events, the
  state updated in place; or nothing for an event the state already contains.

Record shapes (values encoded with the output codec, msgpack by default, as
JSON when msgpack cannot carry them, e.g. a lone surrogate from JSON input;
dead letters always msgpack because they carry raw bytes):

* verdict (``loopwatch.verdicts``, same key as the event)::

    {event_id, key, run_id, session_id, tool_call_id, [event_ts],
     source: {topic, partition, offset}, [event_source],
     <every field of the engine's verdict: type, verdict, decision, detection, ...,
      evidence: [[event_id, partition, offset], ...]>}

  ``event_ts`` is the event's ``ts`` (epoch ms) when it has one;
  ``event_source`` is the event's own ``source`` (importers' file position).
  The time the verdict was produced is the Kafka record's timestamp.
* loop event (``loopwatch.loop-events``), one per finding of the verdict's
  ``decided_by`` (:mod:`streams.detection.decision`: a detection that warns,
  is suppressed or blocks, the guard's abort, a policy's or the fleet breaker's
  decision, a run that had ended, and the shadow findings)::

    {kind, action (warn|suppressed|block|abort|would_*), detector, level, count,
     message, rule, enforced, warning_key, tool_name, run_id, session_id, key,
     event_id, evidence, source: {topic, partition, offset}, event_ts}

  plus, for a late result (``ran_without_verdict``) whose call loopwatch had
  refused, a correction: kind ``correction``, action ``ran``, ``corrects:
  {event_id, tool_call_id, verdict, by}`` (that call's block or abort did not
  stop it; docs/events-and-verdicts.md, Late calls).

* dead letter (``loopwatch.dead-letters``)::

    {reason_class (decode|schema|error|size|state), reason, source: {topic, partition, offset},
     key: bin|None, value: bin}

  ``state``: a stored state the worker cannot read (its changelog topic and
  partition, offset -1; the key then starts afresh).

Determinism: a verdict record and its loop events are a function of (state,
event, key, source) only -- no clock, no counter -- so applying the same event
to the same state yields byte-identical records. The worker's crash recovery
relies on it (:mod:`streams.worker.app`): events after the last checkpoint are
re-applied to the checkpointed state and their verdicts, if they had been
published before the crash, are published again identically. The exception is
the opt-in fleet breaker (``options.fleet.breaker`` shadow or block): its part of
a verdict also depends on the fleet loops active at that moment.
"""

from __future__ import annotations

import reprlib
from time import perf_counter as _perf_counter, time as _wall_clock
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

import msgpack

from streams.wire import keys

from . import metrics
from streams.wire.codecs import MAX_CARRIED_BYTES, DecodeError, decode_event, fits, record_encoder
from streams.detection import Engine, EventError, SessionState
from streams.detection.decision import correction, findings
from streams.detection.fleet_breaker import FleetBreaker, decide
from streams.wire.verdicts import verdict_record

__all__ = [
    "Source",
    "Outcome",
    "Processor",
    "APPLIED",
    "SKIPPED",
    "DEAD_LETTER",
    "loop_events",
    "encode_dead_letter",
    "shortened",
    "encode_state",
    "decode_state",
]

EVENTS_BY_TYPE = metrics.EVENTS
VERDICTS_BY_NAME = metrics.VERDICTS

# What apply() did with an event.
APPLIED = "applied"          # applied to the state; new verdict
SKIPPED = "skipped"          # already in the state (its verdict was published before the checkpoint): nothing to send
DEAD_LETTER = "dead_letter"  # not an event (decode) or not a valid one (schema)


class Source(NamedTuple):
    """Where a record was read: topic, partition, offset.

    ``rekeyed``: the record came through the rekey topic (a keyless input
    record forwarded under its state key); topic/partition/offset are then
    its origin in the input topic. A named tuple: one is made per record.
    """

    topic: str
    partition: int
    offset: int
    rekeyed: bool = False

    @property
    def tp(self) -> str:
        """The key of :attr:`SessionState.last_offsets`: ``"topic:partition"``, ``"rekey:topic:partition"`` if rekeyed.

        Rekeyed records of a key reach it in their origin's order, but not in
        order with the keyed records of that origin partition (they take a
        detour through the rekey topic), so each path keeps its own last offset.
        """
        return f"rekey:{self.topic}:{self.partition}" if self.rekeyed else f"{self.topic}:{self.partition}"

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset}


def encode_state(state: SessionState, engine: Engine) -> bytes:
    """The state table value of ``state``: ``SessionState.to_bytes`` (full result hashes only where printable)."""
    return state.to_bytes(engine.config.smallest_warning_threshold)


def decode_state(data: bytes) -> SessionState:
    """Inverse of :func:`encode_state`.

    Raises:
        ValueError: ``data`` is not a state ("not a loopwatch session state: <why>"), whatever it holds.
    """
    try:
        return SessionState.from_bytes(data)
    except ValueError as exc:
        if str(exc).startswith("not a loopwatch session state"):
            raise
        raise ValueError(f"not a loopwatch session state: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # a value of the wrong shape fails anywhere in from_bytes
        raise ValueError(f"not a loopwatch session state: {type(exc).__name__}: {exc}") from None


@dataclass(slots=True)
class Outcome:
    """What to publish for one record, and whether the state changed.

    ``verdict``/``loop_events``/``dead_letter`` are encoded record values;
    ``record`` the verdict as a dict (None when not applied now).
    """

    kind: str
    key: bytes | None
    verdict: bytes | None = None
    loop_events: list[bytes] = field(default_factory=list)
    dead_letter: bytes | None = None
    record: dict[str, Any] | None = None


SHORTENED_CHARS = 1_024
"""Longest string (or bytes) a :func:`shortened` record keeps whole, ``event_id`` aside."""

_EVENT_ID_CHARS = 65_536
_SHORTENED_DEPTH = 16  # containers nested deeper are dropped (None)
# what a stub keeps: the decision (the engine's own short values) and where the event was
_STUB_FIELDS = ("event_id", "type", "verdict", "decision", "blocked", "block_reason", "run_aborted", "detector",
                "level", "action", "count")


def shortened(record: Mapping[str, Any], size: int, stub: bool = False) -> dict[str, Any]:
    """A verdict or loop-event record too large to publish (``size`` bytes encoded), cut down.

    Every string and bytes value over :data:`SHORTENED_CHARS` is cut to that
    (``event_id`` to 64 KiB: the runner waiting for the verdict matches it
    whole), containers nested over 16 levels are dropped; ``truncated``
    gives ``size``. With ``stub`` (for when that is still too large, e.g.
    the evidence of a huge ``historySize``, or a long record key) only the
    decision fields (``verdict``, ``decision``, ``blocked``, ``block_reason``,
    ``run_aborted``;
    for a loop event ``detector``, ``level``, ``action``, ``count``), ``type``,
    ``source`` (the worker's topic/partition/offset) and ``event_id`` (cut to
    :data:`SHORTENED_CHARS`) are kept: at most a few KB, whatever the event.

    Such records come from events with tool names or ids of hundreds of KB (a
    verdict repeats the tool name) or a huge free-form ``source``.
    """
    if stub:
        out = {name: _cut(record[name]) for name in _STUB_FIELDS
               if name in record and isinstance(record[name], (str, int, float, bool, type(None)))}
        out["source"] = record.get("source")
    else:
        out = _cut(record)
        out["event_id"] = _cut(record.get("event_id"), _EVENT_ID_CHARS)
    out["truncated"] = size
    return out


def _cut(value: Any, limit: int = SHORTENED_CHARS, depth: int = 0) -> Any:
    if isinstance(value, (str, bytes)):
        return value[:limit] if len(value) > limit else value
    if isinstance(value, (dict, list)) and depth >= _SHORTENED_DEPTH:
        return None
    if isinstance(value, dict):
        return {name: _cut(item, limit, depth + 1) for name, item in value.items()}
    if isinstance(value, list):
        return [_cut(item, limit, depth + 1) for item in value]
    return value


def encode_dead_letter(raw: bytes | None, key: bytes | None, source: Source, reason_class: str,
                       reason: str) -> bytes:
    """The dead-letter record value (always msgpack: ``key`` and ``value`` are raw bytes).

    ``{reason_class, reason, source, key, value}``. A ``key`` field over
    :data:`SHORTENED_CHARS` bytes is cut to that (``key_size`` then gives
    its length), and so is the reason, which may quote the event. The value
    is cut to what makes the letter :func:`fit <fits>` beside the record
    key ``key`` (``value_truncated: true``, ``value_size``: bytes of the
    whole record value), so the letter keeps its record key, except for a
    key that leaves no room at all (about 1 MB), which
    :meth:`streams.worker.outputs.Outputs.add` then leaves out.
    """
    value = raw if raw is not None else b""
    key = key or None
    kept_key = _cut(key)
    record: dict[str, Any] = {"reason_class": reason_class, "reason": _cut(reason), "source": source.as_dict(),
                              "key": kept_key, "value": value}
    if kept_key is not key:
        record["key_size"] = len(key)  # type: ignore[arg-type]
    if not fits(key, _pack_letter(record)):
        record.update(value=b"", value_truncated=True, value_size=len(value))
        # the empty bin is 2 bytes (c4 00); the cut value's header is 5 at most (bin 32)
        room = MAX_CARRIED_BYTES - len(key or b"") - (len(_pack_letter(record)) - 2 + 5)
        record["value"] = value[:max(0, room)]
    return _pack_letter(record)


def _pack_letter(record: dict[str, Any]) -> bytes:
    # backslashreplace: a reason may quote a lone surrogate of the event (JSON can carry one)
    return msgpack.packb(record, use_bin_type=True, unicode_errors="backslashreplace")


def loop_events(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The loop events of a verdict record: one per finding of its ``decided_by``
    (:func:`streams.detection.decision.findings`), enforced or shadow, and the correction of a late
    result whose call loopwatch had refused (:func:`streams.detection.decision.correction`)."""
    found = findings(record)
    fix = correction(record)  # a late result: the block or abort of its call did not happen
    if fix is not None:
        found = [*found, fix]
    if not found:
        return []  # the usual case: nothing to report
    base = {
        "tool_name": record.get("tool_name"), "run_id": record.get("run_id"), "session_id": record.get("session_id"),
        "key": record.get("key"), "event_id": record.get("event_id"), "evidence": record.get("evidence", []),
        "source": record.get("source"), "event_ts": record.get("event_ts"),
    }
    detection = record.get("detection") or {}
    out = []
    for finding in found:
        warning_key = detection.get("warning_key") if finding["kind"] in ("detection", "policy") else None
        out.append({**finding, "warning_key": warning_key, **base})
    return out


class Processor:
    """Applies events to session states and builds the records to publish.

    Arguments:
        engine: the detection engine (with the loop-detection config).
        key_by: how to derive the state key of a record without a Kafka key
            (``run`` or ``session``, see :mod:`streams.wire.keys`).
        codec: ``msgpack`` or ``json``, the encoding of verdicts and loop events.
        fleet: the fleet breaker (:mod:`streams.detection.fleet_breaker`), or None (off: every
            verdict is the engine's). With it, a verdict also depends on the fleet loops active when
            the event is applied, which are not part of the state: see :mod:`streams.worker.fleet`.
        clock: the wall clock, seconds since the epoch, for the ``past_deadline`` count of
            ``loopwatch_late_verdicts_total`` only (tests pass a fake).
    """

    __slots__ = ("engine", "key_by", "codec", "fleet", "clock", "_encode", "_event_counts", "_verdict_counts",
                 "_engine_times", "_redelivered", "_late_counts", "_run_ended")

    def __init__(self, engine: Engine, key_by: str = "run", codec: str = "msgpack",
                 fleet: FleetBreaker | None = None, clock: Callable[[], float] = _wall_clock) -> None:
        if codec not in ("msgpack", "json"):
            raise ValueError(f"codec must be msgpack or json, got {codec!r}")
        self.engine = engine
        self.key_by = key_by
        self.codec = codec
        self.fleet = fleet
        self._encode = record_encoder(codec)
        # metric updates gathered per batch, published by flush_metrics()
        self._event_counts: dict[Any, int] = {}
        self._verdict_counts: dict[Any, int] = {}
        self._engine_times: list[float] = []
        self._redelivered = 0
        self.clock = clock  # metrics only (past_deadline): no verdict depends on it
        self._late_counts: dict[str, int] = {}
        self._run_ended = 0

    # ---------------------------------------------------------------- decoding

    def decode(self, raw: bytes | None, key: bytes | None, source: Source) -> tuple[dict[str, Any] | None, Outcome | None]:
        """``(event, None)``, or ``(None, dead-letter outcome)`` when ``raw`` is not an event record."""
        try:
            return decode_event(raw or b""), None
        except DecodeError as exc:
            return None, self.dead_letter(raw, key, source, "decode", str(exc))

    def dead_letter(self, raw: bytes | None, key: bytes | None, source: Source, reason_class: str,
                    reason: str) -> Outcome:
        metrics.DEAD_LETTERS.labels(reason_class).inc()
        return Outcome(DEAD_LETTER, key, dead_letter=encode_dead_letter(raw, key, source, reason_class, reason))

    def state_key(self, record_key: bytes | None, event: Mapping[str, Any]) -> bytes:
        """The record key when there is one, else the key derived from the event (:func:`streams.wire.keys.record_key`)."""
        return record_key or keys.record_key(event, self.key_by) or b""

    # ---------------------------------------------------------------- applying

    def apply(self, key: bytes, event: Mapping[str, Any], source: Source, state: SessionState,
              raw: bytes | None = None) -> Outcome:
        """Apply one event to ``state`` (changed in place when the outcome is APPLIED).

        An event whose offset is not above ``state.last_offsets[source.tp]``
        is already in the state (re-delivered after a crash or rebalance): it
        is not applied again and nothing is returned to publish (SKIPPED; the
        worker published and acknowledged its verdict before it checkpointed
        that state, see :mod:`streams.worker.app`).
        An event the engine rejects is dead-lettered with reason class ``schema``
        (an unexpected engine failure with ``error``); ``state`` is then unchanged.
        The verdict and loop-event records are a function of (state, event,
        key, source): the same event applied to the same state gives the same bytes.
        """
        tp = source.tp
        offset = source.offset
        last = state.last_offsets.get(tp)
        if last is not None and offset <= last:
            self._redelivered += 1
            return Outcome(SKIPPED, key)

        ref = [event.get("event_id"), source.partition, offset]
        started = _perf_counter()
        try:
            if self.fleet is None:
                verdict = self.engine.process(event, state, ref)
            else:
                verdict = decide(self.fleet, event, lambda: self.engine.process(event, state, ref),
                                 lambda: state.history, lambda: self.engine.run_end(event, state))
        except EventError as exc:
            return self.dead_letter(raw, key, source, "schema", str(exc))
        except Exception as exc:  # a bug must not stop the fleet's worker; the record is kept
            return self.dead_letter(raw, key, source, "error", f"{type(exc).__name__}: {exc}")
        finally:
            self._engine_times.append(_perf_counter() - started)

        record = verdict_record(verdict, event, key.decode("utf-8", "replace"))
        if "source" in event:
            record["event_source"] = record["source"]
        record["source"] = source.as_dict()
        try:
            encoded = self._encode_capped(key, record)
        except ValueError:
            if "event_source" not in record:
                raise
            # the one field a verdict copies from the event unchecked: one neither codec can carry (nested
            # past msgpack's 511 levels and Python's ~1,000) goes as its shortened repr text
            record["event_source"] = reprlib.repr(record["event_source"])
            encoded = self._encode_capped(key, record)
        state.last_offsets[tp] = offset
        counts = self._event_counts
        kind = event.get("type")
        counts[kind] = counts.get(kind, 0) + 1
        counts = self._verdict_counts
        # a call's verdict produced after its runner stopped waiting counts as late, not as what it said:
        # the runner ran the call (the blocks counted are calls that were blocked)
        kind = "late" if self._count_late(record) == "past_deadline" else record["verdict"]
        counts[kind] = counts.get(kind, 0) + 1
        events = loop_events(record)
        if events:
            self._count_detections(events)
            return Outcome(APPLIED, key, verdict=encoded, loop_events=[self._encode_capped(key, e) for e in events],
                           record=record)
        return Outcome(APPLIED, key, verdict=encoded, record=record)

    def _encode_capped(self, key: bytes, record: dict[str, Any]) -> bytes:
        """``record`` encoded, :func:`shortened` (then a stub) while it does not :func:`fit <fits>` with ``key``.

        The stub goes even if it does not fit (a key of about 1 MB): it is a
        few KB, and :meth:`streams.worker.outputs.Outputs.add` then leaves the key out.
        """
        encoded = self._encode(record)
        if fits(key, encoded):
            return encoded
        size = len(encoded)
        encoded = self._encode(shortened(record, size))
        return encoded if fits(key, encoded) else self._encode(shortened(record, size, stub=True))

    def _count_late(self, record: Mapping[str, Any]) -> str | None:
        """Count late verdicts (``late: true``, or a call's verdict past its runner's deadline by :attr:`clock`)
        and refusals of ended runs; the late reason (``ran_without_verdict``, ``past_deadline``) or None."""
        reason = None
        if record.get("late"):
            reason = "ran_without_verdict"
        elif record.get("type") == "tool_call":
            deadline = record.get("deadline")
            if isinstance(deadline, (int, float)) and not isinstance(deadline, bool) and \
                    self.clock() * 1000.0 > deadline:
                reason = "past_deadline"
        if reason is not None:
            self._late_counts[reason] = self._late_counts.get(reason, 0) + 1
        if "run_ended" in record:
            self._run_ended += 1
        return reason

    def flush_metrics(self) -> None:
        """Publish the metric updates of the events applied since the last call (once per batch)."""
        for counts, metric in ((self._event_counts, EVENTS_BY_TYPE), (self._verdict_counts, VERDICTS_BY_NAME)):
            for label, count in counts.items():
                metric.labels(str(label)).inc(count)
            counts.clear()
        metrics.observe_many(metrics.ENGINE_SECONDS, self._engine_times)
        self._engine_times.clear()
        if self._redelivered:
            metrics.REDELIVERED.inc(self._redelivered)
            self._redelivered = 0
        for reason, count in self._late_counts.items():
            metrics.LATE_VERDICTS.labels(reason).inc(count)
        self._late_counts.clear()
        if self._run_ended:
            metrics.RUN_ENDED_EVENTS.inc(self._run_ended)
            self._run_ended = 0

    @staticmethod
    def _count_detections(events: list[dict[str, Any]]) -> None:
        for loop_event in events:
            if loop_event["kind"] != "correction":  # counted as a late verdict already
                metrics.count_finding(loop_event)
