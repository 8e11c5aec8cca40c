"""The bulk changelog read (streams.worker.restore) gives a memory store exactly what Faust's recovery would.

A changelog written as the worker writes it (transactions, one aborted, a
tombstone, a non-transactional record as the fleet view's), then read into a
:class:`~streams.worker.table.MemoryStore` in bulk: committed records only, in
order, the last one's offset kept; read again from that offset, nothing; a
broker that does not answer or a budget of nothing leaves the store as it
was, without an error.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from types import SimpleNamespace

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from faust.types import TP

from streams.worker.restore import Restorer
from streams.worker.table import MemoryStore
from tests.worker_harness import create_topics

pytestmark = [pytest.mark.kafka]


def _store() -> MemoryStore:
    return MemoryStore("memory://", SimpleNamespace(conf=SimpleNamespace(), tables=None), SimpleNamespace(name="t"))


async def _write_changelog(bootstrap: str, topic: str) -> None:
    """Partition 0: k1=A (committed), k1=BAD and k4=BAD (aborted), k2 tombstoned then k3=C (committed),
    k5=E without a transaction, k1=A2 (committed)."""
    writer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-writer", enable_idempotence=True)
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await writer.start()
    await plain.start()
    try:
        for records, commit in (([(b"k1", b"A"), (b"k2", b"B")], True), ([(b"k1", b"BAD"), (b"k4", b"BAD")], False),
                                ([(b"k2", None), (b"k3", b"C")], True)):
            async with writer.transaction() if commit else _aborted(writer):
                for key, value in records:
                    await writer.send(topic, value, key=key, partition=0)
        await (await plain.send(topic, b"E", key=b"k5", partition=0))
        async with writer.transaction():
            await writer.send(topic, b"A2", key=b"k1", partition=0)
    finally:
        await writer.stop()
        await plain.stop()


class _aborted:
    def __init__(self, producer: AIOKafkaProducer) -> None:
        self.producer = producer

    async def __aenter__(self) -> None:
        await self.producer.begin_transaction()

    async def __aexit__(self, *exc: object) -> None:
        await self.producer.abort_transaction()


async def _changelog(bootstrap: str) -> TopicPartition:
    """A fresh one-partition topic holding :func:`_write_changelog`'s records."""
    topic = f"test.lw.restore.{uuid.uuid4().hex[:6]}"
    await create_topics(bootstrap, [topic], 1)
    await _write_changelog(bootstrap, topic)
    return TopicPartition(topic, 0)


def test_a_bulk_read_applies_the_committed_records_in_order_and_keeps_the_offset(kafka_bootstrap):
    async def run() -> tuple:
        tp = await _changelog(kafka_bootstrap)
        store, seen = _store(), []
        restorer = Restorer(kafka_bootstrap, "lw-test-restore")

        def apply(at: TopicPartition, records: list) -> None:
            seen.extend((record.offset, record.key, record.value) for record in records)
            store.apply_records(TP(at.topic, at.partition), records)

        try:
            first = await restorer.read({tp: 0}, apply)
            held, offset = dict(store.data), store.persisted_offset(TP(tp.topic, 0))
            again = await restorer.read({tp: offset + 1}, apply)  # what a rebalance that kept it reads
        finally:
            await restorer.close()
        return tp, first, held, offset, again, seen, dict(store._key_partition)

    tp, first, held, offset, again, seen, partitions = asyncio.run(run())
    assert [(key, value) for _, key, value in seen] == [
        (b"k1", b"A"), (b"k2", b"B"), (b"k2", None), (b"k3", b"C"), (b"k5", b"E"), (b"k1", b"A2")]
    assert held == {b"k1": b"A2", b"k3": b"C", b"k5": b"E"} and partitions == {b"k1": 0, b"k3": 0, b"k5": 0}
    assert first.records == {tp: 6} and again.records == {tp: 0}
    assert first.caught_up == again.caught_up == {tp}  # at its end: read to it, then nothing left to read
    assert offset == seen[-1][0] and offset > 6  # past the markers and the aborted records, which are never applied


def test_a_bulk_read_that_cannot_finish_leaves_the_store_to_fausts_recovery(kafka_bootstrap, caplog, logs_of):
    async def run() -> tuple:
        tp = await _changelog(kafka_bootstrap)
        store = _store()
        apply = lambda at, records: store.apply_records(TP(at.topic, at.partition), records)  # noqa: E731
        nobody = Restorer("127.0.0.1:1", "lw-test-restore", budget_s=3.0)  # no broker answers there
        nothing = Restorer(kafka_bootstrap, "lw-test-restore", budget_s=0.0)
        try:
            unreachable = await nobody.read({tp: 0}, apply)
            no_time = await nothing.read({tp: 0}, apply)
        finally:
            await nobody.close()
            await nothing.close()
        return tp, unreachable, no_time, dict(store.data), store.persisted_offset(TP(tp.topic, 0))

    logs_of("streams.worker.restore", logging.WARNING)
    tp, unreachable, no_time, held, offset = asyncio.run(run())
    assert unreachable.records == no_time.records == {tp: 0} and held == {} and offset is None
    assert unreachable.caught_up == no_time.caught_up == set()  # served only once Faust's recovery has read it
    messages = [record.getMessage() for record in caplog.records]
    assert any("bulk changelog read failed after 0 records" in m for m in messages), messages
    assert any("bulk changelog read stopped after 0.0 s with 0 records read" in m for m in messages), messages


def test_a_bulk_read_into_rocksdb_writes_the_partitions_database_and_its_offset(kafka_bootstrap, tmp_path):
    # The RocksDB store takes the same records through its own recovery step (one write batch per fetch): the
    # partition's database then holds what Faust's recovery of the changelog would have left, and its offset.
    pytest.importorskip("rocksdict")
    import faust

    from streams.worker.table import StateTable

    async def run() -> tuple:
        tp = await _changelog(kafka_bootstrap)
        app = faust.App("lw-test-restore-rocksdb", datadir=str(tmp_path), store="rocksdb://", autodiscover=False,
                        key_serializer="raw", value_serializer="raw")
        table = StateTable(app, name="states", default=None, key_type=bytes, value_type=bytes, partitions=1)
        restorer = Restorer(kafka_bootstrap, "lw-test-restore")
        try:
            read = await restorer.read({tp: 0}, table._apply_records)
        finally:
            await restorer.close()
        store = table.data
        db = store._db_for_partition(0)  # Faust's RocksDB store: one database per changelog partition
        held = {key: db.get(key) for key in (b"k1", b"k2", b"k3", b"k4", b"k5")}
        offset = store.persisted_offset(TP(tp.topic, 0))
        ends = await _end_offset(kafka_bootstrap, tp)
        return tp, read, held, offset, ends, dict(table.key_partitions)

    tp, read, held, offset, end, partitions = asyncio.run(run())
    assert read.records == {tp: 6} and read.caught_up == {tp}
    assert held == {b"k1": b"A2", b"k2": None, b"k3": b"C", b"k4": None, b"k5": b"E"}
    assert partitions == {b"k1": 0, b"k3": 0, b"k5": 0}
    assert offset == end - 2  # the last committed record (k1=A2); its commit marker follows it


async def _end_offset(bootstrap: str, tp: TopicPartition) -> int:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        return (await consumer.end_offsets([tp]))[tp]
    finally:
        await consumer.stop()
