"""The fleet view in the worker: a Faust windowed table of failing-call signatures, and the fleet breaker.

Three parts, hooked into :class:`streams.worker.app.Loopwatch` (the rules are
in :mod:`streams.detection.fleet` and :mod:`streams.detection.fleet_breaker`):

1. Observations out (:meth:`FleetView.after_apply`, on the verdict path): each
   verdict that is an observation (:func:`~streams.detection.fleet.observation`)
   goes, msgpack, to the internal topic ``<app_id>-fleet-signals``, keyed by its
   signature, so that every observation of a signature reaches the partition that
   owns it, whichever run, agent or session it came from. Nothing is awaited.
2. The windows (a second Faust agent of the same app, :meth:`FleetView._count`):
   reads the signals topic and runs :class:`~streams.detection.fleet.FleetCorrelator`
   with, as its store, the Faust table ``fleet-windows`` made hopping with
   ``options.fleet.windowSeconds`` / ``stepSeconds`` (Faust's ``HoppingWindow``,
   whose ranges the correlator uses) and ``expiresSeconds``: key
   ``(signature, (start, end))``, value the window's aggregate (JSON), changelog
   ``<app_id>-fleet-windows-changelog``. The event time is the observation's
   ``ts``, not the record's. Each ``fleet_loop`` record the correlator returns is
   published to ``loopwatch.fleet-events`` (key = signature) and counted in
   ``loopwatch_fleet_loops_total``.
3. The breaker (only with ``options.fleet.breaker`` shadow or block): every
   worker reads all partitions of ``loopwatch.fleet-events`` (no group; at start
   from ``holdSeconds`` ago) into a :class:`~streams.detection.fleet_breaker.FleetBreaker`
   that the processor consults for each call. A fleet-blocked or shadow-flagged
   call also gives a ``fleet_block`` record on ``loopwatch.fleet-events``::

       {type: fleet_block, shadow, signature, window, runs, reason, event_id, run_id,
        session_id, tool_name, source, event_ts}

Guarantees and limits: Faust's agent is at-least-once, so after a crash a
signal may be counted twice (a window's ``events`` count, never its distinct
runs) and a ``fleet_loop`` record published again. The breaker learns of a loop
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

from streams.detection.fleet import FleetCorrelator, FleetSettings, observation
from streams.detection.decision import findings
from streams.detection.fleet_breaker import FleetBreaker
from streams.wire.codecs import DecodeError, decode_event, record_encoder

from . import metrics
from .table import MemoryStoreTable, windowed_changelog_config

__all__ = ["FleetView"]

log = logging.getLogger(__name__)

_RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
_FEED_RETRY_S = 1.0


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
        table: the underlying Faust windowed table.
    """

    def __init__(self, app: Any, fleet: FleetSettings, app_id: str, partitions: int, replicas: int,
                 fleet_events_topic: str, bootstrap: str, codec: str = "msgpack") -> None:
        self.settings = fleet
        self._encode = record_encoder(codec)
        topic = {**_RAW, "partitions": partitions, "replicas": replicas}
        self.signals = app.topic(f"{app_id}-fleet-signals", internal=True, **topic)
        self.fleet_events = app.topic(fleet_events_topic, **topic)
        self.signals_topic = self.signals.get_topic_name()
        self.fleet_events_topic = fleet_events_topic
        # the state table's memory store: persisted offsets and standby copies, so that a partition kept
        # or taken over is read from where its copy ends, not from the changelog's start
        self.table = app.tables.add(MemoryStoreTable(
            app, name="fleet-windows", default=None, partitions=partitions, beacon=app.tables.beacon,
            help="fleet loops: failing-call signatures per hopping window",
            extra_topic_configs=windowed_changelog_config(fleet.step_s)))
        windows = self.table.hopping(fleet.window_s, fleet.step_s, expires=fleet.expires)
        self.correlator = FleetCorrelator(fleet, store=self.table, ranges=windows.table.window.ranges)
        app.agent(self.signals, name=f"{app_id}.fleet-windows")(self._count)
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
                    add: Callable[[str, bytes | None, bytes], None]) -> None:
        """Queue the observation of a verdict ``record`` (and its fleet_block record, if the breaker matched)."""
        obs = observation(record, self.settings, event.get("agent_id"))
        if obs is not None:
            add(self.signals_topic, obs["sig"].encode("utf-8"), msgpack.packb(obs, use_bin_type=True))
        for finding in findings(record):
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
        async for value in stream:
            try:
                obs = msgpack.unpackb(value, raw=False)
                loops = self.correlator.observe(obs)
            except Exception as exc:  # not written by us: skip it, keep counting
                log.warning("loopwatch: skipped a fleet signal that is not one: %r", exc)
                continue
            for loop in loops:
                metrics.FLEET_LOOPS.labels(loop["kind"]).inc()
                await self.fleet_events.send(key=loop["signature"].encode("utf-8"), value=self._encode(loop))
            metrics.FLEET_WINDOWS.set(len(self.table.data))

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
