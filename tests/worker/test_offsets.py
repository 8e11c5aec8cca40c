"""streams.worker.offsets.CommittedOffsets against the real broker: a group's committed offsets, read without
joining the group, exactly as committed; a partition the group never committed gives None; a broker that does
not answer raises (the worker then asks Faust's consumer)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from streams.worker.offsets import CommittedOffsets
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
