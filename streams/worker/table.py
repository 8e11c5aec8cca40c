"""The worker's state table: a Faust table written a batch of keys at a time.

Key = state key (bytes), value = ``SessionState`` bytes
(:func:`streams.worker.states.encode_state`); the changelog partition of each key
is the input partition its events come from, given explicitly by the writer.

Works with both of the worker's stores (``--store``):

* ``memory://``: a dict, rebuilt from the whole changelog at every start;
* ``rocksdb://``: Faust's RocksDB store (driver: ``rocksdict``, the
  ``rocksdb`` extra), one database per changelog partition under the data
  directory, each holding the offset of the last changelog record written to
  it; at start only the changelog records after that offset are read.

With either store, each rebalance first reads the assigned changelog
partitions past what the store holds in bulk (:mod:`streams.worker.restore`,
actives first, then standbys; into RocksDB one write batch per fetch, through
the store's own ``apply_changelog_batch``), so that Faust's recovery, a record
at a time, finds little or nothing left to read, and the active partitions
the bulk read brought to their ends are served at once
(:attr:`StateTable.caught_up`).

Faust writes a table key from a stream only (``table[key] = value`` takes the
partition of the current event; the RocksDB store asserts one). This worker
writes whole checkpoints outside any stream, so for RocksDB the writes,
deletes and offsets go straight to the partition's database (see
:meth:`StateTable._write_local`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Iterable, Set

import faust
from aiokafka import TopicPartition
from faust.stores import memory as memory_store
from faust.stores import rocksdb as rocksdb_store  # imports without the bindings too
from faust.types import TP
from yarl import URL

from streams.wire.brokers import bootstrap_servers

from .outputs import Outputs
from .restore import Restorer

__all__ = ["CHANGELOG_TOPIC_CONFIG", "MemoryStore", "MemoryStoreTable", "StateTable"]

log = logging.getLogger(__name__)


class MemoryStore(memory_store.Store):
    """Faust's memory store, knowing the changelog offset of what it holds, and keeping standby partitions.

    Faust's own forgets every partition that is not active once a recovery
    completes, standbys included, and has no persisted offset, so each
    partition newly assigned (a failover) or kept across a rebalance was read
    again from the changelog's start: standby replicas were of no use and a
    rebalance's pause grew with the changelog. This one keeps, per changelog
    partition, the offset of the last record it holds (from the changelog
    records it applied and the committed writes,
    :meth:`StateTable.store_committed`) and the keys of active and standby
    partitions: Faust's recovery then reads only the records after that
    offset. What it holds of a partition is always the changelog up to that
    offset (records are applied in changelog order, committed ones only), so
    a partition that comes back after another worker wrote to it is brought
    up to date by the records that follow.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self._offsets: dict[TP, int] = {}

    def persisted_offset(self, tp: TP) -> int | None:
        return self._offsets.get(tp)

    def set_persisted_offset(self, tp: TP, offset: int) -> None:
        self._offsets[tp] = offset

    def apply_changelog_batch(self, batch: Iterable[Any], to_key: Callable[[Any], Any],
                              to_value: Callable[[Any], Any]) -> None:
        """Faust's, for the records past what the store holds only: one Faust's recovery had queued before a
        bulk read (:meth:`apply_records`) went further is older than what the store holds, and skipped."""
        offsets, fresh = self._offsets, []
        for event in batch:
            message = event.message
            if message.offset > offsets.get(message.tp, -1):
                offsets[message.tp] = message.offset
                fresh.append(event)
        super().apply_changelog_batch(fresh, to_key, to_value)

    def apply_records(self, tp: TP, records: list[Any]) -> None:
        """Apply changelog ``records`` of ``tp`` (aiokafka ``ConsumerRecord``s, raw bytes, in offset order, all
        after :meth:`persisted_offset`) as Faust's recovery would, and keep the last one's offset."""
        data, partitions, partition = self.data, self._key_partition, tp.partition
        for record in records:
            if record.value is None:
                data.pop(record.key, None)
                partitions.pop(record.key, None)
            else:
                data[record.key] = record.value
                partitions[record.key] = partition
        self._offsets[tp] = max(records[-1].offset, self._offsets.get(tp, -1))

    async def on_recovery_completed(self, active_tps: Set[TP], standby_tps: Set[TP]) -> None:
        kept = {tp.partition for tp in (*active_tps, *standby_tps)}
        for key in [key for key, partition in self._key_partition.items() if partition not in kept]:
            self.data.pop(key, None)
            self._key_partition.pop(key, None)
        self._offsets = {tp: offset for tp, offset in self._offsets.items() if tp.partition in kept}


