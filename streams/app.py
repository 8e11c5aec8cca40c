"""The Faust app: events in, verdicts out, state in a changelog-backed table.

Run it with ``loopwatch worker`` (flags/env: :mod:`streams.settings`) or
``faust -A streams.app worker -l info`` (settings from ``LOOPWATCH_*`` env).
The per-event logic is in :mod:`streams.processor`; this module is the glue.

Topics and keys
---------------
* Input topics (raw bytes): one event per record (msgpack map or JSON
  object, :func:`streams.codecs.decode_event`), keyed by the runner. The
  record key IS the state key. Runners key by run id (default) or, for
  OpenClaw's exact session-level semantics, by session key (then session id):
  with ``--key-by session`` the history cap and the warning dedupe map are
  shared by a session's runs exactly as in OpenClaw (Spec §8.1/§8.2); with the
  run key each run has its own state, which bounds state per key and spreads
  a busy session's load over partitions (differs from OpenClaw only where runs
  of a session share the history cap or dedupe map).
* A record without a key gets the key derived from its event (``--key-by``,
  :func:`streams.keys.partition_key`) and is forwarded, with its origin
  (topic, partition, offset), to the internal topic ``<app_id>-rekey`` keyed
  by that key, so that its state lives on the partition that owns the key.
  The runner's order is kept only if its keyless records share one input
  partition; key your records.
* The state table ``states`` (changelog ``<app_id>-states-changelog``,
  compacted): key = state key, value = :class:`streams.processor.Entry`
  bytes = msgpack ``[1, SessionState.to_bytes(), {tp: last verdict bytes}]``.
  Decoded entries are cached in process; the cache is dropped on every
  rebalance. Keys idle for ``state_ttl_s`` are deleted (a tombstone in the
  changelog) by a timer.

No event applied twice, none skipped, no verdict lost (at-least-once + bookkeeping)
------------------------------------------------------------------------------------
Each entry carries, per input partition ``tp`` (``"topic:partition"``), the
offset of the last event applied to it (``SessionState.last_offsets``) and
that event's verdict record as published (``Entry.verdicts``); both are in
the same changelog record as the state, so they move together. Per event:

1. If the event's offset is ``<= last_offsets[tp]``, the state already has it
   (re-delivery after a crash or rebalance): it is not applied. If it is the
   last one, its stored verdict bytes are published again (byte-identical);
   an earlier one needs nothing (see 3).
2. Otherwise it is applied; the new entry is written to the table and the
   worker **waits for the broker to acknowledge the changelog record**; only
   then is the verdict (and its loop events) produced. So a verdict on the
   verdicts topic always has its state durable, and is never computed twice:
   a crash after the verdict re-delivers an event that step 1 answers from
   the stored bytes.
3. Before writing the next entry of the same key, the worker waits for the
   acknowledgement of that key's previous verdict and loop events. So when an
   entry is durable, every earlier event of that key has its verdict
   published; only the last one may lack it, and step 1 covers exactly that.
4. Offsets are committed by Faust only after it flushed the producer (all
   changelog writes and verdicts above acknowledged), so a committed offset
   never passes an event whose state or verdict is not durable.

Result across a crash (kill -9): every event gets a verdict, none is applied
twice or skipped, and duplicates on the verdicts topic are byte-identical.
Keyless records go through the rekey topic; a duplicate forward after a
crash carries the same origin offset and is skipped in step 1.

Cost: one changelog round trip (acks=all) per applied event before its
verdict, and events are processed one after another per worker; runners
wait for each verdict anyway, so the per-key wait of step 3 is normally
already over. Faust's ``exactly_once`` (transactions) would make verdicts
visible to read_committed consumers only at each transaction commit (commit
interval), i.e. add the commit interval to every verdict; it is selectable
(``processing_guarantee``) but not the default.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable

import faust
import msgpack
from aiokafka.partitioner import DefaultPartitioner

from . import metrics
from .detection import Engine, load_config
from .processor import APPLIED, DEAD_LETTER, Entry, Outcome, Processor, Source
from .settings import WorkerSettings

__all__ = ["Loopwatch", "StateTable", "create_app"]

log = logging.getLogger(__name__)

_RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
_GAUGE_INTERVAL_S = 1.0  # ACTIVE_KEYS and CONSUMER_LAG refresh


class StateTable(faust.Table):
    """A Faust table whose last changelog write can be awaited and whose keys' partitions are known."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last_write: faust.types.FutureMessage | None = None
        self.key_partitions: dict[bytes, int] = {}

    def on_key_set(self, key: Any, value: Any) -> None:
        fut = self.send_changelog(self.partition_for_key(key), key, value)
        self.last_write = fut
        self.key_partitions[key] = fut.message.partition
        self._sensor_on_set(self, key, value)

    def apply_changelog_batch(self, batch: Iterable[Any]) -> None:
        batch = list(batch)
        super().apply_changelog_batch(batch)
        for event in batch:
            if event.message.value is None:
                self.key_partitions.pop(event.message.key, None)
            else:
                self.key_partitions[event.message.key] = event.message.partition

    def expire(self, key: bytes, partition: int) -> None:
        """Delete ``key`` from the local store and write its tombstone to the changelog."""
        self.data.pop(key, None)
        self.key_partitions.pop(key, None)
        self.send_changelog(partition, key, None, value_serializer="raw")


