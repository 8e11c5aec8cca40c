"""The worker's state table: a Faust table written a batch of keys at a time.

Key = state key (bytes), value = ``SessionState`` bytes
(:func:`streams.worker.processor.encode_state`); the changelog partition of each key
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
:meth:`StateTable._write_local`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, Iterable, Set

import faust
from faust.stores import rocksdb as rocksdb_store  # imports without the bindings too
from faust.types import TP

from .outputs import Outputs

__all__ = ["StateTable"]

log = logging.getLogger(__name__)


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
        self._queued: dict[int, list[tuple[bytes, bytes | None]]] = {}  # partition -> records in `out`, not sent

    async def put_many(self, items: Iterable[tuple[bytes, bytes, int]], out: Outputs) -> list[asyncio.Future]:
        """Set each ``(key, value, partition)`` and send its changelog record to ``partition``.

        Arguments:
            items: the writes, in order (a key's later write wins).
            out: the batches of the producer that writes the changelog; every
                changelog record goes through it (:meth:`expire` too), so a
                key's records reach the changelog in the order written.
        Returns the futures of the changelog batches (resolved when the broker
        acknowledged them). Unlike ``table[key] = value``, which takes the
        partition of the stream's current event and sends one record at a
        time, this writes the keys of a whole checkpoint, one producer batch
        per partition.

        The local store (memory or RocksDB) takes a record only when the
        broker has acknowledged its batch, with the changelog offset, in the
        same callback: the store is never ahead of the changelog, so a restart
        from it and another worker restoring the changelog hold the same
        states, and a tombstone and a later write of its key land in the
        store in changelog order. Until then ``get`` returns the older value
        (the worker reads the table only on a cache miss: after a rebalance,
        once its checkpoint is acknowledged, or for a key expired a moment
        ago, whose state it then takes back; its next write follows the
        tombstone).
        """
        partitions = self.key_partitions
        for key, value, partition in items:
            partitions[key] = partition
            self._queue(out, key, value, partition)
        return await self.send(out)

    def expire(self, key: bytes, partition: int, out: Outputs) -> None:
        """Queue the tombstone of ``key`` for changelog ``partition`` in ``out`` (sent by :meth:`send`).

        The key leaves :attr:`key_partitions` at once and the local store when
        the tombstone is acknowledged (see :meth:`put_many`).
        """
        self.key_partitions.pop(key, None)
        self._queue(out, key, None, partition)

    def _queue(self, out: Outputs, key: bytes, value: bytes | None, partition: int) -> None:
        out.add_to(self.changelog_topic.get_topic_name(), partition, key, value)
        self._queued.setdefault(partition, []).append((key, value))

    async def send(self, out: Outputs) -> list[asyncio.Future]:
        """Send the records queued in ``out`` (writes and tombstones); the futures of their batches."""
        queued, self._queued = self._queued, {}
        futures = []
        for (_, partition), count, future in await out.send_batches():
            records = queued[partition]
            batch, queued[partition] = records[:count], records[count:]
            future.add_done_callback(functools.partial(self._acknowledged, partition, batch))
            futures.append(future)
        return futures

    def _acknowledged(self, partition: int, records: list[tuple[bytes, bytes | None]],
                      future: asyncio.Future) -> None:
        """A changelog batch is acknowledged: the local store takes its records, then their offset.

        With RocksDB, a batch acknowledged after its partition was revoked (the
        worker is failing, or lost the partition while a failed checkpoint's
        batches were still in flight) is left to the changelog: writing it
        would reopen the revoked partition's database, and whoever restores the
        partition next reads the record from the changelog after the database's
        persisted offset, which the skip leaves behind it. (The memory store
        takes it: its keys of unassigned partitions go when the next recovery
        completes.) A local write that fails crashes the worker: a store behind
        the changelog would hand stale states to the next cache miss.
        """
        if future.cancelled() or future.exception() is not None:
            return
        try:
            self._write_local(partition, records, future.result())
        except Exception as exc:
            log.error("loopwatch: cannot write acknowledged states to the local store: %r", exc)
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
