"""The fleet view in the worker: a table of failing-call signatures and their windows, and the fleet breaker.

Three parts, hooked into :class:`streams.worker.app.Loopwatch` (the rules are
in :mod:`streams.detection.fleet` and :mod:`streams.detection.fleet_breaker`):

1. Observations out (:meth:`FleetView.after_apply`, on the verdict path): each
   verdict that is an observation (:func:`~streams.detection.fleet.observation`)
   goes, msgpack, to the internal topic ``<app_id>-fleet-signals``, keyed by its
   signature, so that every observation of a signature reaches the partition that
   owns it, whichever run, agent or session it came from. Nothing is awaited.
2. The windows (a second Faust agent of the same app, :meth:`FleetView._count`):
   reads the signals topic and runs :class:`~streams.detection.fleet.FleetCorrelator`
   (hopping windows of ``options.fleet.windowSeconds`` / ``stepSeconds`` of the
   observation's ``ts``) with, as its store, :class:`FleetWindows`: per
   signature, its live windows and their aggregates, kept in memory and written
   to the table ``fleet-windows`` (a :class:`~streams.worker.table.StateTable`:
   key = signature, value = msgpack ``[[start, end, aggregate], ...]``, changelog
   ``<app_id>-fleet-windows-changelog``, compacted) at most once per signature
   per :data:`FLUSH_INTERVAL_S`, the signature's partition being its signal's.
   Windows that started ``expiresSeconds`` before the latest observation are
   dropped then, and a signature left without windows gets a tombstone, so the
   table, the changelog and a restore are proportional to the live windows.
   (A Faust windowed table wrote one changelog record per window, about ten,
   per observation, and kept them for ever.) Each ``fleet_loop`` record the
   correlator returns is published to ``loopwatch.fleet-events`` (key =
   signature) and counted in ``loopwatch_fleet_loops_total``.
3. The breaker (only with ``options.fleet.breaker`` shadow or block): every
   worker reads all partitions of ``loopwatch.fleet-events`` (no group; at start
   from ``holdSeconds`` ago) into a :class:`~streams.detection.fleet_breaker.FleetBreaker`
   that the processor consults for each call. A fleet-blocked or shadow-flagged
   call also gives a ``fleet_block`` record on ``loopwatch.fleet-events``::

       {type: fleet_block, shadow, signature, window, runs, reason, event_id, run_id,
        session_id, tool_name, source, event_ts}

Guarantees and limits: Faust's agent is at-least-once, so after a crash a
signal may be counted twice (a window's ``events`` count, never its distinct
runs) and a ``fleet_loop`` record published again; the window updates of the
last flush interval before a crash (not a rebalance: the windows are written
before partitions move) may be missing from the table, so a crash can also
undercount a window by that much. The breaker learns of a loop
a broker round trip after the observation that completed it, where
``loopwatch replay`` learns at once. Its decisions depend on when the worker
learned of a loop, so a verdict re-applied after a crash may differ in its
fleet part (the engine's part does not). Faust expires windows by wall clock
against their end time: with events whose ``ts`` is far in the past, windows
are dropped soon after they are written.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Mapping

import msgpack
from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.detection.fleet import FleetCorrelator, FleetSettings, observation, window_ranges
from streams.detection.fleet_breaker import FleetBreaker
from streams.wire.codecs import DecodeError, decode_event, record_encoder

from . import metrics
from .outputs import Outputs
from .table import CHANGELOG_TOPIC_CONFIG, StateTable

__all__ = ["FleetView"]

log = logging.getLogger(__name__)

_RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
_FEED_RETRY_S = 1.0
FLUSH_INTERVAL_S = 1.0  # the window updates of each signature are written to the table this often, at most
FLUSH_TIMEOUT_S = 5.0  # longest wait for one flush's records to be acknowledged (then: the next flush)
# Signatures packed between two returns to the event loop: each holds about ten windows of up to ten runs
# (~0.1 ms to pack on a quiet core); thousands changed in one second held the verdict path up for as long.
_PACK_BATCH = 100


class FleetWindows:
    """The correlator's store: ``(signature, (start, end))`` -> window aggregate, one table record per signature.

    Reads load a signature's windows from the table once (``get``); writes
    (``__setitem__``) change the copy in memory and mark the signature, with
    :attr:`partition` (the partition of the signal being counted), for the
    next :meth:`flush`.

    Arguments:
        table: the ``fleet-windows`` table (key: signature bytes, value:
            msgpack ``[[start, end, aggregate], ...]``).
        expires_s: a window is dropped once it started this long before the latest observation time.
    """

    def __init__(self, table: StateTable, expires_s: float) -> None:
        self._table = table
        self._expires_s = expires_s
        self._live: dict[str, dict[tuple[float, float], dict]] = {}  # signature -> window -> aggregate
        self._dirty: dict[str, int] = {}  # signature -> changelog partition
        self.partition = 0
        self.latest = 0.0  # the latest observation time, seconds (the correlator's)

    def get(self, key: tuple[str, tuple[float, float]], default: Any = None) -> Any:
        sig, window = key
        return self._windows(sig).get(window, default)

    def __setitem__(self, key: tuple[str, tuple[float, float]], aggregate: dict) -> None:
        sig, window = key
        self._windows(sig)[window] = aggregate
        self._dirty[sig] = self.partition

    def _windows(self, sig: str) -> dict[tuple[float, float], dict]:
        windows = self._live.get(sig)
        if windows is None:
            windows = self._live[sig] = _decode(self._table.get(sig.encode("utf-8")))
        return windows

    def items(self) -> list[tuple[tuple[str, tuple[float, float]], dict]]:
        """Every live window, from memory or the table (tests, the gauge)."""
        sigs = set(self._live) | {key.decode("utf-8") for key in self._table.key_partitions}
        return [((sig, window), aggregate) for sig in sorted(sigs) for window, aggregate in self._windows(sig).items()]

    def held(self) -> int:
        """Windows held in memory."""
        return sum(len(windows) for windows in self._live.values())

    def sweep(self, partitions: set[int]) -> None:
        """Mark for the next flush the signatures of ``partitions`` in the table that hold expired windows."""
        horizon = self.latest - self._expires_s
        for key, partition in list(self._table.key_partitions.items()):
            if partition in partitions:
                sig = key.decode("utf-8")
                if any(start <= horizon for start, _ in self._windows(sig)):
                    self._dirty[sig] = partition

    async def flush(self, producer: Any) -> int:
        """Write each signature changed since the last flush (expired windows dropped, a tombstone when none is
        left) to the table, with ``producer``; return the records written. Raises what a send raises."""
        if not self._dirty or producer is None:
            return 0
        horizon = self.latest - self._expires_s
        dirty, self._dirty = self._dirty, {}
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        written = 0
        try:
            for number, (sig, partition) in enumerate(dirty.items(), 1):
                windows = self._windows(sig)
                for window in [w for w in windows if w[0] <= horizon]:
                    del windows[window]
                value = msgpack.packb([[start, end, aggregate] for (start, end), aggregate in windows.items()],
                                      use_bin_type=True) if windows else None
                by_partition.setdefault(partition, []).append((sig.encode("utf-8"), value))
                if number % _PACK_BATCH == 0:
                    await asyncio.sleep(0)  # let the verdict path run between batches of signatures
            changelog = self._table.changelog_topic.get_topic_name()
            out = Outputs(producer, {changelog: self._table.partitions})
            for partition, records in by_partition.items():
                batches = await self._table.write(out, partition, records)
                await asyncio.gather(*(future for _, future in batches))
                self._table.store_committed(partition, batches)
                written += len(records)
                for key, value in records:
                    if value is None and not self._live.get(key.decode("utf-8")):
                        self._live.pop(key.decode("utf-8"), None)  # deleted: nothing of it is held any more
        except BaseException:
            for sig, partition in dirty.items():  # written again at the next flush, as they are then
                self._dirty.setdefault(sig, partition)
            raise
        return written

    def forget(self) -> None:
        """Drop the copies in memory (partitions move: the table is the truth again)."""
        self._live.clear()
        self._dirty.clear()


def _decode(value: bytes | None) -> dict[tuple[float, float], dict]:
    if not value:
        return {}
    try:
        return {(start, end): aggregate for start, end, aggregate in msgpack.unpackb(value, raw=False)}
    except Exception as exc:  # not written by us: the signature starts afresh
        log.warning("loopwatch: skipped a fleet-windows value that is not one: %r", exc)
        return {}


class FleetView:
    """The fleet part of one worker.

    Arguments:
        app: the worker's Faust app (the agent, table and topics are added to it).
        fleet: ``options.fleet`` of the config.
        app_id, partitions, replicas: the worker's (topics are created with them).
        fleet_events_topic: the topic of ``fleet_loop`` and ``fleet_block`` records.
        bootstrap: the brokers, for the breaker's reader.
        codec: the encoding of published records (``msgpack`` or ``json``), as for verdicts.
    Attributes:
        breaker: the :class:`FleetBreaker` to hand to the processor (None when the breaker is off).
        table: the ``fleet-windows`` table; windows: its :class:`FleetWindows`.
    """

    def __init__(self, app: Any, fleet: FleetSettings, app_id: str, partitions: int, replicas: int,
                 fleet_events_topic: str, bootstrap: str, codec: str = "msgpack") -> None:
        self.settings = fleet
        self._encode = record_encoder(codec)
        self._pack = msgpack.Packer(use_bin_type=True).pack  # observations: msgpack whatever the codec
        topic = {**_RAW, "partitions": partitions, "replicas": replicas}
        self.signals = app.topic(f"{app_id}-fleet-signals", internal=True, **topic)
        self.fleet_events = app.topic(fleet_events_topic, **topic)
        self.signals_topic = self.signals.get_topic_name()
        self.fleet_events_topic = fleet_events_topic
        # the state table's kind: persisted offsets and standby copies (a partition kept or taken over is
        # read from where its copy ends), written a batch at a time outside any stream
        self.table: StateTable = app.tables.add(StateTable(
            app, name="fleet-windows", default=None, key_type=bytes, value_type=bytes, partitions=partitions,
            beacon=app.tables.beacon, help="fleet loops: failing-call signatures and their live windows",
            extra_topic_configs=CHANGELOG_TOPIC_CONFIG))
        self.windows = FleetWindows(self.table, fleet.expires)
        self.correlator = FleetCorrelator(fleet, store=self.windows,
                                          ranges=lambda ts: window_ranges(ts, fleet.window_s, fleet.step_s))
        self.producer: Callable[[], Any] = lambda: None  # the worker's output producer, once it runs
        self._app = app
        self._flushing = asyncio.Lock()
        self._sweep_every = max(1, int(fleet.expires / 4 / FLUSH_INTERVAL_S))
        self._flushes = 0
        app.agent(self.signals, name=f"{app_id}.fleet-windows")(self._count)
        app.timer(FLUSH_INTERVAL_S, name=f"{app_id}.fleet-windows-flush")(self.flush)
        self.breaker = FleetBreaker(fleet) if fleet.breaker != "off" else None
        self._bootstrap = bootstrap
        self.feed_ready = asyncio.Event()  # set once the breaker's reader is positioned (tests wait on it)
        if self.breaker is not None:
            app.task(self._feed)

    @property
    def output_topics(self) -> list[str]:
        """Topics :meth:`after_apply` writes to (the worker's outputs need their partition counts)."""
        return [self.signals_topic, self.fleet_events_topic]

    def declare(self) -> list[Any]:
        """The topics to declare before the first write."""
        return [self.signals, self.fleet_events]

    # -------------------------------------------------------------- verdict path

    def after_apply(self, record: Mapping[str, Any], event: Mapping[str, Any], key: bytes,
                    found: list[dict[str, Any]], add: Callable[[str, bytes | None, bytes], None]) -> None:
        """Queue the observation of a verdict ``record`` (and its fleet_block record, if the breaker matched;
        ``found``: the record's findings, :func:`streams.detection.decision.findings`)."""
        obs = observation(record, self.settings, event.get("agent_id"))
        if obs is not None:
            add(self.signals_topic, obs["sig"].encode("utf-8"), self._pack(obs))
        for finding in found:
            if finding["kind"] != "fleet":
                continue
            shadow = not finding["enforced"]
            metrics.FLEET_BREAKER.labels("shadow" if shadow else "block").inc()
            fleet = record.get("fleet") or {}
            add(self.fleet_events_topic, key, self._encode({
                "type": "fleet_block", "shadow": shadow, "signature": finding["rule"],
                "window": fleet.get("window"), "runs": finding["count"], "reason": finding["message"],
                "event_id": record.get("event_id"), "run_id": record.get("run_id"),
                "session_id": record.get("session_id"), "tool_name": record.get("tool_name"),
                "source": record.get("source"), "event_ts": record.get("event_ts"),
            }))

    # ------------------------------------------------------------ the windows

    async def _count(self, stream: Any) -> None:
        """The Faust agent: observations in, ``fleet_loop`` records out."""
        async for event in stream.events():
            try:
                obs = msgpack.unpackb(event.value, raw=False)
                self.windows.partition = event.message.partition
                loops = self.correlator.observe(obs)
                self.windows.latest = self.correlator.latest
            except Exception as exc:  # not written by us: skip it, keep counting
                log.warning("loopwatch: skipped a fleet signal that is not one: %r", exc)
                continue
            for loop in loops:
                metrics.FLEET_LOOPS.labels(loop["kind"]).inc()
                await self.fleet_events.send(key=loop["signature"].encode("utf-8"), value=self._encode(loop))

    async def flush(self) -> None:
        """Write the signatures changed since the last flush (the timer; a rebalance, before partitions move).

        Every ``expiresSeconds / 4`` the signatures of the owned partitions
        that hold expired windows are written too (those restored from the
        changelog and not observed since). A failed write is logged and tried
        again at the next flush.
        """
        async with self._flushing:
            self._flushes += 1
            if self._flushes % self._sweep_every == 0 and not self._app.rebalancing:
                changelog = self.table.changelog_topic.get_topic_name()
                self.windows.sweep({tp.partition for tp in self._app.assignor.assigned_actives()
                                    if tp.topic == changelog})
            try:  # bounded: a broker that does not answer must not hold a rebalance back (_on_revoked)
                await asyncio.wait_for(self.windows.flush(self.producer()), FLUSH_TIMEOUT_S)
            except Exception as exc:
                log.warning("loopwatch: writing the fleet windows failed, retrying at the next flush: %r", exc)
            metrics.FLEET_WINDOWS.set(self.windows.held())

    # ------------------------------------------------------------ the breaker

    async def _feed(self) -> None:
        """Read every partition of the fleet-events topic into the breaker, from ``holdSeconds`` ago."""
        while True:
            consumer = AIOKafkaConsumer(bootstrap_servers=self._bootstrap, enable_auto_commit=False,
                                        auto_offset_reset="latest", client_id="loopwatch-fleet-breaker")
            try:
                await consumer.start()
                await self._position(consumer)
                self.feed_ready.set()
                while True:
                    batches = await consumer.getmany(timeout_ms=500)
                    for records in batches.values():
                        for record in records:
                            self._learn(record.value)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("loopwatch: fleet breaker reader failed, retrying: %r", exc)
                await asyncio.sleep(_FEED_RETRY_S)
            finally:
                await consumer.stop()

    async def _position(self, consumer: AIOKafkaConsumer) -> None:
        topic = self.fleet_events_topic
        for _ in range(100):
            partitions = consumer.partitions_for_topic(topic)
            if partitions:
                break
            await consumer._client.force_metadata_update()  # aiokafka has no public call for this
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"topic {topic} not found")
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        since = int((time.time() - self.settings.hold - self.settings.window_s) * 1000)
        found = await consumer.offsets_for_times({tp: since for tp in tps})
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            at = found.get(tp)
            consumer.seek(tp, at.offset if at is not None else ends[tp])

    def _learn(self, value: bytes | None) -> None:
        try:
            record = decode_event(value or b"")
        except DecodeError:
            return
        self.breaker.learn(record)  # type: ignore[union-attr]  # fleet_loop records and fleet_clear records