class Loopwatch:
    """The worker: a Faust app with its topics, state table, agents and timers.

    Arguments:
        settings: the worker settings.
        engine: the detection engine; default: one built from ``settings.config``.
    Attributes:
        app: the :class:`faust.App` (start with ``await app.start()`` or a Faust worker).
        processor: the :class:`Processor` (its ``engine`` may be replaced while idle).
    """

    def __init__(self, settings: WorkerSettings, engine: Engine | None = None) -> None:
        self.settings = s = settings
        if engine is None:
            engine = Engine(load_config(s.config, strict=s.config_validate) if s.config else None)
        self.processor = Processor(engine, s.key_by, s.output_codec)
        self.app = app = faust.App(
            s.app_id,
            broker=s.broker,
            store=s.store,
            datadir=s.data_dir.replace("{app_id}", s.app_id),
            autodiscover=False,
            topic_partitions=s.partitions,
            topic_replication_factor=s.replication_factor,
            topic_disable_leader=True,
            table_standby_replicas=s.standby_replicas,
            processing_guarantee=s.processing_guarantee,
            producer_linger=s.producer_linger_ms / 1000.0,
            producer_acks=s.producer_acks,
            broker_commit_interval=s.commit_interval_s,
            stream_buffer_maxsize=s.stream_buffer_maxsize,
            stream_wait_empty=False,
            broker_session_timeout=s.session_timeout_s,
            broker_heartbeat_interval=s.heartbeat_interval_s,
            broker_rebalance_timeout=s.rebalance_timeout_s,
            consumer_auto_offset_reset="earliest",
            web_enabled=False,
            key_serializer="raw",
            value_serializer="raw",
        )
        topic = {**_RAW, "partitions": s.partitions, "replicas": s.replication_factor}
        # internal=True: Faust creates missing input topics with `partitions` before subscribing
        # (a broker auto-create would give num.partitions and break co-partitioning with the table).
        self.input = app.topic(*s.input_topics, internal=True, allow_empty=True, **topic)
        self.rekey = app.topic(f"{s.app_id}-rekey", internal=True, **topic)
        self.verdicts = app.topic(s.verdicts_topic, **topic)
        self.loop_events = app.topic(s.loop_events_topic, **topic)
        self.dead_letters = app.topic(s.dead_letters_topic, **topic)
        self.table: StateTable = app.tables.add(StateTable(
            app, name="states", default=None, key_type=bytes, value_type=bytes, partitions=s.partitions,
            beacon=app.tables.beacon, help="loopwatch state per key (processor.Entry bytes)",
        ))

        self._cache: dict[bytes, Entry] = {}
        self._inflight: dict[bytes, list[asyncio.Future]] = {}  # key -> its last verdict/loop-event sends
        self._last_seen: dict[bytes, float] = {}  # key -> time.monotonic() of its last event
        self._positions: dict[tuple[str, int], int] = {}  # input (topic, partition) -> last offset seen
        self._metrics_started = False
        self._partitioner = DefaultPartitioner()

        app.agent(self.input, name=f"{s.app_id}.process")(self._process_input)
        app.agent(self.rekey, name=f"{s.app_id}.process-rekeyed")(self._process_rekeyed)
        app.timer(_GAUGE_INTERVAL_S, name=f"{s.app_id}.gauges")(self._update_gauges)
        app.timer(s.expiry_interval_s, name=f"{s.app_id}.expire")(self._expire_idle)
        app.task(self._on_start)
        app.on_partitions_revoked.connect(self._on_rebalance)
        app.on_partitions_assigned.connect(self._on_rebalance)

    # ------------------------------------------------------------------ agents

    async def _process_input(self, stream: Any) -> None:
        async for event in stream.events():
            message = event.message
            source = Source(message.topic, message.partition, message.offset)
            self._positions[(message.topic, message.partition)] = message.offset
            await self.handle(message.key, message.value, source, message.timestamp)

    async def _process_rekeyed(self, stream: Any) -> None:
        async for event in stream.events():
            message = event.message
            try:
                topic, partition, offset, raw, timestamp = msgpack.unpackb(message.value, raw=False)
                source = Source(topic, partition, offset)
            except Exception as exc:  # not written by us: keep it, keep going
                here = Source(message.topic, message.partition, message.offset)
                await self._publish(self.processor.dead_letter(message.value, message.key, here, "decode",
                                                               f"not a loopwatch rekey record: {exc}"))
                continue
            event_, dead = self.processor.decode(raw, None, source)
            if dead is not None:
                await self._publish(dead)
                continue
            await self._apply(message.key, event_, source, raw, timestamp)

    async def handle(self, key: bytes | None, raw: bytes | None, source: Source, timestamp: float | None) -> None:
        """One input record: dead-letter it, forward it to the rekey topic, or apply it."""
        event, dead = self.processor.decode(raw, key, source)
        if dead is not None:
            await self._publish(dead)
            return
        if not key:
            state_key = self.processor.state_key(None, event)
            envelope = msgpack.packb([source.topic, source.partition, source.offset, raw, timestamp],
                                     use_bin_type=True)
            await self.rekey.send(key=state_key, value=envelope)
            return
        await self._apply(key, event, source, raw, timestamp)

    async def _apply(self, key: bytes, event: dict[str, Any], source: Source, raw: bytes | None,
                     timestamp: float | None) -> None:
        self._last_seen[key] = time.monotonic()
        previous = self._inflight.pop(key, None)
        if previous:
            # Step 3 of the module docstring: earlier verdicts of this key durable first.
            await asyncio.gather(*previous)
        entry = self._entry(key)
        outcome = self.processor.apply(key, event, source, entry, raw)
        if outcome.kind == APPLIED:
            try:
                self.table[key] = entry.to_bytes()
                write = self.table.last_write
                assert write is not None
                await write  # step 2: state durable before its verdict is visible
            except BaseException:
                self._cache.pop(key, None)  # the cached entry is ahead of the table
                raise
        await self._publish(outcome)
        if outcome.record is not None:
            event_ts = outcome.record.get("event_ts")
            sent_ms = event_ts if isinstance(event_ts, (int, float)) else (timestamp or 0) * 1000.0
            if sent_ms:
                metrics.VERDICT_LATENCY_SECONDS.observe(max(0.0, time.time() - sent_ms / 1000.0))

    async def _publish(self, outcome: Outcome) -> None:
        if outcome.kind == DEAD_LETTER:
            await self.dead_letters.send(key=outcome.key, value=outcome.dead_letter)
            return
        sends = []
        if outcome.verdict is not None:
            sends.append(await self.verdicts.send(key=outcome.key, value=outcome.verdict))
        for value in outcome.loop_events:
            sends.append(await self.loop_events.send(key=outcome.key, value=value))
        if sends and outcome.key is not None:
            self._inflight[outcome.key] = sends

    def _entry(self, key: bytes) -> Entry:
        entry = self._cache.get(key)
        if entry is None:
            stored = self.table.get(key)
            entry = Entry.from_bytes(stored) if stored else Entry()
            self._cache[key] = entry
        return entry

    # ------------------------------------------------------ timers and signals

    async def _on_start(self) -> None:
        for topic in (self.verdicts, self.loop_events, self.dead_letters):
            await topic.maybe_declare()
        if self.settings.metrics_port and not self._metrics_started:
            from prometheus_client import start_http_server

            try:
                start_http_server(self.settings.metrics_port, self.settings.metrics_addr, registry=metrics.REGISTRY)
                self._metrics_started = True
                log.info("loopwatch: metrics on http://%s:%d/metrics", self.settings.metrics_addr,
                         self.settings.metrics_port)
            except OSError as exc:
                log.error("loopwatch: cannot serve metrics on port %d: %s", self.settings.metrics_port, exc)

    async def _on_rebalance(self, *args: Any, **kwargs: Any) -> None:
        # Decoded entries may be stale once partitions move; the table is the truth.
        self._cache.clear()
        self._last_seen.clear()
        self._tune_fetcher()

    def _tune_fetcher(self) -> None:
        """Set aiokafka's prefetch backoff and fetch max wait (see ``WorkerSettings``); Faust has no knob for them."""
        consumer = getattr(getattr(self.app.consumer, "_thread", None), "_consumer", None)
        fetcher = getattr(consumer, "_fetcher", None)
        if fetcher is not None and hasattr(fetcher, "_prefetch_backoff"):
            fetcher._prefetch_backoff = self.settings.fetch_backoff_ms / 1000.0
            fetcher._fetch_max_wait_ms = int(self.settings.fetch_max_wait_ms)

    def _active_partitions(self) -> set[int]:
        inputs = set(self.settings.input_topics)
        return {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic in inputs}

    async def _update_gauges(self) -> None:
        self._tune_fetcher()  # the consumer may have been re-created
        metrics.ACTIVE_KEYS.set(len(self.table.data))
        for key in [k for k, sends in self._inflight.items() if all(f.done() for f in sends)]:
            self._inflight.pop(key, None)
        consumer = self.app.consumer
        for (topic, partition), offset in list(self._positions.items()):
            try:
                highwater = consumer.highwater(faust.types.TP(topic, partition))
            except Exception:  # partition no longer assigned
                continue
            if highwater is not None:
                metrics.CONSUMER_LAG.labels(topic, str(partition)).set(max(0, highwater - offset - 1))

    async def _expire_idle(self) -> None:
        """Delete keys idle for ``state_ttl_s`` (OpenClaw's idle prune), with changelog tombstones."""
        now = time.monotonic()
        active = self._active_partitions()
        ttl = self.settings.state_ttl_s
        for key in list(self.table.data.keys()):
            seen = self._last_seen.setdefault(key, now)  # recovered keys: idle since now
            if now - seen < ttl:
                continue
            partition = self.table.key_partitions.get(key)
            if partition is None:
                partition = self._partitioner(key, list(range(self.settings.partitions)), [])
            if partition not in active:
                continue
            self.table.expire(key, partition)
            self._cache.pop(key, None)
            self._last_seen.pop(key, None)
            self._inflight.pop(key, None)


def create_app(settings: WorkerSettings | None = None, engine: Engine | None = None) -> Loopwatch:
    """Build the worker from ``settings`` (default: ``LOOPWATCH_*`` environment)."""
    return Loopwatch(settings or WorkerSettings(), engine)


_DEFAULT: Loopwatch | None = None


def __getattr__(name: str) -> Any:
    # `faust -A streams.app worker` looks up `app`; built on first use from the environment.
    global _DEFAULT
    if name == "app":
        if _DEFAULT is None:
            _DEFAULT = create_app()
        return _DEFAULT.app
    raise AttributeError(name)
