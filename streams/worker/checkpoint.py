"""The worker's checkpoint protocol: snapshot, acknowledgement, changelog write, commit.

A checkpoint makes what the worker did since the last one durable: the
verdicts and other records it published, the states of the keys it changed
and the input offsets it handled. This module holds the protocol and the
argument for why a crash loses, repeats or changes nothing;
:class:`Checkpoints` is mixed into :class:`streams.worker.app.Loopwatch`,
which handles the events (see that module for topics and keys). It runs
over 400 lines because of this docstring: the argument stays whole, beside
the code it covers.

The protocol
------------
Every ``checkpoint_interval_s`` (timer) a checkpoint covers the partitions
due one: those with ``checkpoint_partition_events`` events handled since
their last checkpoint, or whose first such event has waited
``checkpoint_partition_interval_s``; whenever ``checkpoint_max_events``
events wait, at a rebalance and at a stop, one covers every partition with
changes. So a busy partition is checkpointed every look or two and a quiet
one once per partition interval: a transaction per partition and checkpoint
is what an owned partition costs. A checkpoint snapshots, in one step
with no event being handled (the batch handlers, the timers and the
rebalance handlers share one lock): the send futures of every record
published so far, and, of its partitions, the dirty keys and the last offset
handled per input partition. Each dirty state is encoded as it is at that instant: by the
checkpoint, a few states between yields to the event loop, or, for a state
an event is about to change first, just before
(copy on write, :meth:`streams.worker.states.States.get`). Then, in the background
while later events are handled:

(a) wait until every verdict, loop event, dead letter and rekey forward of
    the snapshot is acknowledged by the broker (``acks=all``);
(b) for each partition ``p`` with changes, in one Kafka transaction of
    ``p``'s changelog writer (:mod:`streams.worker.fencing`): write each
    snapshotted state of ``p``'s keys (and the tombstone of each key of ``p``
    that expired) to changelog partition ``p``, and
(c) add to the same transaction, per input (and rekey) partition ``p``, the
    offset after the last event of the snapshot (``send_offsets_to_transaction``),
    then commit it. The local store takes the states once committed.

One checkpoint at a time, so a key's snapshots reach the changelog in order.
The changelog is read ``read_committed`` (Faust's recovery and standbys,
:mod:`streams.worker.consumer`): a state is restored only if its transaction
committed, and then with the offsets it went with.

Why nothing is lost, applied twice or changed across a crash (kill -9)
---------------------------------------------------------------------
Each state carries ``last_offsets[tp]``: the offset of the last event of
input partition ``tp`` (``"topic:partition"``) applied to it, in the same
changelog record as the state. The detection engine is deterministic and a
verdict record is a function of (state, event, key, source) -- it carries no
production time; the Kafka record timestamp does -- so re-applying an event
to the same state gives byte-identical records.

After a crash the table is restored from the committed changelog (the last
committed state of each key; with ``rocksdb://`` the local database, written
only as transactions commit, then the newer committed changelog records) and
each input partition resumes at its last committed offset, which by (c) was
committed together with the states of every event before it, and is read in
order from there (:class:`streams.worker.reader.InputReader`). For each event
then:

1. offset ``<= last_offsets[tp]`` of its key's state: the event is in the
   state, which was committed in some checkpoint's step (b), after step (a)
   acknowledged its verdict: it is skipped, nothing is sent;
2. otherwise it is not in the state (states are snapshotted whole, so the
   restored state has exactly the events up to its ``last_offsets``, in
   order); it is applied, and its verdict is published -- a byte-identical
   duplicate if it had been published before the crash.

So every event is applied exactly once to the durable state, none is
skipped, and every event has a verdict (duplicates are identical). Keyless
records go through the rekey topic; a duplicate forward after a crash
carries the same origin offset and is skipped by 1. An event that failed
validation is dead-lettered (again, after a crash) and leaves no trace in the
state (also one with args or a result nested too deeply to hash, which the
engine checks before changing anything). One exception: a state too large
for a changelog record (:meth:`Checkpoints._fitting`) is not written, so after
a crash its key restarts from its last written state.

Why a worker that lost its partitions changes nothing (revocation by timeout)
-----------------------------------------------------------------------------
A worker can lose a partition without knowing: paused (GC, a stalled VM,
SIGSTOP) or cut off for longer than the session timeout, it is removed from
the group, which gives its partitions to another worker; it learns of it only
at its next heartbeat, and meanwhile it still holds states of those
partitions, older than the new owner's. Nothing it does then reaches the
table or the committed offsets:

* the new owner starts the partition's writer (``transactional.id``
  ``<app_id>-states-<p>``, the same for every owner) before it recovers the
  partition's states or reads its committed offset. The transaction
  coordinator bumps the id's epoch and aborts any transaction of the former
  owner still open (a commit already under way is finished first);
* so each transaction of the former owner on ``p`` either committed before
  that moment -- then the new owner's recovery and committed offset, read
  after it, contain it: a state and the offsets it went with -- or never
  commits: its writes are aborted (never restored by ``read_committed``
  readers, dropped by compaction) and its offsets are not committed. Its
  last checkpoint at revocation, which wrote paused-time states over newer
  ones before, is now refused (``ProducerFenced``);
* a fenced worker drops its states and reads nothing until the group assigns
  it partitions again (:meth:`Checkpoints._lose`).

The history of ``p`` in the changelog is thus a sequence of committed
transactions, each by the owner of the moment and each continuing from the
one before; the argument above (1, 2) holds whoever wrote them, whenever a
worker learns that it lost a partition. It relies on Kafka's fencing, not on
timing: no premise that revoked partitions are checkpointed "before any other
member gets them" (true of Faust's eager rebalance for a member that takes
part in it, false for one removed by session timeout).

Verdicts are not in the transactions: they go through the worker's own
producer, acknowledged in (a) before the transaction that commits their
events. A former owner that keeps handling events until it learns of the
loss publishes verdicts computed from the key's events in order, as the new
owner does from the last committed state: byte-identical duplicates. What a
transaction would add -- verdicts visible only with their state, to
``read_committed`` readers -- is not needed (no committed state holds an
event without its verdict acknowledged, by (a)), and would hold every verdict
back until the next commit.

What a restart or a rebalance re-sends: after a crash, the verdicts of the
events since each partition's last committed checkpoint (up to
``checkpoint_partition_interval_s`` or ``checkpoint_partition_events``); after a fenced worker loses its partitions, those of
the events it handled since its last committed checkpoint (the new owner
re-applies them); after a rebalance or a graceful stop, nothing (the last
checkpoint commits states and offsets).

Rebalances: when partitions are revoked the worker runs a last checkpoint
(a, b, c: committed, now that a stale owner cannot commit), drops its cache
and pending offsets; the next owner starts from it. A batch fetched before a
rebalance is dropped unhandled (its records come again). A graceful stop runs
a last checkpoint too, so a restart re-sends nothing (if Kafka acknowledges it
within ``shutdown_timeout_s`` less 5 s; else the stop goes on without it, as
after a crash: docs/operations.md). A batch that fails
half-way (a send refused) leaves states that may hold events without a
published verdict: it crashes the worker, and no checkpoint runs after it,
not even the stop's. A failed checkpoint (a send or write not acknowledged,
a transaction not committed, other than by a fence) crashes the worker too.
Either way the in-memory states are ahead of the table, and a restart
resumes from the last checkpoint.

Cost: per event, no broker round trip and no state encoding on the verdict
path; per checkpoint, one encoding per dirty key and, per partition it
covers, one transaction (add partitions, the changelog batch, add offsets,
commit: a few round trips, partitions in parallel); per assignment, one
``InitProducerId`` per partition owned. After a crash up to a partition
interval of each partition's events is re-applied (and their verdicts
possibly sent twice).
Faust's ``exactly_once`` is not used: it would put verdicts in the
transactions too.

Latency: the cyclic garbage collector is kept off the states alive at a
checkpoint (``gc.freeze``; a full collection every ``gc_full_interval_s``),
since a full pass over a fleet's states stalls the event loop for tens of ms.

Size: this docstring is the crash argument; the code below is the protocol it argues about,
kept with it so that one cannot change without the other being read.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any

from . import metrics
from streams.wire.codecs import MAX_CARRIED_BYTES, fits
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from .fencing import Fenced, is_fenced, transaction_state
from .outage import is_broker_trouble
from .outputs import Outputs

__all__ = ["Checkpoints"]

log = logging.getLogger(__name__)

_TRANSACTION_POLL_S = 0.05  # how often a checkpoint waiting for its changelog batches looks at the writer's state
_GC_PAUSE_NOTE_S = 0.5  # a full garbage collection that held the event loop this long is logged (WARNING)
# Transactions of one checkpoint under way at once. A worker's partitions fall due together after a burst (their
# first events came in one fetch); 64 transactions at once (a few requests each, then the commit markers the broker
# writes) were seen holding the broker's answers to the verdicts' producer back for seconds (docs/worker.md).
PARALLEL_TRANSACTIONS = 8


class Checkpoints:
    """The checkpoint protocol of the module docstring, mixed into the worker.

    The worker provides ``app`` (the Faust app), ``settings``, ``processor``,
    ``table`` (:class:`streams.worker.table.StateTable`), ``states``
    (:class:`streams.worker.states.States`), ``_writers`` (the changelog writers,
    :class:`~streams.worker.fencing.PartitionWriters`), ``_changelog_partitions``,
    ``_reader``, ``_drop()`` and ``_lock`` (held by every batch, timer and
    rebalance handler); it records each batch it handles with :meth:`_note_handled` and its sends in
    ``_outputs``.
    """

    def _init_checkpoints(self) -> None:
        self._dirty: dict[bytes, int] = {}  # key -> changelog partition, changed since the last snapshot
        self._handled: dict[Any, int] = {}  # input TP -> last offset handled since the last snapshot
        self._since_snapshot = 0  # events handled since the last snapshot
        self._pending: dict[int, list] = {}  # partition -> [events since its last snapshot, monotonic time of the first]
        self._outputs: list[asyncio.Future] = []  # sends since the last snapshot (verdicts, loop events, ...)
        self._checkpoint: asyncio.Future | None = None  # the checkpoint in flight
        self._failed: BaseException | None = None
        self._tainted = False  # a batch failed half-way: in-memory states are not fit to checkpoint (until restart)
        self._gc_full_at = time.monotonic()
        self._not_written: set[bytes] = set()  # keys whose state was too large for the changelog (logged once)
        self._expired: dict[bytes, int] = {}  # key -> changelog partition: idle keys whose tombstone is due

    def _forget_pending(self) -> None:
        """Forget what no checkpoint has covered yet (a rebalance or a stop: the table is the truth again)."""
        self._dirty.clear()
        self._handled.clear()
        self._since_snapshot = 0
        self._pending.clear()
        _failures_seen(self._outputs)
        self._outputs.clear()
        self._expired.clear()
        self._not_written.clear()  # those states are gone with the cache; a new owner logs them again

    def _note_handled(self, batch: Any, changed: dict[bytes, int]) -> None:
        """Record a batch handled: the last offset per input partition, the keys whose state ``changed``
        (key -> changelog partition), and per partition how many events wait for its checkpoint since when."""
        self._dirty.update(changed)
        handled, pending = self._handled, self._pending
        now = time.monotonic()
        for tp, records in batch:
            handled[tp] = records[-1].offset
            count = len(records)
            self._since_snapshot += count
            entry = pending.get(tp.partition)
            if entry is None:
                pending[tp.partition] = [count, now]
            else:
                entry[0] += count

    def _expire_key(self, key: bytes, partition: int) -> None:
        """``key`` idle: its tombstone goes to changelog ``partition`` with that partition's next checkpoint."""
        self._expired[key] = partition
        self._pending.setdefault(partition, [0, time.monotonic()])

    def _due(self) -> set[int]:
        """The partitions due a checkpoint: ``checkpoint_partition_events`` events waiting, or the first of them
        waiting ``checkpoint_partition_interval_s``."""
        s = self.settings
        events, interval = s.checkpoint_partition_events, s.checkpoint_partition_interval_s
        now = time.monotonic()
        return {partition for partition, (count, since) in self._pending.items()
                if count >= events or now - since >= interval}

    def _snapshot(self, partitions: set[int] | None = None
                  ) -> tuple[list[asyncio.Future], dict[Any, int], dict[bytes, int]]:
        """Take the sends so far, and the handled offsets, dirty keys (for encoding) and expired keys of
        ``partitions`` (None: every partition); call with the lock held.

        The dirty states are encoded by the checkpoint
        (:meth:`streams.worker.states.States.encode_snapshot`) off the lock, and just before an event
        changes one of them first: each is encoded as it was at this instant. Every send so far is taken,
        those of events of other partitions too: waiting for more acknowledgements than needed is safe,
        and a later checkpoint of those partitions runs after this one has seen them acknowledged.
        """
        outputs, self._outputs = self._outputs, []
        if partitions is None:
            handled, self._handled = self._handled, {}
            dirty, self._dirty = self._dirty, {}
            expired, self._expired = self._expired, {}
            self._since_snapshot = 0
            self._pending.clear()
        else:
            handled = _take(self._handled, lambda tp: tp.partition in partitions)
            dirty = _take(self._dirty, lambda key: self._dirty[key] in partitions)
            expired = _take(self._expired, lambda key: self._expired[key] in partitions)
            for partition in partitions:
                entry = self._pending.pop(partition, None)
                if entry is not None:
                    self._since_snapshot -= entry[0]
        self.states.snapshot(dirty)
        return outputs, handled, expired

    def _fitting(self, writes: list[tuple[bytes, bytes, int]]) -> list[tuple[bytes, bytes, int]]:
        """The state writes a changelog record can carry; each larger one is counted and left out.

        A state over :data:`~streams.wire.codecs.MAX_CARRIED_BYTES` (tool names
        or ids of tens of KB, times ``historySize``) would be refused by the
        broker and stop the worker at every restart. Left out, the key's state
        lives on in memory (and still expires); after a crash or rebalance it
        restarts from its last written version, or empty, without the events
        in between. Logged at ERROR once per key.
        """
        kept = []
        for key, value, partition in writes:
            if fits(key, value):
                kept.append((key, value, partition))
                continue
            metrics.STATES_NOT_WRITTEN.inc()
            self.table.key_partitions.setdefault(key, partition)  # so that idle expiry finds it
            if key not in self._not_written:
                self._not_written.add(key)
                log.error("loopwatch: the state of key %r is %s bytes, over the %s a changelog record carries: "
                          "kept in memory only (its tool names or ids are very long, or historySize very large)",
                          key[:200], f"{len(value):,}", f"{MAX_CARRIED_BYTES:,}")
        return kept

    def _start_checkpoint(self, due_only: bool = False) -> None:
        """Snapshot and checkpoint in the background (every partition with changes, or ``due_only`` those
        :meth:`_due`), unless one is in flight or nothing happened."""
        if self._checkpoint is not None and not self._checkpoint.done():
            return
        if self._failed is not None or self._tainted or self.app.rebalancing or self._outage_since is not None:
            return
        if not (self._handled or self._outputs or self._dirty or self._expired):
            return
        partitions = self._due() if due_only else None
        if partitions is not None and not partitions:
            return
        self._checkpoint = asyncio.ensure_future(self._background_checkpoint(*self._snapshot(partitions)))

    async def _background_checkpoint(self, *snapshot: Any) -> None:
        epoch = self._reader.epoch
        try:
            fenced = await self._run_checkpoint(*snapshot)
        except Exception:
            if self._outage_since is not None:
                return  # the broker did not answer: the worker went back to the last checkpoint (streams.worker.outage)
            raise
        if fenced:  # not here: a rebalance handler holding the lock may be waiting for this checkpoint
            asyncio.ensure_future(self._lose_later(fenced, epoch))

    async def _lose_later(self, partitions: set[int], epoch: int) -> None:
        async with self._lock:
            if self._reader.epoch == epoch:  # no rebalance has dropped the states meanwhile
                self._lose(partitions)

    async def _run_checkpoint(self, outputs: list[asyncio.Future], handled: dict[Any, int],
                              expired: dict[bytes, int]) -> set[int]:
        """Steps (a), (b), (c) of the module docstring; returns the partitions whose writer was fenced.

        A failure other than a fence crashes the worker.
        """
        started = time.perf_counter()
        try:
            writes = self._fitting(await self.states.encode_snapshot())
            await _all_acknowledged(outputs)  # (a) every record published so far acknowledged
            by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
            written = set()
            for key, value, partition in writes:
                by_partition.setdefault(partition, []).append((key, value))
                written.add(key)
            for key, partition in expired.items():  # a key changed again since its expiry keeps its state
                if key not in written:
                    by_partition.setdefault(partition, []).append((key, None))
            offsets: dict[int, dict[TopicPartition, int]] = {}
            for tp, offset in handled.items():
                offsets.setdefault(tp.partition, {})[TopicPartition(tp.topic, tp.partition)] = offset + 1
            partitions = sorted(by_partition.keys() | offsets.keys())
            room = asyncio.Semaphore(PARALLEL_TRANSACTIONS)

            async def commit(partition: int) -> None:
                async with room:
                    await self._commit_partition(partition, by_partition.get(partition, []), offsets.get(partition, {}))

            # (b) and (c), one transaction per partition
            results = await asyncio.gather(*(commit(p) for p in partitions), return_exceptions=True)
            fenced = set()
            for partition, result in zip(partitions, results):
                if isinstance(result, BaseException):
                    if not is_fenced(result):
                        raise result
                    fenced.add(partition)
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError):
                self._fail(exc)
            raise
        metrics.CHECKPOINT_SECONDS.observe(time.perf_counter() - started)
        self._tend_gc()
        return fenced

    async def _commit_partition(self, partition: int, records: list[tuple[bytes, bytes | None]],
                                offsets: dict[TopicPartition, int]) -> None:
        """Write ``records`` to changelog ``partition`` and commit ``offsets``, in one transaction of its writer.

        Raises :class:`~streams.worker.fencing.Fenced` (or aiokafka's
        ``ProducerFenced``) if another worker has started a writer for the
        partition since: nothing of the transaction is then visible.
        """
        writer = self._writers.get(partition)  # Fenced if none, or if its last transaction did not end
        try:
            await writer.begin_transaction()
            batches = await self.table.write(Outputs(writer, self._changelog_partitions), partition, records)
            await _acknowledged_in_transaction(writer, [future for _, future in batches])
            if offsets:
                await writer.send_offsets_to_transaction(offsets, self.app.conf.id)
            await writer.commit_transaction()
        except BaseException as exc:
            if transaction_state(writer) != "READY":
                # its transaction did not end (fenced, cancelled, failed): a checkpoint started before the
                # partition is handled as lost (_lose_later waits for the lock) must not begin another on it
                self._writers.retire(partition, writer)
            if _fenced_writer(writer) or _state_refused(exc):
                raise Fenced(f"changelog partition {partition}: another worker owns it now, or its writer's "
                             f"transaction state is broken ({transaction_state(writer)})") from exc
            raise
        self.table.store_committed(partition, batches)

    def _lose(self, partitions: set[int]) -> None:
        """This worker's writers were fenced: it may no longer own its partitions (lock held).

        Either it was removed from the group (paused or cut off past the
        session timeout) and learns it only now, or a transaction of its
        outlived ``transaction_timeout_s`` (the worker or the broker stalled)
        and the transaction coordinator aborted it. It forgets every in-memory
        state and stops reading until the group assigns it partitions again,
        which it asks for itself in the second case
        (:meth:`streams.worker.outage.Outages._rejoin_if_still_assigned`).
        """
        log.warning("loopwatch: the writers of partitions %s were fenced (another worker owns them now, or a "
                    "transaction outlived transaction_timeout_s): their states here are dropped until the next "
                    "assignment", ", ".join(map(str, sorted(partitions))))
        metrics.FENCED.inc(len(partitions))
        self._writers.renew()
        self._drop()
        self._reader.revoke()
        self._rejoin_if_still_assigned(partitions)

    def _tend_gc(self) -> None:
        """Keep the cyclic GC off the long-lived states (see ``WorkerSettings.gc_full_interval_s``).

        States are freed by reference counting when they expire; what the
        freeze hides from the collector is only cyclic garbage among objects
        that were alive at a checkpoint, collected by the periodic full pass.
        """
        interval = self.settings.gc_full_interval_s
        if not interval:
            return
        now = time.monotonic()
        if now - self._gc_full_at >= interval:
            self._gc_full_at = now
            objects = gc.get_freeze_count()
            gc.unfreeze()
            found = gc.collect()
            took = time.monotonic() - now
            # the event loop stands still meanwhile: a pause that long shows in every partition's latency
            log.log(logging.WARNING if took >= _GC_PAUSE_NOTE_S else logging.DEBUG,
                    "loopwatch: full garbage collection over %d objects took %.2f s (%d unreachable)",
                    objects, took, found)
        gc.freeze()

    def _fail(self, exc: BaseException) -> None:
        if is_broker_trouble(exc) and not self.app.should_stop:
            self._enter_outage(exc)  # back to the last checkpoint, on once Kafka answers (streams.worker.outage)
            return
        if self._failed is None:
            self._failed = exc
            log.error("loopwatch: checkpoint failed, stopping (a restart resumes from the last checkpoint): %r",
                      exc)
            asyncio.ensure_future(self.app.crash(exc))

    async def _checkpoint_tick(self) -> None:
        async with self._lock:
            self._start_checkpoint(due_only=True)

    async def _wait_checkpoint(self) -> None:
        if self._checkpoint is not None:
            await asyncio.wait([self._checkpoint])
            self._checkpoint = None

    async def _final_checkpoint(self) -> set[int]:
        """Wait for the checkpoint in flight, then checkpoint everything (lock held by the caller)."""
        await self._wait_checkpoint()
        if self._tainted:
            log.warning("loopwatch: no final checkpoint (a batch failed half-way): the events since the last "
                        "checkpoint are applied again after it, their verdicts published again")
            return set()
        if self._failed is None and (self._handled or self._outputs or self._dirty or self._expired):
            return await self._run_checkpoint(*self._snapshot())
        return set()


