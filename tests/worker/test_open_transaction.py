"""A rebalance while a transaction is open on a state changelog partition.

The changelog is written in transactions and read ``read_committed``: a
reader sees a partition only up to its last stable offset (LSO), the first
offset of the oldest transaction still open there. A transaction begun
before the worker's last checkpoints and not ended yet pins the LSO below
records the worker committed after it began. Faust's recovery took the end
of the partition at that moment: below the offset of the last record the
worker's memory store holds (its persisted offset, from its own commits), so
a rebalance that kept the partition on the worker crashed it with
``ConsistencyError: The persisted offset ... is higher than the last offset
in that topic (highwater)``; a new owner would have stopped reading before
the committed states past the open transaction.

Here a producer of another ``transactional.id`` opens a transaction on the
worker's changelog partition and leaves it open (as a writer stalled
mid-transaction does, until the coordinator times it out), the worker
checkpoints after it, then the worker's consumer rejoins its group. The worker
must wait for the transaction to end (aborted here, a few seconds later),
recover without a crash and go on with the states it had.
"""

from __future__ import annotations

import asyncio
import json
import time

import msgpack
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from faust.types import TP

from streams.worker.consumer import STABLE_WAIT_S, stable_ends
from tests.worker.test_worker import ENABLED, _offline, _same
from tests.worker_harness import (
    checkpointed, consume_all, create_topics, encode, produce, running_worker, topic_tag, worker_settings,
)

pytestmark = [pytest.mark.kafka]


def _events(run: str, first: int, count: int) -> list[dict]:
    return [{"type": "tool_call", "run_id": run, "session_id": f"s-{run}", "tool_call_id": f"{run}-{i}",
             "tool_name": "exec", "args": {"command": "pytest"}, "result": "1 failed", "error": None,
             "event_id": f"{run}:{i}"} for i in range(first, first + count)]


async def _rejoin(consumer) -> None:  # runs in Faust's consumer thread
    consumer._coordinator.request_rejoin()  # aiokafka internals: the group coordinator of the consumer


async def _open_transaction(bootstrap: str, topic: str, partition: int, transactional_id: str
                            ) -> tuple[AIOKafkaProducer, int]:
    """A producer with a transaction left open on ``topic[partition]``, and the offset of its one record."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    await producer.start()
    await producer.begin_transaction()
    meta = await (await producer.send(topic, b"not a state", key=b"intruder", partition=partition))
    return producer, meta.offset


async def _persisted_past(worker, tp: TP, offset: int, timeout: float = 60.0) -> int:
    """Wait until the worker's store holds changelog records past ``offset`` (its checkpoints committed them)."""
    deadline = time.monotonic() + timeout
    while True:
        persisted = worker.table.data.persisted_offset(tp)
        if persisted is not None and persisted > offset:
            return persisted
        assert time.monotonic() < deadline, f"no checkpoint past offset {offset} (persisted {persisted})"
        await asyncio.sleep(0.1)


