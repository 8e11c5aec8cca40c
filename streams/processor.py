"""Per-event logic of the worker, with no Kafka and no Faust: testable offline.

:class:`Processor` turns one input record into what the worker publishes:

* :meth:`Processor.decode` -- record value -> event, or a dead letter;
* :meth:`Processor.state_key` -- the record key, else the key derived from the
  event (:func:`streams.keys.partition_key`);
* :meth:`Processor.apply` -- one event against the :class:`Entry` of its key:
  the engine's verdict as a verdict record, its loop events, and the updated
  entry; or, for an event the entry already contains, the stored verdict again.

Record shapes (values encoded with the output codec, msgpack by default;
dead letters always msgpack because they carry raw bytes):

* verdict (``loopwatch.verdicts``, same key as the event)::

    {event_id, key, run_id, session_id, tool_call_id, [event_ts],
     source: {topic, partition, offset}, [event_source],
     <every field of the engine's verdict: type, verdict, decision, detection, ...,
      evidence: [[event_id, partition, offset], ...]>,
     verdict_ts}

  ``event_ts`` is the event's ``ts`` (epoch ms) when it has one;
  ``event_source`` is the event's own ``source`` (importers' file position);
  ``verdict_ts`` is epoch ms when the verdict was made.
* loop event (``loopwatch.loop-events``), one per detection that warns
  (emitted), is suppressed, blocks, or aborts (post-compaction guard)::

    {detector, level, action (warn|suppressed|block|abort), count, message,
     warning_key, tool_name, run_id, session_id, key, event_id, evidence,
     source: {topic, partition, offset}, event_ts, verdict_ts}

* dead letter (``loopwatch.dead-letters``)::

    {reason_class (decode|schema|error), reason, source: {topic, partition, offset},
     key: bin|None, value: bin}

Everything here is deterministic given the input and the clock, and a loop
event is a function of its verdict record, so a verdict re-emitted from an
:class:`Entry` comes with byte-identical loop events.
"""

from __future__ import annotations

import time
from time import perf_counter as _perf_counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import msgpack

from . import metrics
from .codecs import DecodeError, decode_event, encode_json
from .detection import Engine, EventError, SessionState
from .keys import partition_key
from .replay import detection_action, verdict_record

__all__ = [
    "Source",
    "Entry",
    "Outcome",
    "Processor",
    "APPLIED",
    "REPLAYED",
    "SKIPPED",
    "DEAD_LETTER",
    "loop_events",
    "encode_dead_letter",
]

EVENTS_BY_TYPE = metrics.EVENTS
VERDICTS_BY_NAME = metrics.VERDICTS

# What apply() did with an event.
APPLIED = "applied"          # applied to the state; new verdict
REPLAYED = "replayed"        # already in the state and the last one of its partition: stored verdict again
SKIPPED = "skipped"          # already in the state, verdict known to be published: nothing to send
DEAD_LETTER = "dead_letter"  # not an event (decode) or not a valid one (schema)

_ENTRY_VERSION = 2
_pack = msgpack.Packer(use_bin_type=True).pack


@dataclass(frozen=True, slots=True)
class Source:
    """Where a record was read: topic, partition, offset."""

    topic: str
    partition: int
    offset: int

    @property
    def tp(self) -> str:
        """``"topic:partition"``, the key of :attr:`SessionState.last_offsets`."""
        return f"{self.topic}:{self.partition}"

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset}