async def _all_acknowledged(futures: list[asyncio.Future]) -> None:
    """Await ``futures`` one after the other; raises the first failure.

    Per partition the broker acknowledges batches in order, so most are done
    by the time the first is: cheaper than gathering hundreds of futures.
    The failures of those not awaited count as seen (:func:`_failures_seen`).
    """
    for index, future in enumerate(futures):
        try:
            await future
        except BaseException:
            _failures_seen(futures[index + 1:])
            raise


def _take(pending: dict, wanted: Any) -> dict:
    """Remove and return the items of ``pending`` whose key is ``wanted``."""
    taken = {key: value for key, value in pending.items() if wanted(key)}
    for key in taken:
        del pending[key]
    return taken


def _failures_seen(futures: list[asyncio.Future]) -> None:
    """Mark the failures of ``futures`` (now or when they end) as seen: the worker reported the first
    one, and asyncio would log each other as "Future exception was never retrieved"."""
    for future in futures:
        future.add_done_callback(_see_failure)


async def _acknowledged_in_transaction(writer: Any, futures: list[asyncio.Future]) -> None:
    """Await the batches ``writer`` sends in its transaction; raises the first failure, or the writer's.

    A writer that was fenced stops sending (aiokafka fails its transaction,
    not the batches waiting to be sent), so its state is looked at between waits.
    """
    pending = set(futures)
    while pending:
        done, pending = await asyncio.wait(pending, timeout=_TRANSACTION_POLL_S)
        for future in done:
            if future.exception() is not None:
                _failures_seen(list(pending))
                raise future.exception()  # type: ignore[misc]
        manager = writer._txn_manager  # aiokafka internals: the transaction state machine and its last error
        if pending and manager.is_fatal_error():
            _failures_seen(list(pending))
            waiter = manager._transaction_waiter
            raise waiter.exception() if waiter.done() and waiter.exception() else KafkaError(
                "the changelog writer failed")


def _fenced_writer(writer: Any) -> bool:
    """Whether ``writer`` (a transactional producer) has failed for good because a newer epoch fenced it."""
    manager = writer._txn_manager  # aiokafka internals: the transaction state machine and its last error
    waiter = manager._transaction_waiter
    if manager.is_fatal_error() and waiter.done() and not waiter.cancelled():
        return is_fenced(waiter.exception())
    return False


def _state_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is aiokafka's transaction state machine refusing a step (it asserts)."""
    return isinstance(exc, AssertionError) and str(exc).startswith("Invalid state transition")


def _see_failure(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()

