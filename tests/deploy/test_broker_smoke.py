"""Smoke tests against the real Kafka 3.9.2 broker (deploy/kafka/kafka.sh).

They check what loopwatch's faust worker relies on: explicit topic creation, keyed
partitioning with per-partition order, consumer-group commits, and transactions (faust's
processing_guarantee="exactly_once" needs __transaction_state with RF 1 on one broker).
Sync tests driving asyncio.run: the project has no pytest-asyncio.
"""

import asyncio
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

N_RECORDS = 100
N_PARTITIONS = 4


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=10_000)
        errors = [(t, code, msg) for t, code, *msg in resp.topic_errors if code != 0]
        assert not errors, f"create_topics failed: {errors}"
    finally:
        await admin.close()


async def consume(consumer: AIOKafkaConsumer, count: int, timeout: float = 30.0) -> list:
    records: list = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(records) < count and loop.time() < deadline:
        batches = await consumer.getmany(timeout_ms=500)
        for batch in batches.values():
            records.extend(batch)
    return records


async def round_trip(bootstrap: str, topic: str) -> None:
    await create_topic(bootstrap, topic, N_PARTITIONS)

    # Produce: record where each record landed; per-partition order is what Kafka promises.
    expected: dict[int, list[tuple[bytes, bytes, int]]] = defaultdict(list)
    key_partition: dict[bytes, int] = {}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        for i in range(N_RECORDS):
            key, value = f"k{i % 20}".encode(), f"v{i}".encode()
            md = await producer.send_and_wait(topic, value, key=key)
            expected[md.partition].append((key, value, md.offset))
            # the default partitioner hashes the key: one key always maps to one partition
            assert key_partition.setdefault(key, md.partition) == md.partition
    finally:
        await producer.stop()
    assert sorted(expected) == list(range(N_PARTITIONS)), "20 keys should cover all 4 partitions"

    group = f"{topic}.group"
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        records = await consume(consumer, N_RECORDS)
        got: dict[int, list[tuple[bytes, bytes, int]]] = defaultdict(list)
        for r in records:
            got[r.partition].append((r.key, r.value, r.offset))
        assert len(records) == N_RECORDS
        assert dict(got) == dict(expected)  # same keys/values, same order within each partition

        await consumer.commit()
        tps = [TopicPartition(topic, p) for p in range(N_PARTITIONS)]
        end = await consumer.end_offsets(tps)
        assert {tp: await consumer.committed(tp) for tp in tps} == end
        assert end == {TopicPartition(topic, p): len(expected[p]) for p in range(N_PARTITIONS)}
    finally:
        await consumer.stop()

    # The commit is in the broker, not just in the client's cache.
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        stored = await admin.list_consumer_group_offsets(group)
        assert {tp: om.offset for tp, om in stored.items()} == end
    finally:
        await admin.close()


def test_keyed_round_trip_with_group_commit(kafka_bootstrap: str, unique_topic: str) -> None:
    asyncio.run(round_trip(kafka_bootstrap, unique_topic))


async def transactions(bootstrap: str, topic: str) -> None:
    await create_topic(bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)
    group = f"{topic}.eos-group"
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}.txn")
    await producer.start()  # InitProducerId: needs the transaction coordinator
    try:
        await producer.begin_transaction()  # aborted: must stay invisible to read_committed
        await producer.send_and_wait(topic, b"aborted", key=b"x")
        await producer.abort_transaction()
        # consume-transform-produce step as faust exactly_once does it: outputs and input
        # offsets committed atomically (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn).
        async with producer.transaction():
            for i in range(10):
                await producer.send(topic, f"c{i}".encode(), key=b"x")
            await producer.send_offsets_to_transaction({tp: 7}, group)
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        records = await consume(consumer, 10)
        assert [r.value for r in records] == [f"c{i}".encode() for i in range(10)]
    finally:
        await consumer.stop()

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        stored = await admin.list_consumer_group_offsets(group)
        assert {t: om.offset for t, om in stored.items()} == {tp: 7}
    finally:
        await admin.close()


def test_transactional_producer_commits(kafka_bootstrap: str, unique_topic: str) -> None:
    asyncio.run(transactions(kafka_bootstrap, unique_topic))