@pytest.mark.timeout(180)
def test_a_rebalance_while_a_transaction_is_open_on_the_changelog_waits_for_it(kafka_bootstrap, tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps(ENABLED))
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=1, config=config, checkpoint_interval_s=0.5)
    topic = settings.input_topics[0]
    first, second, third = _events("run-a", 0, 6), _events("run-a", 6, 6), _events("run-a", 12, 6)

    async def run() -> tuple[list, float, int]:
        async with running_worker(settings) as worker:
            changelog = worker.table.changelog_topic.get_topic_name()
            tp = TP(changelog, 0)
            written = -1
            for part in (first[:3], first[3:]):  # two checkpoints: the records before the transaction end past 0
                await produce(kafka_bootstrap, topic, [(b"run-a", encode(e)) for e in part])
                written = await _persisted_past(worker, tp, written)
            await consume_all(kafka_bootstrap, settings.verdicts_topic, len(first))
            await checkpointed(worker)
            intruder, opened_at = await _open_transaction(kafka_bootstrap, changelog, 0,
                                                          f"{settings.app_id}-intruder")
            try:
                # the worker's next checkpoints commit after the open transaction began
                await produce(kafka_bootstrap, topic, [(b"run-a", encode(e)) for e in second])
                await consume_all(kafka_bootstrap, settings.verdicts_topic, len(first) + len(second))
                persisted = await _persisted_past(worker, tp, opened_at)
                await checkpointed(worker)

                thread = worker.app.consumer._thread
                generation = worker.app.consumer_generation_id
                await thread.call_thread(_rejoin, thread._ensure_consumer())
                deadline = time.monotonic() + 60
                while worker.app.consumer_generation_id == generation:  # the rebalance has begun
                    assert time.monotonic() < deadline, "no rebalance"
                    await asyncio.sleep(0.05)
                await asyncio.sleep(3)  # recovery is waiting for the transaction meanwhile
                assert worker.app.crash_reason is None, worker.app.crash_reason
                ended = time.monotonic()
                await intruder.abort_transaction()
            finally:
                await intruder.stop()
            deadline = time.monotonic() + 60
            while not (worker.app.tables.recovery.completed.is_set() and not worker.app.rebalancing):
                assert worker.app.crash_reason is None, worker.app.crash_reason
                assert time.monotonic() < deadline, "recovery did not complete"
                await asyncio.sleep(0.05)
            recovered = time.monotonic()
            await produce(kafka_bootstrap, topic, [(b"run-a", encode(e)) for e in third])
            records = await consume_all(kafka_bootstrap, settings.verdicts_topic, 18)
            assert worker.app.crash_reason is None, worker.app.crash_reason
            return records, recovered - ended, persisted

    records, waited, _ = asyncio.run(run())
    by_event: dict[str, bytes] = {}
    for record in records:
        by_event.setdefault(msgpack.unpackb(record.value)["event_id"], record.value)
    events = first + second + third
    assert sorted(by_event) == sorted(e["event_id"] for e in events)
    want = _offline(events, [(settings.input_topics[0], 0, i) for i in range(len(events))], ENABLED,
                    [e["run_id"] for e in events])
    got = [msgpack.unpackb(by_event[e["event_id"]]) for e in events]
    assert [i for i, (g, w) in enumerate(zip(got, want)) if not _same(g, w)] == []
    # recovery went on once the transaction ended, not when its wait for the LSO (STABLE_WAIT_S, 40 s) gave up:
    # sitting that bound out would end it ~37 s after the abort (the abort comes 3 s into the wait)
    assert waited < STABLE_WAIT_S / 2, f"recovery ended {waited:.1f} s after the transaction did"


def test_stable_ends_wait_for_a_transaction_open_at_the_call(kafka_bootstrap):
    """:func:`stable_ends`: the LSO once the transactions open at the call have ended, or as it is after the bound."""
    topic = f"test.lw.{topic_tag()}.stable"

    async def run() -> tuple[int, int, float, int]:
        await create_topics(kafka_bootstrap, [topic], 1)
        tp = TopicPartition(topic, 0)
        writer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"{topic}-writer")
        await writer.start()
        committed = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, isolation_level="read_committed")
        uncommitted = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap)
        await committed.start()
        await uncommitted.start()
        try:
            async with writer.transaction():
                await writer.send_and_wait(topic, b"v0", key=b"k", partition=0)  # offset 0, marker 1
            intruder, _ = await _open_transaction(kafka_bootstrap, topic, 0, f"{topic}-intruder")  # offset 2
            async with writer.transaction():
                await writer.send_and_wait(topic, b"v1", key=b"k", partition=0)  # offset 3, marker 4
            pinned = (await stable_ends(committed, uncommitted, [tp], timeout=1.0))[tp]
            started = time.monotonic()
            asyncio.get_running_loop().call_later(1.0, lambda: asyncio.ensure_future(intruder.abort_transaction()))
            stable = (await stable_ends(committed, uncommitted, [tp], timeout=20.0))[tp]
            took = time.monotonic() - started
            await intruder.stop()
            return pinned, stable, took, (await uncommitted.end_offsets([tp]))[tp]
        finally:
            await writer.stop()
            await committed.stop()
            await uncommitted.stop()

    pinned, stable, took, end = asyncio.run(run())
    assert pinned == 2  # after the 1 s bound: the LSO, held at the open transaction's first record
    assert stable == end == 6 and took >= 0.9  # offsets 0-4, the abort marker at 5