# Changelog topic settings that let Kafka's cleaner act on a running system. With the broker's defaults
# (segment.bytes 1 GiB, segment.ms 7 days) the active segment, which compaction and retention never touch,
# held every record a worker wrote for days: a restore re-read the history, not the live state.
# segment.ms / segment.bytes: a segment rolls every 10 min (or 64 MiB), after which it can be cleaned;
# min.cleanable.dirty.ratio: compact once a tenth of the log is superseded records (Kafka's: half);
# delete.retention.ms: how long a tombstone stays readable (a restore taking longer could miss one).
CHANGELOG_SEGMENT_MS = 600_000
CHANGELOG_TOPIC_CONFIG = {
    "segment.ms": str(CHANGELOG_SEGMENT_MS),
    "segment.bytes": str(64 * 1024 * 1024),
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": str(3_600_000),
}


class MemoryStoreTable(faust.Table):
    """A Faust table whose ``memory://`` store is :class:`MemoryStore` (persisted offsets, standbys kept)."""

    def _new_store_by_url(self, url: Any) -> Any:
        if URL(str(url)).scheme != "memory":
            return super()._new_store_by_url(url)
        return MemoryStore(url, self.app, self, table_name=self.name, key_type=self.key_type,
                           key_serializer=self.key_serializer, value_serializer=self.value_serializer,
                           value_type=self.value_type, loop=self.loop, options=self.options)