class Entry:
    """What the state table holds for one key: the session state and the verdicts of its last write.

    ``state.last_offsets[tp]`` is the offset of the last event applied from
    input partition ``tp``. ``verdicts[tp]`` is the list ``[[offset, verdict
    bytes], ...]`` of the events of ``tp`` handled in the batch that last
    applied an event of ``tp`` to this key (the worker writes an entry once
    per batch): every verdict whose publication the write does not yet
    guarantee, so that a re-delivered copy of any of them can be answered
    byte-identically. Serialised as msgpack ``[2, state.to_bytes(), verdicts]``
    (format 1, ``{tp: last verdict bytes}``, is still read).

    Batches: :meth:`Processor.apply` adds to the current batch; :meth:`seal`
    ends it (the worker calls it once the entry is written). The first event
    of ``tp`` applied in a batch replaces ``verdicts[tp]`` by the batch's list
    (which also holds the stored verdicts replayed earlier in the batch): the
    verdicts it drops were published before this write (module
    :mod:`streams.app`, step 3).
    """

    __slots__ = ("state", "verdicts", "batch", "batch_bytes")

    def __init__(self, state: SessionState | None = None,
                 verdicts: dict[str, list[list[Any]]] | None = None) -> None:
        self.state = state if state is not None else SessionState()
        self.verdicts = verdicts if verdicts is not None else {}
        self.batch: dict[str, list[list[Any]]] | None = None  # tp -> [[offset, verdict], ...] of this batch
        self.batch_bytes = 0  # verdict bytes applied in this batch (bounds the changelog record)

    def to_bytes(self) -> bytes:
        return _pack([_ENTRY_VERSION, self.state.to_bytes(), self.verdicts])

    @classmethod
    def from_bytes(cls, data: bytes) -> "Entry":
        """Inverse of :meth:`to_bytes`. Raises ``ValueError`` for anything else."""
        doc = msgpack.unpackb(data, raw=False)
        if not isinstance(doc, list) or len(doc) != 3 or doc[0] not in (1, _ENTRY_VERSION):
            raise ValueError("not a loopwatch state table entry (unknown format version)")
        state = SessionState.from_bytes(doc[1])
        if doc[0] == 1:  # {tp: verdict of the last offset}
            last = state.last_offsets
            return cls(state, {tp: [[last[tp], v]] for tp, v in doc[2].items() if tp in last})
        return cls(state, dict(doc[2]))

    def stored_verdict(self, tp: str, offset: int) -> bytes | None:
        """The stored verdict of the event at ``offset`` of ``tp``, if this entry keeps it."""
        for item in reversed(self.verdicts.get(tp, ())):
            if item[0] == offset:
                return item[1]
        return None

    def _batch_list(self, tp: str) -> list[list[Any]]:
        batch = self.batch
        if batch is None:
            batch = self.batch = {}
        items = batch.get(tp)
        if items is None:
            items = batch[tp] = []
        return items

    def seal(self) -> None:
        """End the current batch: the entry as it is now has been written."""
        self.batch = None
        self.batch_bytes = 0


@dataclass(slots=True)
class Outcome:
    """What to publish for one record, and whether the entry changed.

    ``verdict``/``loop_events``/``dead_letter`` are encoded record values;
    ``record`` the verdict as a dict (None when not applied now).
    """

    kind: str
    key: bytes | None
    verdict: bytes | None = None
    loop_events: list[bytes] = field(default_factory=list)
    dead_letter: bytes | None = None
    record: dict[str, Any] | None = None


def encode_dead_letter(raw: bytes | None, key: bytes | None, source: Source, reason_class: str,
                       reason: str) -> bytes:
    """The dead-letter record value (always msgpack: ``key`` and ``value`` are raw bytes)."""
    return msgpack.packb({
        "reason_class": reason_class, "reason": reason, "source": source.as_dict(),
        "key": key, "value": raw if raw is not None else b"",
    }, use_bin_type=True)


