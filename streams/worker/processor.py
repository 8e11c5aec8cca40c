"""One record's way through the worker, with no Kafka and no Faust: testable offline.

The app (:mod:`streams.worker.app`) hands each fetched batch to
:meth:`Processor.handle`, which takes every record to its end and returns a
:class:`Handled`: the records to publish (verdicts, loop events, dead letters,
rekey forwards, fleet observations) and the keys whose state changed, for the
next checkpoint. Per record, in this order:

1. a rekey record (the ``<app_id>-rekey`` topic) is unwrapped to its origin
   (:mod:`streams.worker.rekey`); then the value is decoded
   (:func:`streams.wire.codecs.decode_event`): what is not an event is a dead
   letter (``decode``);
2. a record without a key is forwarded to the rekey topic under the key
   derived from its event (:func:`streams.wire.keys.record_key`);
3. otherwise the event is applied to its key's state (:meth:`Processor.apply`,
   the state from :class:`streams.worker.states.States`): a verdict and its loop
   events (and, with the fleet view, its observation), or a dead letter
   (``schema``, ``error``), or nothing for an event the state already holds.

The record shapes are in :mod:`streams.worker.records`.

Determinism: a verdict record and its loop events are a function of (state,
event, key, source) only -- no clock, no counter -- so applying the same event
to the same state yields byte-identical records. The worker's crash recovery
relies on it (:mod:`streams.worker.checkpoint`): events after the last checkpoint are
re-applied to the checkpointed state and their verdicts, if they had been
published before the crash, are published again identically. The exception is
the opt-in fleet breaker (``options.fleet.breaker`` shadow or block): its part of
a verdict also depends on the fleet loops active at that moment.
"""

from __future__ import annotations

import logging
import reprlib
from time import perf_counter as _perf_counter, time as _wall_clock
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from streams.wire import keys
from . import metrics
from .records import Source, encode_capped, encode_dead_letter, loop_events
from .rekey import decode_envelope, encode_envelope
from .states import States, UnreadableState
from streams.wire.codecs import MAX_CARRIED_BYTES, DecodeError, decode_event, fits, record_encoder
from streams.detection import Engine, EventError, SessionState
from streams.detection.decision import findings
from streams.detection.fleet_breaker import FleetBreaker, decide
from streams.wire.verdicts import verdict_record

__all__ = ["APPLIED", "DEAD_LETTER", "SKIPPED", "Handled", "Outcome", "Processor", "Topics"]

log = logging.getLogger(__name__)

_new_tuple = tuple.__new__  # a named tuple from its fields without its generated __new__ (namedtuple's _make does so)

# What apply() did with an event.
APPLIED = "applied"          # applied to the state; new verdict
SKIPPED = "skipped"          # already in the state (its verdict was published before the checkpoint): nothing to send
DEAD_LETTER = "dead_letter"  # not an event (decode) or not a valid one (schema)


@dataclass(slots=True)
class Outcome:
    """What :meth:`Processor.apply` did with one event, and what it gives to publish.

    ``verdict``/``loop_events``/``dead_letter`` are encoded record values;
    ``record`` the verdict as a dict (None when not applied now); ``findings`` the verdict's
    (:func:`streams.detection.decision.findings`, computed once: the loop events and the fleet view read them).
    """

    kind: str
    key: bytes | None
    verdict: bytes | None = None
    loop_events: list[bytes] = field(default_factory=list)
    dead_letter: bytes | None = None
    record: dict[str, Any] | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)


class Topics(NamedTuple):
    """The topics a record's outcome goes to (names), and the state changelog's (the source of a ``state``
    dead letter)."""

    verdicts: str = "loopwatch.verdicts"
    loop_events: str = "loopwatch.loop-events"
    dead_letters: str = "loopwatch.dead-letters"
    rekey: str = "loopwatch-rekey"
    changelog: str = "loopwatch-states-changelog"