class StateTable(MemoryStoreTable):
    """A Faust table written in batches, with explicit partitions, whose keys' partitions are known.

    Attributes:
        key_partitions: state key -> changelog partition, for every key in the
            local store (for RocksDB: rebuilt from its databases after each
            recovery, since a restart reads only the newer changelog records).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_partitions: dict[bytes, int] = {}
        # awaited at each assignment before the recovery of its partitions starts (the worker fences
        # the partitions' former owners there, streams.worker.fencing)
        self.before_recovery: Callable[[int], Awaitable[None]] | None = None
        self._restorer: Restorer | None = None  # the memory store's bulk reads, made at the first rebalance
        # The active partitions of the current assignment whose store holds their changelog up to its end
        # (the bulk read brought them there): what Faust's recovery would read of them is nothing.
        self.caught_up: set[int] = set()

    async def write(self, out: Outputs, partition: int,
                    records: list[tuple[bytes, bytes | None]]) -> list[tuple[list[tuple[bytes, bytes | None]], Any]]:
        """Send ``records`` (``(key, state bytes)``, or ``(key, None)``: a tombstone) to changelog ``partition``.

        Arguments:
            out: the batches of the partition's changelog writer (a
                transactional producer inside a transaction, see
                :mod:`streams.worker.fencing`); a key's later record wins.
            partition: the changelog partition (= the input partition of the keys' events).
            records: the writes, in order.
        Returns ``(records, future)`` per producer batch; the future resolves
        to the batch's ``RecordMetadata`` when the broker acknowledged it.
        Unlike ``table[key] = value``, which takes the partition of the
        stream's current event and sends one record at a time, this writes the
        keys of a whole checkpoint, one producer batch at a time.

        The local store (memory or RocksDB) takes the records only once their
        transaction has committed (:meth:`store_committed`), with the
        changelog offset: the store is never ahead of the committed changelog,
        so a restart from it and another worker restoring the changelog hold
        the same states. Until then ``get`` returns the older value (the
        worker reads the table only on a cache miss: after a rebalance, once
        its checkpoint committed, or for a key expired a moment ago, whose
        state it then takes back).
        """
        topic, partitions = self.changelog_topic.get_topic_name(), self.key_partitions
        for key, value in records:
            if value is None:
                partitions.pop(key, None)
            else:
                partitions[key] = partition
            out.add_to(topic, partition, key, value)
        batches, rest = [], records
        for _, count, future in await out.send_batches():
            batch, rest = rest[:count], rest[count:]
            batches.append((batch, future))
        return batches

    def forget(self, key: bytes) -> None:
        """Drop ``key`` from :attr:`key_partitions` (expired: its tombstone goes with the next checkpoint)."""
        self.key_partitions.pop(key, None)

    def store_committed(self, partition: int, batches: list[tuple[list[tuple[bytes, bytes | None]], Any]]) -> None:
        """The local store takes the records of :meth:`write`'s ``batches``, committed, then their offset.

        With RocksDB, a partition revoked meanwhile is left to the changelog:
        writing it would reopen the revoked partition's database, and whoever
        restores the partition next reads the records from the changelog after
        the database's persisted offset. (The memory store takes them: its
        keys of unassigned partitions go when the next recovery completes.) A
        local write that fails crashes the worker: a store behind the
        changelog would hand stale states to the next cache miss.
        """
        try:
            for records, future in batches:
                self._write_local(partition, records, future.result())
        except Exception as exc:
            log.error("loopwatch: cannot write committed states to the local store: %r", exc)
            asyncio.ensure_future(self.app.crash(exc))

    def _write_local(self, partition: int, records: list[tuple[bytes, bytes | None]], meta: Any) -> None:
        """Write acknowledged ``records`` of changelog ``partition`` (base offset ``meta.offset``) to the local store.

        For RocksDB into the partition's database (a ``rocksdict.Rdict``, raw
        bytes keys and values), nothing if the partition is no longer assigned.
        """
        store = self.data
        if isinstance(store, rocksdb_store.Store):
            # Faust internals: Store._dbs holds the databases of the assigned partitions (opened at
            # assignment, removed at revocation; Store._db_for_partition would open a missing one);
            # Store._key_index (key -> partition) is what the store's own __setitem__ fills so that
            # a read outside a stream looks in one database instead of all.
            db = store._dbs.get(partition)
            if db is None:
                return
            key_index = store._key_index
            for key, value in records:  # what Store._set/_del would write, in the right database
                if value is None:
                    db.delete(key)
                    key_index.pop(key, None)
                else:
                    db.put(key, value)
                    key_index[key] = partition
        else:
            # Faust internals: the memory store's key -> partition map, by which it forgets
            # the keys of partitions no longer assigned once a rebalance's recovery completes
            key_partition = store._key_partition
            for key, value in records:
                if value is None:
                    store.pop(key, None)
                    key_partition.pop(key, None)
                else:
                    store[key] = value
                    key_partition[key] = partition
        # What Table._on_changelog_sent does: keep the changelog offset of the stored data
        # (RocksDB writes it into the partition's database and at start reads the changelog
        # only after it).
        store.set_persisted_offset(meta.topic_partition, meta.offset + len(records) - 1)

    async def on_rebalance(self, assigned: Set[TP], revoked: Set[TP], newly_assigned: Set[TP],
                           generation_id: int = 0) -> None:
        """Faust's table rebalance (before the recovery of the assigned partitions), after :attr:`before_recovery`."""
        self.caught_up = set()
        if self.before_recovery is not None:
            await self.before_recovery(generation_id)
        await self._read_ahead()
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)

    async def _read_ahead(self) -> None:
        """Bring the store's assigned changelog partitions (actives, then standbys) up to their ends in bulk
        (:class:`streams.worker.restore.Restorer`), before Faust's recovery takes their persisted offsets as
        its starting points; :attr:`caught_up` = the active ones it brought there."""
        store = self.data
        if not isinstance(store, (MemoryStore, rocksdb_store.Store)):
            return
        if self._restorer is None:
            broker = ",".join(str(url) for url in self.app.conf.broker)
            self._restorer = Restorer(bootstrap_servers(broker), f"{self.app.conf.id}-{self.name}-restore",
                                      getattr(self.app.transport, "backoff", None))
        topic = self.changelog_topic.get_topic_name()
        assignor = self.app.assignor
        actives, standbys = ({TopicPartition(tp.topic, tp.partition): _after(store.persisted_offset(tp))
                              for tp in tps if tp.topic == topic}
                             for tps in (assignor.assigned_actives(), assignor.assigned_standbys()))
        restored = await self._restorer.read([actives, standbys], self._apply_records)
        self.caught_up = {tp.partition for tp in restored.caught_up if tp in actives}

    def _apply_records(self, tp: TopicPartition, records: list[Any]) -> None:
        store = self.data
        if isinstance(store, MemoryStore):
            store.apply_records(TP(tp.topic, tp.partition), records)
        else:  # RocksDB: its own recovery step (one write batch into the partition's database, then the offset)
            store.apply_changelog_batch([_ChangelogEvent(TP(tp.topic, tp.partition), record) for record in records],
                                        to_key=None, to_value=None)
        partitions = self.key_partitions
        for record in records:
            if record.value is None:
                partitions.pop(record.key, None)
            else:
                partitions[record.key] = tp.partition

    async def on_stop(self) -> None:
        await super().on_stop()
        if self._restorer is not None:
            await self._restorer.close()

    def apply_changelog_batch(self, batch: Iterable[Any]) -> None:
        batch = list(batch)
        super().apply_changelog_batch(batch)
        # the memory store skips records older than what it holds: the keys' partitions follow what it holds
        held = self.data.data if isinstance(self.data, MemoryStore) else None
        for event in batch:
            key = event.message.key
            if (key not in held) if held is not None else event.message.value is None:
                self.key_partitions.pop(key, None)
            else:
                self.key_partitions[key] = event.message.partition

    async def on_recovery_completed(self, active_tps: Set[TP], standby_tps: Set[TP]) -> None:
        """After recovery, for RocksDB: ``key_partitions`` = the keys of the assigned partitions' open databases."""
        await super().on_recovery_completed(active_tps, standby_tps)
        store = self.data
        if not isinstance(store, rocksdb_store.Store):
            # the memory store has just forgotten the keys of partitions not assigned
            self.key_partitions = {key: partition for key, partition in self.key_partitions.items()
                                   if key in store}
        else:
            # Faust internals: Store._dbs (partition -> database) holds the databases opened
            # (actives at assignment, standbys when their changelog is read), revoked ones
            # removed; Store._visible_keys skips the store's offset key.
            assigned = {tp.partition for tp in (*active_tps, *standby_tps)}
            self.key_partitions = {
                key: partition
                for partition, db in list(store._dbs.items()) if partition in assigned
                for key in store._visible_keys(db)
            }


class _ChangelogEvent:
    """What Faust's ``Store.apply_changelog_batch`` reads of a changelog event: ``event.message`` with ``tp``,
    ``partition``, ``offset``, ``key`` and ``value`` (raw bytes; RocksDB's ignores ``to_key``/``to_value``)."""

    __slots__ = ("message",)

    def __init__(self, tp: TP, record: Any) -> None:
        self.message = _ChangelogMessage(tp, record)


class _ChangelogMessage:
    __slots__ = ("tp", "partition", "offset", "key", "value")

    def __init__(self, tp: TP, record: Any) -> None:
        self.tp, self.partition, self.offset = tp, tp.partition, record.offset
        self.key, self.value = record.key, record.value


def _after(offset: int | None) -> int:
    """The first changelog offset a store that holds the records up to ``offset`` (None: nothing) lacks."""
    return 0 if offset is None else offset + 1
