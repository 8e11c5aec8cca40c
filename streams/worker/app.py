"""The Faust app: events in, verdicts out, state in a changelog-backed table.

Run it with ``loopwatch worker`` (flags/env: :mod:`streams.worker.settings`) or
``faust -A streams.app worker -l info`` (settings from ``LOOPWATCH_*`` env).
The per-event logic is in :mod:`streams.worker.processor`; this module wires the worker's parts together.

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

The parts, each a module of its own: the Faust app (:mod:`streams.worker.faust_app`), start-up and
shutdown (:mod:`streams.worker.lifecycle`), partitions assigned and revoked
(:mod:`streams.worker.assignment`), the output producer (:mod:`streams.worker.producers`), checkpoints
(:mod:`streams.worker.checkpoint`), outages (:mod:`streams.worker.outage`), idle keys expired
(:mod:`streams.worker.expiry`); the reader, processor, states, outputs, fencing, fleet view and rekey
modules below them. What stays here is :class:`Loopwatch` putting them together, and a fetch's way
through them (:meth:`Loopwatch._on_batch`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from streams.detection import Engine, load_config
from streams.wire.brokers import bootstrap_servers
from streams.wire.logs import limit_kafka_client_logs
from streams.wire.outages import Backoff

from . import metrics
from .assignment import Assignments
from .checkpoint import Checkpoints, _failures_seen
from .consumer import Transport
from .expiry import Expiry
from .faust_app import RAW, new_faust_app
from .fencing import PartitionWriters
from .fleet import FleetView
from .lifecycle import Lifecycle
from .offsets import CommittedOffsets
from .outage import Outages, is_broker_trouble, quiet_sender_failures
from .processor import Processor, Topics
from .producers import OutputProducers
from .reader import Batch, InputReader
from .settings import WorkerSettings
from .states import States
from .table import CHANGELOG_TOPIC_CONFIG, StateTable

__all__ = ["Loopwatch", "create_app"]

log = logging.getLogger(__name__)

_GAUGE_INTERVAL_S = 1.0  # ACTIVE_KEYS and CONSUMER_LAG refresh
# The broker's look for transactions past their timeout (transaction.abort.timed.out.transaction.cleanup.interval.ms,
# 10 s by default) and a margin: a transaction left open holds its offset commit pending at most the writers'
# transaction timeout plus this long.
_TIMED_OUT_LOOK_S = 15.0


class Loopwatch(Checkpoints, Outages, Assignments, Lifecycle, OutputProducers, Expiry):
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
        self.app = app = new_faust_app(s)
        topic = {**RAW, "partitions": s.partitions, "replicas": s.replication_factor}
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
        self._init_assignments()
        self._init_lifecycle()
        self._init_producers()
        self._lock = asyncio.Lock()  # one batch or snapshot at a time (handlers, timers, rebalance)
        self._rekey_topic = self.rekey.get_topic_name()

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

    def _drop(self) -> None:
        """Forget every in-memory state and offset: the table and the committed offsets are the truth again."""
        self.states.clear()
        self._forget_pending()

    def _active_key_count(self) -> int:
        """Keys with state on this worker's active partitions (standby copies are not counted)."""
        active = self._active_partitions()
        return sum(1 for partition in self.table.key_partitions.values() if partition in active)

    async def _update_gauges(self) -> None:
        metrics.ACTIVE_KEYS.set(self._active_key_count())
        for (topic, partition), lag in (await self._reader.lags()).items():
            metrics.CONSUMER_LAG.labels(topic, str(partition)).set(lag)


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
