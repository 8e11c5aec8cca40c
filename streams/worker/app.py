"""The Faust app: events in, verdicts out, state in a changelog-backed table.

Run it with ``loopwatch worker`` (flags/env: :mod:`streams.worker.settings`) or
``faust -A streams.app worker -l info`` (settings from ``LOOPWATCH_*`` env).
The per-event logic is in :mod:`streams.worker.processor`; this module is the glue.

Topics and keys
---------------
* Input topics (raw bytes): one event per record (msgpack map or JSON
  object, :func:`streams.wire.codecs.decode_event`), keyed by the runner. The
  record key IS the state key. Runners key by run id (default) or, for
  OpenClaw's exact session-level semantics, by session key (then session id):
  with ``--key-by session`` the history cap and the warning dedupe map are
  shared by a session's runs exactly as in OpenClaw (docs/detection-rules.md §8.1/§8.2); with the
  run key each run has its own state, which bounds state per key and spreads
  a busy session's load over partitions (differs from OpenClaw only where runs
  of a session share the history cap or dedupe map).
* A record without a key gets the key derived from its event (``--key-by``,
  :func:`streams.wire.keys.partition_key`) and is forwarded, with its origin
  (topic, partition, offset), to the internal topic ``<app_id>-rekey`` keyed
  by that key, so that its state lives on the partition that owns the key.
  The runner's order is kept only if its keyless records share one input
  partition; key your records.
* The state table ``states`` (changelog ``<app_id>-states-changelog``,
  compacted): key = state key, value = ``SessionState.to_bytes()``
  (:func:`streams.worker.states.encode_state`). Decoded states
  are cached in process (decoded from the table only on a cache miss); the
  cache is dropped on every rebalance. Keys idle for ``state_ttl_s`` are
  deleted (a tombstone in the changelog) by a timer.

Processing: a fetch at a time, then checkpoints (snapshot + offsets)
--------------------------------------------------------------------
The input and rekey topics are subscribed through Faust's consumer (so the
group assigns them with the table's partitions and their offsets are
committed by the group member) but their records do not go through Faust:
:class:`streams.worker.reader.InputReader` fetches the assigned partitions in the
app's own event loop, from their committed offsets, once Faust has recovered
their state, and hands each fetch (up to ``max_poll_records``) to
:meth:`Loopwatch._on_batch`, which hands it to
:meth:`streams.worker.processor.Processor.handle` (each record once, to its end:
the events applied to their keys' cached states in memory, see
:mod:`streams.worker.states`) and gets back what to publish and which states
changed; it packs the records to publish into one producer batch per output
partition (:class:`streams.worker.outputs.Outputs`) and submits them at the end
of the fetch; nothing waits for the broker. At low load a fetch is the one event that
arrived, so batching adds no delay. The dirty keys and the last offset
handled per input partition are kept for the next checkpoint; offsets are
committed only by checkpoints (Faust's committer never sees these topics).

Checkpoints (snapshot, acknowledgement, changelog write, commit) and why a
crash or a rebalance loses, repeats or changes nothing: :mod:`streams.worker.checkpoint`.

Size: this module is where Faust's lifecycle (start-up, assignment, recovery, revocation,
shutdown) meets the worker's own parts; each part has a module of its own (reader, processor,
states, outputs, checkpoints, fencing, fleet view, rekey) and what stays here is the order in which
they are called, which reads best in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

import faust
from aiokafka import AIOKafkaProducer

from . import metrics
from streams.wire.outages import Backoff, stop_producer
from streams.wire.brokers import bootstrap_servers
from .checkpoint import Checkpoints, _failures_seen
from .fencing import PartitionWriters
from .consumer import Transport
from .fleet import FleetView
from streams.detection import Engine, load_config
from streams.wire.logs import limit_kafka_client_logs
from .outage import Outages, is_broker_trouble, quiet_sender_failures
from .offsets import CommittedOffsets
from .outputs import Outputs
from .reader import Batch, InputReader
from .states import States
from .processor import Processor, Topics
from .settings import WorkerSettings
from .table import CHANGELOG_TOPIC_CONFIG, StateTable

__all__ = ["Loopwatch", "create_app"]

_METADATA_MAX_AGE_MS = 5_000

log = logging.getLogger(__name__)

_RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
_GAUGE_INTERVAL_S = 1.0  # ACTIVE_KEYS and CONSUMER_LAG refresh
# A stop leaves Faust this long (of shutdown_timeout_s) after the last checkpoint: its consumer
# leaves the group (~1-2 s when the broker is down), then its worker spends ~2 s gathering tasks and
# closing the event loop.
_FAUST_STOP_S = 5.0
_READY_POLL_S, _READY_NOTE_S = 0.02, 10.0  # start-up: looking whether the input is read; saying what it waits for
_OFFSET_ATTEMPTS, _OFFSET_RETRY_S = 5, 1.0  # reading the committed offsets at an assignment
# The broker's look for transactions past their timeout (transaction.abort.timed.out.transaction.cleanup.interval.ms,
# 10 s by default) and a margin: a transaction left open holds its offset commit pending at most the writers'
# transaction timeout plus this long.
_TIMED_OUT_LOOK_S = 15.0


class _App(faust.App):
    """Faust's app; ``before_stop`` is awaited before Faust stops its consumer and tables,
    ``input_ready`` before Faust's worker logs "Ready".

    Faust sends ``on_before_shutdown`` only after its tables are stopped (a
    RocksDB store has closed its databases by then): the worker must stop
    reading and take its last checkpoint while they are still open.

    Faust's worker says "Ready" once the tables are recovered; the input is
    read by the worker's own reader, which starts a moment later: "Ready" waits
    for it, so that it means an event sent now gets its verdict.
    """

    before_stop: Any = None
    input_ready: Any = None
    on_stopping: Any = None  # called as the stop begins

    async def on_started(self) -> None:
        announce, self.on_startup_finished = self.on_startup_finished, None
        try:
            await super().on_started()
            if announce is not None and self.input_ready is not None and not self.should_stop:
                await self.input_ready()
        finally:
            self.on_startup_finished = announce
        if announce is not None and not self.should_stop:
            await announce()

    async def on_stop(self) -> None:
        if self.on_stopping is not None:
            self.on_stopping()
        if self.before_stop is not None:
            await self.before_stop()
        await super().on_stop()


class Loopwatch(Checkpoints, Outages):
    """The worker: a Faust app with its topics, state table, batch handlers and timers.

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
        limit_kafka_client_logs()  # a broker outage repeats the same errors many times a second
        quiet_sender_failures()  # a writer's lost coordinator connection: an outage, not a traceback
        self.app = app = _App(
            s.app_id,
            broker=s.broker,
            store=s.store,
            datadir=s.data_dir.replace("{app_id}", s.app_id),
            autodiscover=False,
            topic_partitions=s.partitions,
            topic_replication_factor=s.replication_factor,
            topic_disable_leader=True,
            table_standby_replicas=s.standby_replicas,
            producer_linger=s.producer_linger_ms / 1000.0,
            producer_acks=s.producer_acks,
            producer_max_batch_size=s.producer_max_batch_size,
            producer_max_request_size=max(1_000_000, s.producer_max_batch_size + 65_536),
            broker_max_poll_records=s.max_poll_records,
            broker_session_timeout=s.session_timeout_s,
            broker_heartbeat_interval=s.heartbeat_interval_s,
            broker_rebalance_timeout=s.rebalance_timeout_s,
            consumer_auto_offset_reset="earliest",
            # A topic created just after the group leader computed the assignment (the rekey
            # topic, on a fresh app) is "ignored" until the next metadata refresh, 5 min by
            # default: refresh often so such partitions are picked up (and rebalanced) quickly.
            consumer_metadata_max_age_ms=_METADATA_MAX_AGE_MS,
            web_enabled=False,
            key_serializer="raw",
            value_serializer="raw",
        )
        topic = {**_RAW, "partitions": s.partitions, "replicas": s.replication_factor}
        # internal=True: Faust creates missing input topics with `partitions` before subscribing
        # (a broker auto-create would give num.partitions and break co-partitioning with the table).
        self.input = app.topic(*s.input_topics, internal=True, acks=False, **topic)
        self.rekey = app.topic(f"{s.app_id}-rekey", internal=True, acks=False, **topic)
        self.verdicts = app.topic(s.verdicts_topic, **topic)
        self.loop_events = app.topic(s.loop_events_topic, **topic)
        self.dead_letters = app.topic(s.dead_letters_topic, **topic)
        self.table: StateTable = app.tables.add(StateTable(
            app, name="states", default=None, key_type=bytes, value_type=bytes, partitions=s.partitions,
            beacon=app.tables.beacon, help="loopwatch state per key (SessionState bytes)",
            extra_topic_configs=CHANGELOG_TOPIC_CONFIG,
        ))
        app.topics.add(self.input)  # subscribed; their records reach _on_batch, not a Faust stream
        app.topics.add(self.rekey)
        fleet = engine.config.fleet  # options.fleet: the windowed table and breaker (streams.worker.fleet)
        self.fleet = FleetView(app, fleet, s.app_id, s.partitions, s.replication_factor, s.fleet_events_topic,
                               bootstrap_servers(s.broker), s.output_codec) if fleet.enabled else None
        self.processor.fleet = self.fleet.breaker if self.fleet is not None else None
        if self.fleet is not None:
            self.fleet.producer = lambda: self._producers[0] if self._producers else None

        self._init_checkpoints()
        self._init_outages()
        self._owned_generation: int | None = None  # the group generation whose writers this worker started
        self._revoked_at = time.monotonic()  # when the last rebalance took the partitions away (or the start)
        self._lock = asyncio.Lock()  # one batch or snapshot at a time (handlers, timers, rebalance)
        self._out: Outputs | None = None  # opened with its producer, at start or on the first batch
        self._producers: tuple[AIOKafkaProducer, ...] = ()
        self._out_lock = asyncio.Lock()
        self._rekey_topic = self.rekey.get_topic_name()
        self._metrics_started = False

        # The input and rekey partitions Faust assigns are read here, a fetch at a time (streams.worker.reader).
        external = [*s.input_topics, self._rekey_topic]
        self._backoff = Backoff(s.kafka_retry_backoff_ms, s.kafka_reconnect_backoff_max_ms)
        app.transport = Transport(app.conf.broker_consumer, app, external, self._backoff)
        self._bootstrap = bootstrap_servers(s.broker)
        self._offsets = CommittedOffsets(self._bootstrap, s.app_id, f"{s.app_id}-offsets", self._backoff,
                                         stable_wait_s=s.transaction_timeout_s + _TIMED_OUT_LOOK_S)
        # The changelog writers of the partitions owned (streams.worker.fencing), started at each assignment
        # before the partitions' states are recovered.
        self._writers = PartitionWriters(
            self._bootstrap, s.app_id, self._backoff, transaction_timeout_ms=round(s.transaction_timeout_s * 1000),
            linger_ms=s.producer_linger_ms, max_batch_size=s.producer_max_batch_size,
            max_request_size=max(1_000_000, s.producer_max_batch_size + 65_536))
        changelog = self.table.changelog_topic.get_topic_name()
        self._changelog_partitions = {changelog: s.partitions}
        # one record's way through the worker (streams.worker.processor): states from the table, cached
        self.states = States(self.table, self.processor.encode_state)
        self.processor.states = self.states
        self.processor.topics = Topics(s.verdicts_topic, s.loop_events_topic, s.dead_letters_topic,
                                       self._rekey_topic, changelog)
        self.processor.observe = self.fleet.after_apply if self.fleet is not None else None
        self.table.before_recovery = self._own_partitions
        self._reader = InputReader(
            self._bootstrap, self._on_batch, self._ready, self._on_reader_error, backoff=self._backoff,
            client_id=f"{s.app_id}-input", fetch_max_wait_ms=int(s.fetch_max_wait_ms),
            max_poll_records=s.max_poll_records)
        app.timer(s.checkpoint_interval_s, name=f"{s.app_id}.checkpoint")(self._checkpoint_tick)
        app.timer(_GAUGE_INTERVAL_S, name=f"{s.app_id}.gauges")(self._update_gauges)
        app.timer(s.expiry_interval_s, name=f"{s.app_id}.expire")(self._expire_idle)
        app.task(self._on_start)
        app.on_partitions_revoked.connect(self._on_revoked)
        app.on_partitions_assigned.connect(self._on_assigned)
        app.before_stop = self._on_shutdown
        app.on_stopping = self._bound_exit
        self._exit_timer: threading.Timer | None = None
        self._last_checkpoint_written = False
        app.input_ready = self._reading_input

    # ------------------------------------------------------------------ events

    async def _on_batch(self, batch: Batch, epoch: int) -> None:
        """Handle a fetched batch (publishing its verdicts); its offsets are committed by the checkpoint that covers it.

        A batch fetched before a rebalance (its ``epoch`` is not the reader's)
        is dropped: its records come again, or are another worker's. Raises
        what a send raises, after marking the states unfit to checkpoint: the
        reader then crashes the worker.
        """
        out = self._out or await self._open_outputs()
        async with self._lock:
            if epoch != self._reader.epoch or self._failed is not None or self._tainted or self._outage_since:
                return
            try:
                done = self.processor.handle(batch, time.monotonic())  # each record once, to its end
                self._note_handled(batch, done.changed)
                out.add_all(done.publish)
                if out:
                    sent = await out.send()
                    if epoch != self._reader.epoch:  # went back to the last checkpoint meanwhile (an outage)
                        _failures_seen(sent)
                        return
                    self._outputs.extend(sent)
            except BaseException as exc:
                if is_broker_trouble(exc) and not self.app.should_stop:
                    self._enter_outage(exc)  # these states are dropped: the last checkpoint is the truth again
                    return
                # States may hold events whose verdicts were never handed to the producer:
                # no checkpoint may write or commit them (the worker stops, see the module docstring).
                self._tainted = True
                raise
            if done.sent_ms:  # end-to-end latency of the batch's verdicts: handed to the producer now, sent at ts
                now_ms = time.time() * 1000.0
                metrics.observe_many(metrics.VERDICT_LATENCY_SECONDS,
                                     [max(0.0, now_ms - sent) / 1000.0 for sent in done.sent_ms])
            self.processor.flush_metrics()
            if self._since_snapshot >= self.settings.checkpoint_max_events:
                checkpoint = self._checkpoint
                if checkpoint is not None and not checkpoint.done():
                    await asyncio.wait([checkpoint])  # back-pressure: checkpoints fall behind
                self._start_checkpoint()

    async def _on_reader_error(self, exc: BaseException) -> None:
        """The reader failed (its task has ended): ride out a broker that does not answer, crash otherwise."""
        if is_broker_trouble(exc) and not self.app.should_stop:
            self._enter_outage(exc)
        else:
            await self.app.crash(exc)

    def _replace_outputs(self) -> None:
        """Drop the output producer (an outage): the records it still holds are given up, a new one opens
        with the next batch."""
        producers, self._producers, self._out = self._producers, (), None
        for producer in producers:
            asyncio.ensure_future(stop_producer(producer, 1.0))

    async def _open_outputs(self) -> Outputs:
        """The output batches, once the producer runs and every output topic exists.

        Also checks that every input topic has ``partitions`` partitions (the
        state table's): a state lives in the changelog partition of its input
        partition. Raises ``RuntimeError`` (and crashes the app) if not.
        """
        async with self._out_lock:
            if self._out is None and self.app.should_stop:
                raise RuntimeError("the worker is stopping")
            if self._out is None:
                fleet = self.fleet.declare() if self.fleet is not None else []
                for topic in (self.verdicts, self.loop_events, self.dead_letters, *fleet):
                    await topic.maybe_declare()
                # A producer of the worker's own (own connection, no transactions): aiokafka has one
                # produce request in flight per broker connection, so verdicts would otherwise wait
                # behind a checkpoint's state writes, and a transaction would hold them back from
                # read_committed readers until its commit. The changelog writers are separate
                # (streams.worker.fencing).
                started: list[AIOKafkaProducer] = []
                topics = self.processor.topics
                outputs = [topics.verdicts, topics.loop_events, topics.dead_letters, topics.rekey, *(self.fleet.output_topics if self.fleet is not None else [])]
                try:
                    started.append(await self._new_producer("outputs"))
                    producer = started[0]
                    counts = await _partition_counts(producer.client, [*outputs, *self.settings.input_topics])
                    wrong = {name: counts[name] for name in self.settings.input_topics
                             if counts[name] != self.settings.partitions}
                    if wrong:
                        error = RuntimeError(partition_mismatch(self.settings.partitions, wrong))
                        log.error("loopwatch: %s", error)
                        await self.app.crash(error)
                        raise error
                except BaseException:
                    await _stop(*started)
                    raise
                self._producers = (producer,)
                self._out = Outputs(producer, {name: counts[name] for name in outputs})
            return self._out

    async def _new_producer(self, name: str) -> AIOKafkaProducer:
        s = self.settings
        producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap, client_id=f"{s.app_id}-{name}",
            acks="all" if s.producer_acks == -1 else s.producer_acks, linger_ms=s.producer_linger_ms,
            max_batch_size=s.producer_max_batch_size,
            max_request_size=max(1_000_000, s.producer_max_batch_size + 65_536),
            retry_backoff_ms=self._backoff.retry_ms)
        self._backoff.apply(producer.client)
        try:
            await producer.start()
        except BaseException:
            await producer.stop()  # a failed start may leave its client open
            raise
        return producer

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
        await self._open_outputs()

    async def _on_revoked(self, *args: Any, **kwargs: Any) -> None:
        """Partitions move: checkpoint the states and offsets (see streams.worker.checkpoint), drop the cache;
        write the fleet view's windows and drop its copies."""
        self._revoked_at = time.monotonic()
        # The windows go out on the output producer, the checkpoint on the changelog writers: both at once.
        await asyncio.gather(self._flush_fleet_windows(), self._checkpoint_at_revoke())

    async def _flush_fleet_windows(self) -> None:
        if self.fleet is not None:
            await self.fleet.flush()
            self.fleet.windows.forget()

    async def _checkpoint_at_revoke(self) -> None:
        async with self._lock:
            try:
                fenced = await self._final_checkpoint()
                if fenced:
                    log.warning("loopwatch: partitions %s had moved to another worker already (this one was "
                                "removed from the group): their last states here were not written",
                                ", ".join(map(str, sorted(fenced))))
                    metrics.FENCED.inc(len(fenced))
                    self._writers.renew()
            except Exception as exc:  # the next owner re-applies from the previous checkpoint
                log.warning("loopwatch: checkpoint at rebalance failed: %r", exc)
            self._drop()
            self._reader.revoke()

    async def _on_assigned(self, *args: Any, **kwargs: Any) -> None:
        """New assignment: read its input partitions here, from their committed offsets, once recovered.

        Faust's consumer is told to leave the input partitions alone while the committed offsets are read
        (both go to the broker; the offsets by :class:`~streams.worker.offsets.CommittedOffsets`, in this
        loop, not behind the calls Faust's recovery makes in the consumer thread at the same moment)."""
        consumer = self.app.consumer
        mine = [tp for tp in consumer.assignment() if tp.topic in consumer.transport.external_topics]
        async with self._lock:
            await self._wait_checkpoint()
            self._drop()  # the table is the truth
            self._reader.revoke()
            stopping = asyncio.ensure_future(consumer.stop_fetching(mine))
            try:
                await self._read_input_from_committed(mine)
            finally:
                await stopping

    async def _read_input_from_committed(self, mine: list[Any]) -> None:
        """The reader reads ``mine`` (the input and rekey partitions assigned) from their committed offsets."""
        generation = self.app.consumer_generation_id
        if self._outage_since is not None and self._owned_generation != generation:
            return  # no fresh writers for this assignment (Kafka did not answer): the next one reads
        for attempt in range(1, _OFFSET_ATTEMPTS + 1):
            try:
                # stable (no offset commit of a transaction pending), never Faust's consumer's answer:
                # aiokafka's consumer cannot ask for stable offsets (streams.worker.offsets)
                committed = await self._offsets.read(mine)
                break
            except Exception as exc:
                if self.app.consumer_generation_id != generation:
                    return  # the group rebalanced again: its assignment comes next
                if attempt == _OFFSET_ATTEMPTS:  # no input read until a restart otherwise
                    if is_broker_trouble(exc):
                        self._enter_outage(exc)  # a rebalance once Kafka answers assigns them again
                        return
                    log.error("loopwatch: cannot read the committed offsets: %r", exc)
                    await self.app.crash(exc)
                    return
                log.warning("loopwatch: reading the committed offsets failed (attempt %d): %r", attempt, exc)
                await asyncio.sleep(_OFFSET_RETRY_S)
        try:
            await self._reader.start()
        except Exception as exc:
            if not is_broker_trouble(exc):
                raise
            self._enter_outage(exc)
            return
        self._reader.assign(committed)
        at_once = sum(1 for tp in mine if self._ready(tp))
        log.info("loopwatch: generation %d: reading %d input partition(s) from their committed offsets, %d at once "
                 "(states caught up), %.2f s after the revocation", generation, len(mine), at_once,
                 time.monotonic() - self._revoked_at)
        self._outage_over()

    async def _reading_input(self) -> None:
        """Return once the worker reads the input of every state partition it owns, its outputs open.

        Faust's assignor gives a worker input partition ``p`` of every input
        topic (and of the rekey topic) with partition ``p`` of the state
        table: each active table partition must have all of them fetched by the
        reader. A worker that owns none (more workers than partitions) is ready
        as it is. Logs what it waits for every ``_READY_NOTE_S`` s.
        """
        noted = time.monotonic()
        while not self.app.should_stop:
            waiting = self._unread_inputs()
            if not waiting:
                reading = sorted(self._reader.reading())
                log.info("loopwatch: reading %d input partition(s)%s", len(reading),
                         ": " + ", ".join(f"{topic}[{partition}]" for topic, partition in reading) if reading else "")
                return
            if time.monotonic() - noted >= _READY_NOTE_S:
                noted = time.monotonic()
                log.warning("loopwatch: not ready yet, waiting for %s", waiting)
            await asyncio.sleep(_READY_POLL_S)

    def _unread_inputs(self) -> str:
        """What keeps the worker from being ready ("" when nothing): see :meth:`_reading_input`."""
        if self.app.rebalancing:
            return "the group's rebalance"
        if self._out is None:
            return "the output topics and producers"
        changelog = self.table.changelog_topic.get_topic_name()
        owned = {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == changelog}
        reading = self._reader.reading()
        unread = [f"{topic}[{partition}]" for partition in sorted(owned)
                  for topic in (*self.settings.input_topics, self._rekey_topic) if (topic, partition) not in reading]
        return f"input partitions {', '.join(unread)}" if unread else ""

    async def _own_partitions(self, generation: int) -> None:
        """Start the changelog writers of the active partitions just assigned (fencing their former owners).

        Called by the table at each assignment, before Faust recovers the
        partitions' states, so the recovery and the committed offsets read
        afterwards hold everything a former owner committed, and nothing it
        sends later is accepted. A broker that cannot be reached crashes the
        worker (a restart starts over).
        """
        if generation != self.app.consumer_generation_id:
            return  # a newer rebalance is under way: its assignment comes next (Faust's recovery skips it too)
        try:
            await self._writers.own(self._active_partitions(), generation)
        except Exception as exc:
            if is_broker_trouble(exc) and not self.app.should_stop:
                self._owned_generation = None
                self._enter_outage(exc)  # nothing is read until an assignment starts its writers
                return
            log.error("loopwatch: cannot start the changelog writers of the assigned partitions: %r", exc)
            await self.app.crash(exc)
        else:
            self._owned_generation = generation

    def _ready(self, tp: Any) -> bool:
        """Whether ``tp``'s state is recovered (its input may be applied).

        Either Faust's recovery has completed (it resumed ``tp``), or, sooner,
        the partition's writer fenced its former owners in this generation and
        the bulk read brought the store to the changelog's end
        (:attr:`streams.worker.table.StateTable.caught_up`): Faust's recovery
        has nothing of it left to read then, and the checkpoints wait until
        it has completed (``app.rebalancing``), so it never finds the store
        past the changelog's end it took.
        """
        consumer = self.app.consumer
        if consumer.flow_active and tp in consumer._get_active_partitions():
            return True
        return (tp.partition in self.table.caught_up and self._owned_generation is not None
                and self._owned_generation == self.app.consumer_generation_id and not self.app.should_stop)

    async def _on_shutdown(self, *args: Any, **kwargs: Any) -> None:
        """Graceful stop: a last checkpoint, committed (a restart re-sends nothing), if Kafka acknowledges it
        within ``shutdown_timeout_s`` less :data:`_FAUST_STOP_S`; else one warning, and the stop goes on."""
        loop = asyncio.get_running_loop()
        budget = max(1.0, self.settings.shutdown_timeout_s - _FAUST_STOP_S)
        until = loop.time() + budget
        try:
            await asyncio.wait_for(self._last_checkpoint(), budget)
        except asyncio.TimeoutError:
            log.warning("loopwatch: no last checkpoint: Kafka did not acknowledge it within %g s (is the broker "
                        "down?); the events since the previous checkpoint are applied again at the next start, "
                        "their verdicts published again", budget)
        async with self._out_lock:  # producers being opened are kept and stopped too
            producers, self._producers, self._out = self._producers, (), None
            for producer in producers:  # records still unacknowledged are given up: no checkpoint covers them
                await stop_producer(producer, max(0.1, until - loop.time()))
        await self._writers.close(max(0.1, until - loop.time()))
        await self._offsets.close()

    async def _last_checkpoint(self) -> None:
        async with self._lock:
            await self._reader.stop()  # no batch is being handled: we hold the lock
            pending = self._handled or self._outputs or self._dirty or self._expired
            try:
                fenced = await self._final_checkpoint()
            except Exception as exc:
                log.warning("loopwatch: checkpoint at shutdown failed: %r", exc)
            else:
                if fenced:  # removed from the group while stopping: the new owner goes on from its own
                    log.warning("loopwatch: partitions %s are owned by another worker now: their last states here "
                                "were not written", ", ".join(map(str, sorted(fenced))))
                self._last_checkpoint_written = self._failed is None and not self._tainted and not fenced
                if self._last_checkpoint_written and pending:
                    log.info("loopwatch: last checkpoint written")
            if self.fleet is not None:
                await self.fleet.flush()  # the fleet windows changed since the last flush (bounded)
            self._drop()

    def _bound_exit(self) -> None:
        """In a worker process, as its stop begins: end the process ``shutdown_timeout_s`` later whatever Kafka
        does (Faust's consumer thread waits for a broker that is down), and at once on a second signal."""
        if not self.app.in_worker or self._exit_timer is not None:
            return
        bound = self.settings.shutdown_timeout_s
        log.info("loopwatch: stopping: last checkpoint, then exit (within %g s)", bound)
        self._exit_timer = threading.Timer(bound, self._exit_now, (f"still stopping {bound:g} s after the stop began "
                                                                   "(Kafka clients waiting for the broker)",))
        self._exit_timer.daemon = True
        self._exit_timer.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._exit_now, "a second signal")

    def _exit_now(self, reason: str) -> None:
        """End the process now (any thread): one line, flushed logs, status 0 (1 if the worker had crashed)."""
        what = ("the last checkpoint is written" if self._last_checkpoint_written else
                "without a last checkpoint: the events since the previous one are applied again at the next start")
        log.warning("loopwatch: %s: exiting now, %s", reason, what)
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(1 if self._failed is not None or self.app.crash_reason is not None else 0)

    def _drop(self) -> None:
        """Forget every in-memory state and offset: the table and the committed offsets are the truth again."""
        self.states.clear()
        self._forget_pending()

    def _active_partitions(self) -> set[int]:
        inputs = set(self.settings.input_topics)
        return {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic in inputs}

    def _active_key_count(self) -> int:
        """Keys with state on this worker's active partitions (standby copies are not counted)."""
        active = self._active_partitions()
        return sum(1 for partition in self.table.key_partitions.values() if partition in active)

    async def _update_gauges(self) -> None:
        metrics.ACTIVE_KEYS.set(self._active_key_count())
        for (topic, partition), lag in (await self._reader.lags()).items():
            metrics.CONSUMER_LAG.labels(topic, str(partition)).set(lag)

    async def _expire_idle(self) -> None:
        """Delete keys idle for ``state_ttl_s`` (OpenClaw's idle prune), with changelog tombstones."""
        async with self._lock:
            if self._checkpoint is not None and not self._checkpoint.done():
                return  # its state writes must not land after a tombstone: next time
            if (self.app.rebalancing or self._tainted or self._failed is not None or self._out is None
                    or self._outage_since is not None):
                return  # partitions are moving (next time), or the worker is stopping
            self._expire_idle_now()  # the next checkpoint writes the tombstones

    def _expire_idle_now(self) -> None:
        now = time.monotonic()
        active = self._active_partitions()
        ttl = self.settings.state_ttl_s
        last_seen = self.states.last_seen
        for key, partition in list(self.table.key_partitions.items()):
            if key in self._dirty:
                continue
            if partition not in active:
                continue  # a standby copy: its owner expires it
            seen = last_seen.setdefault(key, now)  # recovered keys: idle since now
            if now - seen < ttl:
                continue
            self.table.forget(key)
            self._expire_key(key, partition)
            self.states.discard(key)
            self._not_written.discard(key)
            if self._out is not None:
                self._out.forget(key)


