"""streams.worker.offsets.CommittedOffsets against the real broker: a group's committed offsets, read without
joining the group, exactly as committed; a partition the group never committed gives None; an offset commit a
transaction holds pending is waited for (OffsetFetch v7, require_stable), never read past; a broker that does not
answer raises (the worker's assignment then tries again)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import OffsetAndMetadata

from streams.worker.offsets import CommittedOffsets, UnstableOffsets
from tests.worker_harness import create_topics

pytestmark = [pytest.mark.kafka]


@pytest.mark.timeout(60)
def test_committed_offsets_are_read_as_committed_and_none_where_the_group_has_none(kafka_bootstrap):
    topic, group = f"test.lw.offsets.{uuid.uuid4().hex[:6]}", f"lw-test-offsets-{uuid.uuid4().hex[:6]}"

    async def run() -> tuple:
        await create_topics(kafka_bootstrap, [topic], 3)
        member = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
        await member.start()
        offsets = CommittedOffsets(kafka_bootstrap, group, "lw-test-offsets")
        try:
            member.assign([TopicPartition(topic, 0), TopicPartition(topic, 2)])
            await member.commit({TopicPartition(topic, 0): OffsetAndMetadata(17, ""),
                                 TopicPartition(topic, 2): OffsetAndMetadata(0, "")})
            tps = [TopicPartition(topic, p) for p in range(3)]
            first = await offsets.read(tps)
            await member.commit({TopicPartition(topic, 0): OffsetAndMetadata(42, "")})
            second = await offsets.read(tps[:1])  # the client and the coordinator found the first time
            return first, second
        finally:
            await offsets.close()
            await member.stop()

    first, second = asyncio.run(run())
    assert first == {TopicPartition(topic, 0): 17, TopicPartition(topic, 1): None, TopicPartition(topic, 2): 0}
    assert second == {TopicPartition(topic, 0): 42}


async def _pending_commit(bootstrap: str, group: str, tp: TopicPartition, offset: int) -> AIOKafkaProducer:
    """A transactional producer with an open transaction holding an offset commit of ``group`` (TxnOffsetCommit)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{group}-txn")
    await producer.start()
    await producer.begin_transaction()
    await producer.send_offsets_to_transaction({tp: offset}, group)
    return producer


@pytest.mark.timeout(60)
@pytest.mark.parametrize("end", ["commit", "abort"])
def test_an_offset_commit_pending_in_a_transaction_is_waited_for(kafka_bootstrap, end):
    """While a transaction holds an offset commit open, a plain OffsetFetch (aiokafka's, v3) answers the offset
    committed before it; the read waits, and once the transaction ends returns what it left: its offset if it
    committed, the one before if it aborted."""
    topic, group = f"test.lw.offsets.{uuid.uuid4().hex[:6]}", f"lw-test-offsets-{uuid.uuid4().hex[:6]}"
    tp = TopicPartition(topic, 1)

    async def run() -> tuple:
        await create_topics(kafka_bootstrap, [topic], 2)
        member = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
        await member.start()
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        offsets = CommittedOffsets(kafka_bootstrap, group, "lw-test-offsets")
        producer = None
        try:
            member.assign([tp])
            await member.commit({tp: OffsetAndMetadata(5, "")})
            await member.stop()  # the transactional producer commits for the group from now on
            producer = await _pending_commit(kafka_bootstrap, group, tp, 9)
            blind = (await admin.list_consumer_group_offsets(group, partitions=[tp]))[tp].offset
            reading = asyncio.ensure_future(offsets.read([tp]))
            await asyncio.sleep(1.5)
            waited = not reading.done()
            await (producer.commit_transaction() if end == "commit" else producer.abort_transaction())
            found = await asyncio.wait_for(reading, 10)
            return blind, waited, found, offsets.unstable_reads
        finally:
            await offsets.close()
            await admin.close()
            if producer is not None:
                await producer.stop()

    blind, waited, found, unstable_reads = asyncio.run(run())
    assert blind == 5  # what a new owner reading without require_stable would start from
    assert waited and unstable_reads >= 3  # asked again with backoff (0.01 s doubling to 0.5 s) while it was open
    assert found == {tp: 9 if end == "commit" else 5}


@pytest.mark.timeout(60)
def test_a_commit_pending_past_the_stable_wait_raises(kafka_bootstrap):
    topic, group = f"test.lw.offsets.{uuid.uuid4().hex[:6]}", f"lw-test-offsets-{uuid.uuid4().hex[:6]}"
    tp = TopicPartition(topic, 0)

    async def run() -> BaseException | None:
        await create_topics(kafka_bootstrap, [topic], 1)
        producer = await _pending_commit(kafka_bootstrap, group, tp, 3)
        offsets = CommittedOffsets(kafka_bootstrap, group, "lw-test-offsets", stable_wait_s=1.0)
        try:
            await offsets.read([tp])
        except Exception as exc:
            return exc
        finally:
            await offsets.close()
            await producer.abort_transaction()
            await producer.stop()
        return None

    error = asyncio.run(run())
    assert isinstance(error, UnstableOffsets) and error.retriable
    assert f"{topic}[0]" in str(error)


@pytest.mark.timeout(60)
def test_a_broker_that_does_not_answer_raises():
    async def run() -> BaseException | None:
        offsets = CommittedOffsets("127.0.0.1:1", "lw-test-offsets", "lw-test-offsets")  # nothing listens there
        try:
            await offsets.read([TopicPartition("t", 0)])
        except Exception as exc:
            return exc
        finally:
            await offsets.close()
        return None

    assert asyncio.run(run()) is not None