class Handled:
    """What a batch of records asks of the worker.

    Attributes:
        publish: ``(topic, key, value, fallback partition)`` per record to publish, in order (the fallback
            partition is for a record without a key: a dead letter of a keyless record goes to the partition
            of its source record).
        changed: state key -> changelog partition, for every key whose state an event changed.
        sent_ms: per verdict, when its event was sent (its ``ts``, else the record's timestamp), epoch ms.
    """

    __slots__ = ("publish", "changed", "sent_ms")

    def __init__(self) -> None:
        self.publish: list[tuple[str, bytes | None, bytes, int]] = []
        self.changed: dict[bytes, int] = {}
        self.sent_ms: list[float] = []

    def add(self, topic: str, key: bytes | None, value: bytes, fallback: int = 0) -> None:
        self.publish.append((topic, key, value, fallback))


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
        states: where :meth:`handle` finds the state of a key (default: states of an empty table).
        topics: where :meth:`handle` sends what it publishes.
        observe: ``observe(record, event, key, findings, add)``, called for each verdict applied (``findings``:
            the verdict's, :attr:`Outcome.findings`), may ``add(topic, key, value)`` records to publish (the fleet
            view's observations, :mod:`streams.worker.fleet`).
    """

    __slots__ = ("_engine", "_warning_floor", "key_by", "codec", "fleet", "states", "topics", "observe", "_encode",
                 "counts")

    def __init__(self, engine: Engine, key_by: str = "run", codec: str = "msgpack",
                 fleet: FleetBreaker | None = None, clock: Callable[[], float] = _wall_clock,
                 states: States | None = None, topics: Topics = Topics(),
                 observe: Callable[..., None] | None = None) -> None:
        if codec not in ("msgpack", "json"):
            raise ValueError(f"codec must be msgpack or json, got {codec!r}")
        self.engine = engine
        self.key_by = key_by
        self.codec = codec
        self.fleet = fleet
        self._encode = record_encoder(codec)
        self.counts = metrics.BatchCounts(clock)  # gathered per event, published by flush_metrics()
        self.states = states if states is not None else States({}, self.encode_state)
        self.topics = topics
        self.observe = observe

    @property
    def engine(self) -> Engine:
        """The detection engine (may be replaced while no batch is handled)."""
        return self._engine

    @engine.setter
    def engine(self, engine: Engine) -> None:
        self._engine = engine
        # read once, not per state encoded: a property over every agent and profile of the config
        self._warning_floor = engine.config.smallest_warning_threshold

    def encode_state(self, state: SessionState) -> bytes:
        """The state table value of ``state`` (:func:`streams.worker.states.encode_state`)."""
        return state.to_bytes(self._warning_floor)

    # ---------------------------------------------------------------- records

    def handle(self, batch: Sequence[tuple[Any, Sequence[Any]]], now: float) -> Handled:
        """Take every record of ``batch`` to its end (see the module docstring); what to publish and store.

        Arguments:
            batch: ``(partition, records)`` pairs, a partition with ``topic`` and ``partition``, each
                record with ``key``, ``value``, ``offset`` and ``timestamp`` (epoch ms) (aiokafka's
                ``TopicPartition`` and ``ConsumerRecord``), records in offset order.
            now: ``time.monotonic()``, when the keys were last seen (idle expiry).
        Raises what the output codec raises for a record neither codec carries (a bug): the states may then
        hold events whose verdicts are not in the returned records.
        """
        done = Handled()
        rekey = self.topics.rekey
        for tp, records in batch:
            topic, partition = tp.topic, tp.partition
            if topic == rekey:
                for record in records:
                    self._rekeyed(done, topic, partition, record, now)
                continue
            last_offsets_key = Source(topic, partition, 0).tp  # the same for every record of the partition
            for record in records:
                key, raw = record.key, record.value
                source = _new_tuple(Source, (topic, partition, record.offset, False))  # Source(...) at half the cost
                try:
                    event = decode_event(raw or b"")
                except DecodeError as exc:
                    self._dead(done, raw, key, source, "decode", str(exc), partition)
                    continue
                if key:
                    self._apply_record(done, key, event, source, raw, partition, record.timestamp, now,
                                       last_offsets_key)
                else:
                    self._forward(done, self.state_key(None, event), source, raw, record.timestamp)
        return done

    def _rekeyed(self, done: Handled, topic: str, partition: int, record: Any, now: float) -> None:
        """A record of the rekey topic: its origin's event applied under the record's key."""
        try:
            origin_topic, origin_partition, offset, raw, timestamp_ms = decode_envelope(record.value)
            if not record.key:
                raise ValueError("not a loopwatch rekey record: no key")
        except ValueError as exc:  # not written by a worker: keep it, keep going
            here = Source(topic, partition, record.offset)
            self._dead(done, record.value, record.key, here, "decode", str(exc), partition)
            return
        source = Source(origin_topic, origin_partition, offset, rekeyed=True)
        try:
            event = decode_event(raw or b"")
        except DecodeError as exc:
            self._dead(done, raw, None, source, "decode", str(exc), partition)
            return
        self._apply_record(done, record.key, event, source, raw, partition, timestamp_ms, now, source.tp)

    def _apply_record(self, done: Handled, key: bytes, event: dict[str, Any], source: Source, raw: bytes | None,
                      partition: int, timestamp_ms: int | None, now: float, tp: str) -> None:
        """Apply one event to its key's state; queue its verdict, loop events and observation (``tp``:
        ``source.tp``, computed once per partition of a batch)."""
        states = self.states
        states.last_seen[key] = now
        state = states.get(key)
        if state is None:
            try:
                state = states.load(key)
            except UnreadableState as exc:  # a crash here would repeat at every restart: the key starts afresh
                log.error("loopwatch: the stored state of key %r is unreadable (%s): dead-lettered, the key starts "
                          "afresh", key[:100], exc)
                where = Source(self.topics.changelog, partition, -1)
                self._dead(done, exc.stored, key, where, "state", str(exc), partition)
                state = states.fresh(key)
        outcome = self._apply(key, event, source, state, raw, tp)
        kind = outcome.kind
        if kind == APPLIED:
            done.changed[key] = partition
            topics, publish = self.topics, done.publish
            publish.append((topics.verdicts, key, outcome.verdict, 0))  # type: ignore[arg-type]
            for value in outcome.loop_events:
                publish.append((topics.loop_events, key, value, 0))
            record: dict[str, Any] = outcome.record  # type: ignore[assignment]
            if self.observe is not None:
                self.observe(record, event, key, outcome.findings, done.add)
            event_ts = record.get("event_ts")
            # a plausible epoch-ms ts only: NaN, infinities or a JSON integer of 400 digits would
            # spoil the histogram or overflow the float arithmetic (and stop the worker)
            sent_ms = event_ts if isinstance(event_ts, (int, float)) and 0 < event_ts < 1e15 else timestamp_ms
            if sent_ms:
                done.sent_ms.append(sent_ms)
        elif kind == DEAD_LETTER:
            done.publish.append((self.topics.dead_letters, key, outcome.dead_letter, partition))  # type: ignore[arg-type]
            if not state.last_offsets:  # nothing of this key was ever applied: keep no empty state for it
                states.discard(key)

    def _forward(self, done: Handled, state_key: bytes, source: Source, raw: bytes | None,
                 timestamp_ms: int | None) -> None:
        """A keyless record to the rekey topic, keyed by its state key, with its origin.

        The rekey record must keep its key (it is the state key): one that would not :func:`fit <fits>`
        with it is dead-lettered instead.
        """
        envelope = encode_envelope(source.topic, source.partition, source.offset, raw, timestamp_ms)
        if fits(state_key, envelope):
            done.publish.append((self.topics.rekey, state_key, envelope, 0))
            return
        size = len(envelope) + len(state_key)
        self._dead(done, raw, None, source, "size", f"a keyless record of {size:,} bytes with its derived key and "
                   f"origin is too large to forward through the rekey topic (at most {MAX_CARRIED_BYTES:,}): key "
                   "your records", source.partition)

    def _dead(self, done: Handled, raw: bytes | None, key: bytes | None, source: Source, reason_class: str,
              reason: str, partition: int) -> None:
        done.publish.append((self.topics.dead_letters, key,
                             self.dead_letter(raw, key, source, reason_class, reason).dead_letter,  # type: ignore[arg-type]
                             partition))

    # ---------------------------------------------------------------- dead letters and keys

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
        return self._apply(key, event, source, state, raw, source.tp)

    def _apply(self, key: bytes, event: Mapping[str, Any], source: Source, state: SessionState, raw: bytes | None,
               tp: str) -> Outcome:
        """:meth:`apply`, with ``tp`` = ``source.tp`` given (the batch's path computes it once per partition)."""
        offset = source.offset
        last = state.last_offsets.get(tp)
        if last is not None and offset <= last:
            self.counts.redelivered += 1
            return Outcome(SKIPPED, key)

        ref = [event.get("event_id"), source.partition, offset]
        started = _perf_counter()
        try:
            if self.fleet is None:
                verdict = self._engine.process(event, state, ref)
            else:
                verdict = decide(self.fleet, event, lambda: self._engine.process(event, state, ref),
                                 lambda: state.history, lambda: self._engine.run_end(event, state))
        except EventError as exc:
            return self.dead_letter(raw, key, source, "schema", str(exc))
        except Exception as exc:  # a bug must not stop the fleet's worker; the record is kept
            return self.dead_letter(raw, key, source, "error", f"{type(exc).__name__}: {exc}")
        finally:
            self.counts.engine_times.append(_perf_counter() - started)

        record = verdict_record(verdict, event, key.decode("utf-8", "replace"))
        if "source" in event:
            record["event_source"] = record["source"]
        record["source"] = {"topic": source.topic, "partition": source.partition, "offset": offset}  # as_dict()
        encode = self._encode
        try:
            encoded = encode(record)
            if len(encoded) + len(key) > MAX_CARRIED_BYTES:  # rare: cut down (encode_capped), as fits() says
                encoded = encode_capped(encode, key, record)
        except ValueError:
            if "event_source" not in record:
                raise
            # the one field a verdict copies from the event unchecked: one neither codec can carry (nested
            # past msgpack's 511 levels and Python's ~1,000) goes as its shortened repr text
            record["event_source"] = reprlib.repr(record["event_source"])
            encoded = encode_capped(encode, key, record)
        state.last_offsets[tp] = offset
        self.counts.verdict(event.get("type"), record)
        if record.get("decided_by", record) is None and "corrects" not in record:
            return Outcome(APPLIED, key, verdict=encoded, record=record)  # the usual verdict: nothing decided it
        found = findings(record)
        events = loop_events(record, found)
        self.counts.detections(events)
        return Outcome(APPLIED, key, verdict=encoded, loop_events=[encode_capped(encode, key, e) for e in events],
                       record=record, findings=found)

    def flush_metrics(self) -> None:
        """Publish the metric updates of the events applied since the last call (once per batch)."""
        self.counts.publish()
