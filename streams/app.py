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
  bytes = msgpack ``[2, SessionState.to_bytes(), {tp: [[offset, verdict bytes], ...]}]``.
  Decoded entries are cached in process (an entry is decoded from the table
  only on a cache miss); the cache is dropped on every rebalance. Keys idle
  for ``state_ttl_s`` are deleted (a tombstone in the changelog) by a timer.

Batches
-------
Each agent takes what its stream has buffered: it reads events until the
stream's queue is empty (or ``batch_max_events``) and handles them as one
batch, so at low load a batch is the single event that arrived (nothing waits
for a batch to fill) and under load it is everything that arrived while the
previous batch was being written. Per batch: every event is applied to its
key's decoded entry in memory; each touched key's entry is encoded and
written to the changelog ONCE; all those writes are awaited together; then
all verdicts and loop events are produced together (their acknowledgements
are awaited before the next batch's writes, while that batch is computed).
Events are acked to Faust (their offsets become committable) after their
batch. One batch at a time per worker (both agents and the expiry timer
share a lock).

No event applied twice, none skipped, no verdict lost (at-least-once + bookkeeping)
------------------------------------------------------------------------------------
Each entry carries, per input partition ``tp`` (``"topic:partition"``), the
offset of the last event applied to it (``SessionState.last_offsets``) and
the verdict records, as published, of that key's events of ``tp`` handled in
the batch that last applied one of them (``Entry.verdicts``); both are in the
same changelog record as the state, so they move together. Per batch:

1. An event whose offset is ``<= last_offsets[tp]`` is already in the state
   (re-delivery after a crash or rebalance): it is not applied. If the entry
   keeps its verdict, those bytes are published again (byte-identical);
   otherwise its verdict was published before the entry was written (see 3)
   and nothing is sent.
2. Otherwise it is applied in memory. Once the whole batch is applied, each
   touched entry is written (with the verdicts of all its events of this
   batch, replayed ones included) and the worker **waits for the broker to
   acknowledge every changelog record of the batch**; only then are the
   verdicts (and loop events) produced, in event order. So a verdict on the
   verdicts topic always has its state durable, and is never computed twice:
   a crash after the write re-delivers events that step 1 answers from the
   stored bytes.
3. Before the next batch writes any entry, the worker waits for the
   acknowledgement of all verdicts and loop events of the previous batch. So
   when an entry is durable, every event of that key from earlier batches has
   its verdict published; only this batch's may lack it, and the entry keeps
   exactly those (a key's verdict bytes per batch are bounded: a key reaching
   256 KB ends the batch early).
4. Offsets are committed by Faust only after it flushed the producer (all
   changelog writes and verdicts above acknowledged), and only for events
   acked after their batch, so a committed offset never passes an event whose
   state or verdict is not durable.

Result across a crash (kill -9): every event gets a verdict, none is applied
twice or skipped, and duplicates on the verdicts topic are byte-identical.
Keyless records go through the rekey topic; a duplicate forward after a
crash carries the same origin offset and is skipped in step 1.

Cost: per batch, one changelog round trip (acks=all) before its verdicts and
the previous batch's verdict round trip before its writes, however many
events it holds; per touched key one state encoding. Faust's
``exactly_once`` (transactions) would make verdicts visible to
read_committed consumers only at each transaction commit (commit interval),
i.e. add the commit interval to every verdict; it is selectable
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
_KEY_BATCH_BYTES = 256 * 1024  # verdict bytes of one key per batch (bounds its changelog record, < 1 MB)


class StateTable(faust.Table):
    """A Faust table written in batches, with explicit partitions, whose keys' partitions are known."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_partitions: dict[bytes, int] = {}

    async def put_many(self, items: Iterable[tuple[bytes, bytes, int]]) -> list[asyncio.Future]:
        """Set each ``(key, value, partition)`` and send its changelog record to ``partition``.

        Returns the sends' futures (resolved when the broker acknowledged them).
        Unlike ``table[key] = value``, which takes the partition of the stream's
        current event and goes through Faust's per-message send buffer, this
        writes the keys of a whole batch of events, straight to the producer.
        """
        producer = await self.app.maybe_start_producer()
        send = producer.send
        topic = self.changelog_topic.get_topic_name()
        data, partitions, persisted = self.data, self.key_partitions, self._persisted
        futures = []
        for key, value, partition in items:
            data[key] = value
            partitions[key] = partition
            future = await send(topic, key, value, partition, None, None)
            future.add_done_callback(persisted)
            futures.append(future)
        return futures

    def _persisted(self, future: asyncio.Future) -> None:
        # What Table._on_changelog_sent does for a FutureMessage: keep the changelog
        # offset of the stored data (RocksDB uses it to skip recovery at start-up).
        if future.cancelled() or future.exception() is not None:
            return
        meta = future.result()
        if self.app.in_transaction:
            self.app.tables.persist_offset_on_commit(self.data, meta.topic_partition, meta.offset)
        else:
            self.data.set_persisted_offset(meta.topic_partition, meta.offset)

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
        self._unacked: list[asyncio.Future] = []  # the last batch's verdict and loop-event sends
        self._lock = asyncio.Lock()  # one batch at a time (both agents, the expiry timer)
        self._verdicts_topic = s.verdicts_topic
        self._loop_events_topic = s.loop_events_topic
        self._dead_letters_topic = s.dead_letters_topic
        self._rekey_topic = f"{s.app_id}-rekey"
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
        await self._consume(stream, rekeyed=False)

    async def _process_rekeyed(self, stream: Any) -> None:
        await self._consume(stream, rekeyed=True)

    async def _consume(self, stream: Any, rekeyed: bool) -> None:
        """Natural batching: each batch is what the stream has buffered when the previous one is done.

        At low load a batch is the one event that arrived (no waiting for more);
        under load it is everything that arrived while the previous batch was
        being written and published (up to ``batch_max_events``). Events are
        acked (offsets committable) only after their batch is handled.
        """
        stream.enable_acks = False  # acked below, after the batch; as Stream.take() does
        queue = stream.channel.queue
        limit = self.settings.batch_max_events
        batch: list[Any] = []
        async for event in stream.events():
            batch.append(event)
            if len(batch) < limit and not queue.empty():
                continue
            # Not acked if the batch fails: their offsets are never committed, so they are
            # delivered again (to this worker after a restart, or to the next owner).
            await self.handle_batch(batch, rekeyed)
            for handled in batch:
                await stream.ack(handled)
            batch = []

    async def handle_batch(self, events: list[Any], rekeyed: bool = False) -> None:
        """Handle a batch of Faust events of one stream (see the module docstring)."""
        async with self._lock:
            start = 0
            while start < len(events):
                start = await self._run_batch(events, start, rekeyed)

    async def _run_batch(self, events: list[Any], start: int, rekeyed: bool) -> int:
        """Handle ``events[start:]`` (up to a key's byte budget) as one batch; return where it stopped."""
        processor = self.processor
        apply = processor.apply
        cache = self._cache
        producer = await self.app.maybe_start_producer()
        send = producer.send
        verdicts_topic = self._verdicts_topic
        loop_events_topic = self._loop_events_topic
        positions = self._positions
        last_seen = self._last_seen
        touched: dict[bytes, tuple[Entry, int]] = {}  # key -> (entry, changelog partition), written below
        handled: list[Entry] = []
        outputs: list[tuple[bytes | None, bytes, list[bytes]]] = []  # (key, verdict, loop events), in order
        latencies: list[float] = []
        now = time.monotonic()
        stop = len(events)
        index = start
        try:
            for index in range(start, stop):
                message = events[index].message
                if rekeyed:
                    item = await self._unwrap(message)
                    if item is None:
                        continue
                    key, event, source, raw, timestamp = item
                else:
                    key, raw, timestamp = message.key, message.value, message.timestamp
                    source = Source(message.topic, message.partition, message.offset)
                    positions[(message.topic, message.partition)] = message.offset
                    event, dead = processor.decode(raw, key, source)
                    if dead is not None:
                        await self._publish_dead(dead)
                        continue
                    if not key:
                        await self._forward(event, source, raw, timestamp)
                        continue
                last_seen[key] = now
                entry = cache.get(key)
                if entry is None:
                    entry = self._entry(key)
                elif entry.batch_bytes >= _KEY_BATCH_BYTES:
                    break  # this key's changelog record is big enough: write it, go on in a new batch
                outcome = apply(key, event, source, entry, raw)
                kind = outcome.kind
                if kind == APPLIED:
                    touched[key] = (entry, message.partition)
                    record = outcome.record
                    event_ts = record.get("event_ts")
                    latencies.append(event_ts if isinstance(event_ts, (int, float)) else (timestamp or 0) * 1000.0)
                elif kind == DEAD_LETTER:
                    await self._publish_dead(outcome)
                    continue
                if outcome.verdict is not None:
                    outputs.append((key, outcome.verdict, outcome.loop_events))
                if entry.batch is not None:
                    handled.append(entry)
            else:
                index = stop

            # Step 3: the previous batch's verdicts acknowledged before any new state write.
            previous, self._unacked = self._unacked, []
            if previous:
                await asyncio.gather(*previous)
            # Step 2: one changelog record per touched key, all acknowledged before any verdict.
            writes = await self.table.put_many(
                [(key, entry.to_bytes(), partition) for key, (entry, partition) in touched.items()])
            for entry in handled:
                entry.seal()
            if writes:
                await asyncio.gather(*writes)
        except BaseException:
            for key in touched:  # the cached entries are ahead of the table
                cache.pop(key, None)
            for entry in handled:
                entry.seal()
            raise
        unacked = self._unacked
        for key, verdict, loop_values in outputs:
            unacked.append(await send(verdicts_topic, key, verdict, None, None, None))
            for value in loop_values:
                unacked.append(await send(loop_events_topic, key, value, None, None, None))
        if latencies:
            observe = metrics.VERDICT_LATENCY_SECONDS.observe
            wall = time.time() * 1000.0
            for sent_ms in latencies:
                if sent_ms:
                    observe(max(0.0, (wall - sent_ms) / 1000.0))
        return index

    async def _unwrap(self, message: Any) -> tuple[bytes, dict[str, Any], Source, bytes, float | None] | None:
        """A rekey record's (key, event, origin source, raw, timestamp); None if dead-lettered."""
        try:
            topic, partition, offset, raw, timestamp = msgpack.unpackb(message.value, raw=False)
            source = Source(topic, partition, offset)
        except Exception as exc:  # not written by us: keep it, keep going
            here = Source(message.topic, message.partition, message.offset)
            await self._publish_dead(self.processor.dead_letter(message.value, message.key, here, "decode",
                                                                f"not a loopwatch rekey record: {exc}"))
            return None
        event, dead = self.processor.decode(raw, None, source)
        if dead is not None:
            await self._publish_dead(dead)
            return None
        return message.key, event, source, raw, timestamp

    async def _forward(self, event: dict[str, Any], source: Source, raw: bytes | None,
                       timestamp: float | None) -> None:
        """A keyless record to the rekey topic, keyed by its state key, with its origin."""
        state_key = self.processor.state_key(None, event)
        envelope = msgpack.packb([source.topic, source.partition, source.offset, raw, timestamp],
                                 use_bin_type=True)
        producer = await self.app.maybe_start_producer()
        await producer.send(self._rekey_topic, state_key, envelope, None, None, None)

    async def _publish_dead(self, outcome: Outcome) -> None:
        producer = await self.app.maybe_start_producer()
        await producer.send(self._dead_letters_topic, outcome.key, outcome.dead_letter, None, None, None)

    def _entry(self, key: bytes) -> Entry:
        """The decoded entry of ``key``: from the cache, else decoded from the table once."""
        entry = self._cache.get(key)
        if entry is None:
            stored = self.table.get(key)
            entry = Entry.from_bytes(stored) if stored else Entry()
            self._cache[key] = entry
        return entry

    # ------------------------------------------------------ timers and signals

    async def _on_start(self) -> None:
        # Metrics first (no await before it): verdicts can flow as soon as partitions are assigned.
        if self.settings.metrics_port and not self._metrics_started:
            from prometheus_client import start_http_server

            try:
                start_http_server(self.settings.metrics_port, self.settings.metrics_addr, registry=metrics.REGISTRY)
                self._metrics_started = True
                log.info("loopwatch: metrics on http://%s:%d/metrics", self.settings.metrics_addr,
                         self.settings.metrics_port)
            except OSError as exc:
                log.error("loopwatch: cannot serve metrics on port %d: %s", self.settings.metrics_port, exc)
        for topic in (self.verdicts, self.loop_events, self.dead_letters):
            await topic.maybe_declare()

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
        async with self._lock:  # not between a batch's state writes and its verdicts
            self._expire_idle_now()

    def _expire_idle_now(self) -> None:
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