def partition_mismatch(partitions: int, wrong: dict[str, int]) -> str:
    """Why the worker cannot read input topics whose partition counts (``wrong``) differ from ``partitions``."""
    counts = set(wrong.values())
    fix = (f"run the worker with --partitions {counts.pop()}, or create the input topic with {partitions}"
           if len(counts) == 1 else f"give every input topic {partitions}")
    return (f"input topic partitions must equal --partitions ({partitions}, the state table's): "
            + ", ".join(f"{name} has {count}" for name, count in wrong.items())
            + f". To fix: {fix} partitions before producing to it (a topic Kafka creates on the first produce "
              "gets the broker's num.partitions)")


async def _partition_counts(client: Any, names: list[str], timeout: float = 30.0) -> dict[str, int]:
    """Partition count of each topic, waiting (up to ``timeout`` s) for topics just created to show up.

    Asks for the metadata of all topics: aiokafka logs an error for every
    request naming a topic the broker does not know yet.
    """
    deadline = time.monotonic() + timeout
    while True:
        cluster = await client.fetch_all_metadata()
        counts = {name: len(cluster.partitions_for_topic(name) or ()) for name in names}
        missing = [name for name, count in counts.items() if not count]
        if not missing:
            return counts
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics not found on the broker: {', '.join(missing)}")
        await asyncio.sleep(0.1)



async def _stop(*producers: AIOKafkaProducer) -> None:
    """Stop each producer, the others too when one's stop raises."""
    if producers:
        try:
            await producers[0].stop()
        finally:
            await _stop(*producers[1:])


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