def loop_events(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The loop events of a verdict record: its detection (warn/suppressed/block) and its abort."""
    out: list[dict[str, Any]] = []
    base = {
        "run_id": record.get("run_id"), "session_id": record.get("session_id"), "key": record.get("key"),
        "event_id": record.get("event_id"), "evidence": record.get("evidence", []),
        "source": record.get("source"), "event_ts": record.get("event_ts"), "verdict_ts": record.get("verdict_ts"),
    }
    detection = record.get("detection")
    if detection and detection.get("stuck"):
        action = detection_action({**record, "verdict": None})
        out.append({
            "detector": detection["detector"], "level": detection["level"], "action": action,
            "count": detection["count"], "message": detection["message"],
            "warning_key": detection.get("warning_key"), "tool_name": record.get("tool_name"), **base,
        })
    guard = record.get("guard")
    if guard and guard.get("abort"):
        out.append({
            "detector": guard.get("detector"), "level": "critical", "action": "abort",
            "count": guard.get("count"), "message": guard.get("message"), "warning_key": None,
            "tool_name": guard.get("tool_name"), **base,
        })
    return out


class Processor:
    """Applies events to entries and builds the records to publish.

    Arguments:
        engine: the detection engine (with the loop-detection config).
        key_by: how to derive the state key of a record without a Kafka key
            (``run`` or ``session``, see :mod:`streams.keys`).
        codec: ``msgpack`` or ``json``, the encoding of verdicts and loop events.
        clock: epoch seconds, for ``verdict_ts``.
    """

    __slots__ = ("engine", "key_by", "codec", "clock", "_encode", "_decode", "_events", "_verdicts",
                 "_engine_seconds", "_redelivered")

    def __init__(self, engine: Engine, key_by: str = "run", codec: str = "msgpack",
                 clock: Callable[[], float] = time.time) -> None:
        if codec not in ("msgpack", "json"):
            raise ValueError(f"codec must be msgpack or json, got {codec!r}")
        self.engine = engine
        self.key_by = key_by
        self.codec = codec
        self.clock = clock
        self._encode = _pack if codec == "msgpack" else encode_json
        self._decode = decode_event
        # metric children bound once (a labels() lookup per event costs more than the increment)
        self._events: dict[Any, Any] = {}
        self._verdicts: dict[Any, Any] = {}
        self._engine_seconds = metrics.ENGINE_SECONDS.observe
        self._redelivered = metrics.REDELIVERED

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
        """The record key when there is one, else the key derived from the event (UTF-8)."""
        if record_key:
            return record_key
        return partition_key(event, self.key_by).encode("utf-8")

    # ---------------------------------------------------------------- applying

    def apply(self, key: bytes, event: Mapping[str, Any], source: Source, entry: Entry,
              raw: bytes | None = None) -> Outcome:
        """Apply one event to ``entry`` (changed in place when the outcome is APPLIED).

        An event whose offset is not above ``entry.state.last_offsets[source.tp]``
        is already in the state (re-delivered after a crash or rebalance): it is
        not applied again; if the entry keeps its verdict (it was handled in the
        entry's last written batch) that verdict is returned again (REPLAYED),
        else nothing (SKIPPED: its verdict was published before this entry was
        written, see :mod:`streams.app`). Both count as handled in the current
        batch of ``entry`` (see :class:`Entry`).
        An event the engine rejects is dead-lettered with reason class ``schema``
        (an unexpected engine failure with ``error``); ``entry`` is then unchanged.
        """
        state = entry.state
        tp = source.tp
        offset = source.offset
        last = state.last_offsets.get(tp)
        if last is not None and offset <= last:
            self._redelivered.inc()
            stored = entry.stored_verdict(tp, offset)
            if stored is not None:
                items = entry._batch_list(tp)
                if items is not entry.verdicts.get(tp):  # else it is in there already
                    items.append([offset, stored])
                record = self._decode_record(stored)
                return Outcome(REPLAYED, key, verdict=stored,
                               loop_events=[self._encode(e) for e in loop_events(record)])
            return Outcome(SKIPPED, key)

        ref = [event.get("event_id"), source.partition, offset]
        started = _perf_counter()
        try:
            verdict = self.engine.process(event, state, ref)
        except EventError as exc:
            return self.dead_letter(raw, key, source, "schema", str(exc))
        except Exception as exc:  # a bug must not stop the fleet's worker; the record is kept
            return self.dead_letter(raw, key, source, "error", f"{type(exc).__name__}: {exc}")
        finally:
            self._engine_seconds(_perf_counter() - started)

        record = verdict_record(verdict, event, key.decode("utf-8", "replace"))
        if "source" in event:
            record["event_source"] = record["source"]
        record["source"] = {"topic": source.topic, "partition": source.partition, "offset": offset}
        record["verdict_ts"] = int(self.clock() * 1000)
        encoded = self._encode(record)
        state.last_offsets[tp] = offset
        items = entry._batch_list(tp)
        items.append([offset, encoded])
        entry.verdicts[tp] = items
        entry.batch_bytes += len(encoded)
        self._child(self._events, EVENTS_BY_TYPE, event.get("type")).inc()
        self._child(self._verdicts, VERDICTS_BY_NAME, record["verdict"]).inc()
        detection = record.get("detection")
        guard = record.get("guard")
        if (detection and detection.get("stuck")) or (guard and guard.get("abort")):
            events = loop_events(record)
            self._count_detections(events)
            return Outcome(APPLIED, key, verdict=encoded, loop_events=[self._encode(e) for e in events],
                           record=record)
        return Outcome(APPLIED, key, verdict=encoded, record=record)

    @staticmethod
    def _child(cache: dict[Any, Any], metric: Any, label: Any) -> Any:
        child = cache.get(label)
        if child is None:
            child = cache[label] = metric.labels(str(label))
        return child

    def _decode_record(self, data: bytes) -> dict[str, Any]:
        return decode_event(data)

    @staticmethod
    def _count_detections(events: list[dict[str, Any]]) -> None:
        for loop_event in events:
            metrics.DETECTIONS.labels(loop_event["detector"], loop_event["level"], loop_event["action"]).inc()
            if loop_event["action"] == "abort":
                metrics.POST_COMPACTION_ABORTS.inc()
