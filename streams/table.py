"""The worker's state table: a Faust table written a batch of keys at a time.

Key = state key (bytes), value = ``SessionState`` bytes
(:func:`streams.processor.encode_state`); the changelog partition of each key
is the input partition its events come from, given explicitly by the writer.

Works with both of the worker's stores (``--store``):

* ``memory://``: a dict, rebuilt from the whole changelog at every start;
* ``rocksdb://``: Faust's RocksDB store (driver: ``rocksdict``, the
  ``rocksdb`` extra), one database per changelog partition under the data
  directory, each holding the offset of the last changelog record written to
  it; at start only the changelog records after that offset are read.

Faust writes a table key from a stream only (``table[key] = value`` takes the
partition of the current event; the RocksDB store asserts one). This worker
writes whole checkpoints outside any stream, so for RocksDB the writes,
deletes and offsets go straight to the partition's database (see
:meth:`StateTable._partition_db`).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Iterable, Set

import faust
from faust.stores import rocksdb as rocksdb_store  # imports without the bindings too
from faust.types import TP

__all__ = ["StateTable"]


class StateTable(faust.Table):
    """A Faust table written in batches, with explicit partitions, whose keys' partitions are known.

    Attributes:
        key_partitions: state key -> changelog partition, for every key in the
            local store (for RocksDB: rebuilt from its databases after each
            recovery, since a restart reads only the newer changelog records).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_partitions: dict[bytes, int] = {}

    def _partition_db(self, partition: int) -> Any:
        """The RocksDB database of changelog ``partition``, or None for another store.

        The database is a ``rocksdict.Rdict`` (a ``rocksdb.DB`` with Faust's
        ``python-rocksdb`` driver), raw bytes keys and values; opening it raises
        the driver's error if it cannot be opened (e.g. locked by another
        worker using the same data directory).

        Faust internals: ``Store._db_for_partition`` opens the database on first
        use; ``Store._key_index`` (key -> partition, an LRU) is what the store's
        own ``__setitem__`` fills so that a read outside a stream looks in one
        database instead of all.
        """
        store = self.data
        if not isinstance(store, rocksdb_store.Store):
            return None
        return store._db_for_partition(partition)

    async def put_many(self, items: Iterable[tuple[bytes, bytes, int]]) -> list[asyncio.Future]:
        """Set each ``(key, value, partition)`` and send its changelog record to ``partition``.

        Returns the sends' futures (resolved when the broker acknowledged them).
        Unlike ``table[key] = value``, which takes the partition of the stream's
        current event and goes through Faust's per-message send buffer, this
        writes the keys of a whole batch of events, straight to the producer.

        The memory store is written at once. A RocksDB database is written
        only when the broker has acknowledged the changelog record (with the
        changelog offset, in the same callback): a database is never ahead of
        the changelog, so a restart from it and another worker restoring the
        changelog hold the same states. Until then ``get`` returns the older
        value (the worker reads the table only after its checkpoint is
        acknowledged).
        """
        producer = await self.app.maybe_start_producer()
        send = producer.send
        topic = self.changelog_topic.get_topic_name()
        data, partitions, persisted = self.data, self.key_partitions, self._persisted
        futures = []
        for key, value, partition in items:
            rocks = self._partition_db(partition) is not None
            if not rocks:
                data[key] = value
                # Faust internals: the memory store's key -> partition map, by which it
                # forgets the keys of partitions no longer assigned after a rebalance
                data._key_partition[key] = partition
            partitions[key] = partition
            future = await send(topic, key, value, partition, None, None)
            if rocks:
                future.add_done_callback(functools.partial(self._put_acknowledged, key, value, partition))
            future.add_done_callback(persisted)
            futures.append(future)
        return futures

    def _put_acknowledged(self, key: bytes, value: bytes, partition: int, future: asyncio.Future) -> None:
        # runs before _persisted (callbacks run in the order added): the value, then its offset
        if future.cancelled() or future.exception() is not None:
            return
        # raw bytes key and value: what Store._set would write, in the right database
        self._partition_db(partition).put(key, value)
        self.data._key_index[key] = partition

    def _persisted(self, future: asyncio.Future) -> None:
        # What Table._on_changelog_sent does for a FutureMessage: keep the changelog
        # offset of the stored data (RocksDB writes it into the partition's database
        # and at start reads the changelog only after it).
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

    def expire(self, key: bytes, partition: int) -> None:
        """Delete ``key`` from the local store and write its tombstone to changelog ``partition``."""
        db = self._partition_db(partition)
        if db is None:
            self.data.pop(key, None)
            self.data._key_partition.pop(key, None)
        else:
            db.delete(key)
            self.data._key_index.pop(key, None)
        self.key_partitions.pop(key, None)
        # Table._on_changelog_sent, its callback, stores the tombstone's offset as persisted.
        self.send_changelog(partition, key, None, value_serializer="raw")
