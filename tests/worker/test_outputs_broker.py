"""streams.worker.outputs.Outputs against the real broker: partitions, order, batches that fill up."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer

from streams.wire.keys import verdict_partition
from streams.worker.outputs import Outputs
from tests.worker_harness import consume_all, create_topics, topic_tag

pytestmark = [pytest.mark.kafka]


def test_records_land_on_their_key_partition_in_order_across_full_batches(kafka_bootstrap):
    topic, dead = f"test.out.{topic_tag()}", f"test.out.{topic_tag()}.dead"
    keys = [f"run-{n}".encode() for n in range(7)]
    # 300 records of 3 KB per key through 16 KiB batches: each partition needs many batches
    records = [(keys[n % 7], f"{n:06d}".encode() + b"x" * 3000) for n in range(2100)]

    async def run() -> list[asyncio.Future]:
        await create_topics(kafka_bootstrap, [topic], 3)
        await create_topics(kafka_bootstrap, [dead], 2)
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", max_batch_size=16384)
        await producer.start()
        try:
            outputs = Outputs(producer, {topic: 3, dead: 2})
            assert not outputs
            for key, value in records[:1000]:
                outputs.add(topic, key, value)
            outputs.add(dead, None, b"keyless", fallback=5)  # no key: the source partition, modulo 2
            assert outputs
            futures = await outputs.send()
            assert not outputs
            for key, value in records[1000:]:
                outputs.add(topic, key, value)
            futures += await outputs.send()
            await asyncio.gather(*futures)
            return futures
        finally:
            await producer.stop()

    futures = asyncio.run(run())
    assert len(futures) > 2 * 3  # several batches per partition: full builders were sent, not dropped
    got = asyncio.run(consume_all(kafka_bootstrap, topic, len(records), timeout=60))
    assert len(got) == len(records)
    for key in keys:
        mine = [r for r in got if r.key == key]
        assert {r.partition for r in mine} == {verdict_partition(key, 3)}
        assert [r.value for r in sorted(mine, key=lambda r: r.offset)] == [v for k, v in records if k == key]
    [keyless] = asyncio.run(consume_all(kafka_bootstrap, dead, 1, timeout=60))
    assert (keyless.key, keyless.value, keyless.partition) == (None, b"keyless", 1)


def test_a_record_larger_than_a_batch_goes_alone(kafka_bootstrap):
    topic = f"test.out.{topic_tag()}"
    values = [b"a" * 100, b"b" * 40000, b"c" * 100]

    async def run() -> int:
        await create_topics(kafka_bootstrap, [topic], 1)
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", max_batch_size=16384)
        await producer.start()
        try:
            outputs = Outputs(producer, {topic: 1})
            for value in values:
                outputs.add(topic, b"k", value)
            futures = await outputs.send()
            await asyncio.gather(*futures)
            return len(futures)
        finally:
            await producer.stop()

    assert asyncio.run(run()) == 3  # [a], [b] alone, [c]
    got = asyncio.run(consume_all(kafka_bootstrap, topic, 3, timeout=60))
    assert [r.value for r in got] == values
