"""streams.worker.reader.InputReader against the real broker.

Each test creates its own topics (tagged with the session's tag: the session teardown deletes
them), produces records to exact partitions and checks the exact offsets and keys the reader
hands to its handler, in order, and the epoch they carry. Readers use the worker's fetch
settings (``fetch_max_wait_ms=25``, see ``WorkerSettings.fetch_max_wait_ms``).

Waiting is by polling a condition against a deadline (:meth:`Deliveries.until`). Only an
*absence* (nothing delivered after a revoke or an error) is observed over a fixed quiet window,
:data:`QUIET_S`, far longer than the reader's idle poll (50 ms) and the fetch wait (25 ms).
Sync tests driving ``asyncio.run``: the project has no pytest-asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, AsyncIterator, Callable, Iterable

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord

from streams.worker.reader import InputReader
from tests.worker_harness import create_topics, topic_tag

pytestmark = [pytest.mark.kafka]

WAIT_S = 60.0  # longest wait for something that must happen
QUIET_S = 1.0  # window in which something must NOT happen (20 idle polls, 40 fetch waits)
FETCH_OPTIONS = dict(fetch_max_wait_ms=25)  # as the worker (WorkerSettings.fetch_max_wait_ms)


def new_topic(what: str) -> str:
    return f"test.lw.{topic_tag()}.reader-{what}"


async def produce_to(bootstrap: str, topic: str, partition: int, keys: Iterable[str]) -> list[int]:
    """Produce one record per key to exactly ``partition`` (acks=all, in order); their offsets."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await producer.start()
    try:
        offsets = []
        for key in keys:
            md = await producer.send_and_wait(topic, value=f"v-{key}".encode(), key=key.encode(),
                                              partition=partition)
            offsets.append(md.offset)
        return offsets
    finally:
        await producer.stop()


class Deliveries:
    """What the reader handed over: every ``(epoch, batch)``, the raw batch objects, errors."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, list[tuple[TopicPartition, list[Any]]]]] = []
        self.raw: list[Any] = []
        self.errors: list[BaseException] = []

    async def handler(self, batch: Any, epoch: int) -> None:
        self.raw.append(batch)
        self.calls.append((epoch, [(tp, list(records)) for tp, records in batch]))

    async def on_error(self, exc: BaseException) -> None:
        self.errors.append(exc)

    def records(self, topic: str, partition: int, epoch: int | None = None) -> list[Any]:
        """The records of one partition in delivery order (of one epoch if given)."""
        return [r for e, batch in self.calls if epoch is None or e == epoch
                for tp, records in batch if (tp.topic, tp.partition) == (topic, partition) for r in records]

    def offsets(self, topic: str, partition: int, epoch: int | None = None) -> list[int]:
        return [r.offset for r in self.records(topic, partition, epoch)]

    def keys(self, topic: str, partition: int, epoch: int | None = None) -> list[str]:
        return [r.key.decode() for r in self.records(topic, partition, epoch)]

    def epochs(self) -> set[int]:
        return {e for e, _ in self.calls}

    async def until(self, predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert not self.errors, f"reader failed while waiting for {what}: {self.errors!r}"
            if time.monotonic() > deadline:
                raise AssertionError(f"not in {timeout} s: {what}; delivered: {self.summary()}")
            await asyncio.sleep(0.01)

    def summary(self) -> list[tuple[int, list[tuple[str, int, list[int]]]]]:
        return [(e, [(tp.topic, tp.partition, [r.offset for r in records]) for tp, records in batch])
                for e, batch in self.calls]


@contextlib.asynccontextmanager
async def running_reader(bootstrap: str, deliveries: Deliveries, ready: Callable[[TopicPartition], bool] = None,
                         handler: Any = None, **options: Any) -> AsyncIterator[InputReader]:
    """A started reader; always stopped."""
    reader = InputReader(bootstrap, handler or deliveries.handler, ready or (lambda tp: True),
                         deliveries.on_error, **{**FETCH_OPTIONS, **options})
    await reader.start()
    try:
        yield reader
    finally:
        await reader.stop()


def run(coro: Any) -> None:
    asyncio.run(coro)


# ---------------------------------------------------------------------------------------- assign


@pytest.mark.timeout(120)
def test_assign_delivers_each_partition_from_its_offset_in_order(kafka_bootstrap: str) -> None:
    topic = new_topic("assign")

    async def scenario() -> None:
        await create_topics(kafka_bootstrap, [topic], 3)
        for p in range(3):
            assert await produce_to(kafka_bootstrap, topic, p, [f"p{p}-{i}" for i in range(8)]) == list(range(8))
        deliveries = Deliveries()
        # max_poll_records=3: several fetches per partition, order must hold across batches
        async with running_reader(kafka_bootstrap, deliveries, max_poll_records=3) as reader:
            reader.assign({(topic, 0): 0, (topic, 1): 5, (topic, 2): 8})  # p2: at its end
            assert reader.epoch == 1
            await deliveries.until(lambda: len(deliveries.offsets(topic, 0)) >= 8
                                   and len(deliveries.offsets(topic, 1)) >= 3, "p0 from 0 and p1 from 5")
            # records written after the assignment: p2 is read from its end offset, p1 goes on
            assert await produce_to(kafka_bootstrap, topic, 2, ["p2-8", "p2-9"]) == [8, 9]
            assert await produce_to(kafka_bootstrap, topic, 1, ["p1-8"]) == [8]
            await deliveries.until(lambda: len(deliveries.offsets(topic, 2)) >= 2
                                   and len(deliveries.offsets(topic, 1)) >= 4, "p2 from 8, p1 up to 8")

            assert deliveries.offsets(topic, 0) == list(range(8))
            assert deliveries.keys(topic, 0) == [f"p0-{i}" for i in range(8)]
            assert deliveries.offsets(topic, 1) == [5, 6, 7, 8]
            assert deliveries.keys(topic, 1) == ["p1-5", "p1-6", "p1-7", "p1-8"]
            assert deliveries.offsets(topic, 2) == [8, 9]
            assert deliveries.keys(topic, 2) == ["p2-8", "p2-9"]
            assert deliveries.epochs() == {1} and reader.epoch == 1

            # the batch: [(TopicPartition, [ConsumerRecord, ...]), ...], each partition once, non-empty
            for batch in deliveries.raw:
                assert isinstance(batch, list)
                tps = [tp for tp, _ in batch]
                assert len(tps) == len(set(tps))
                assert 1 <= sum(len(records) for _, records in batch) <= 3  # max_poll_records passed on
                for item in batch:
                    tp, records = item
                    assert isinstance(item, tuple) and isinstance(tp, TopicPartition)
                    assert tp.topic == topic and tp.partition in (0, 1, 2)
                    assert records and all(isinstance(r, ConsumerRecord) for r in records)
                    assert all((r.topic, r.partition) == (tp.topic, tp.partition) for r in records)
            assert not deliveries.errors

    run(scenario())


@pytest.mark.timeout(120)
def test_assign_replaces_the_previous_assignment(kafka_bootstrap: str) -> None:
    topic = new_topic("reassign")

    async def scenario() -> None:
        await create_topics(kafka_bootstrap, [topic], 2)
        await produce_to(kafka_bootstrap, topic, 0, ["a0", "a1", "a2"])
        await produce_to(kafka_bootstrap, topic, 1, ["b0", "b1", "b2"])
        deliveries = Deliveries()
        async with running_reader(kafka_bootstrap, deliveries) as reader:
            reader.assign({(topic, 0): 1})
            await deliveries.until(lambda: len(deliveries.offsets(topic, 0)) >= 2, "p0 from 1")
            reader.assign({(topic, 1): 2})
            assert reader.epoch == 2
            # p0 gets a record first, then p1: p1's arrives, p0's (no longer assigned) does not
            assert await produce_to(kafka_bootstrap, topic, 0, ["a3"]) == [3]
            assert await produce_to(kafka_bootstrap, topic, 1, ["b3"]) == [3]
            await deliveries.until(lambda: len(deliveries.offsets(topic, 1)) >= 2, "p1 from 2")

            assert deliveries.offsets(topic, 0) == [1, 2]
            assert deliveries.offsets(topic, 0, epoch=1) == [1, 2]
            assert deliveries.offsets(topic, 1) == [2, 3]
            assert deliveries.keys(topic, 1, epoch=2) == ["b2", "b3"]
            assert not deliveries.errors

    run(scenario())


@pytest.mark.timeout(120)
def test_a_partition_without_an_offset_is_read_from_its_beginning_even_if_it_was_read_before(
        kafka_bootstrap: str) -> None:
    # None: the group has no committed offset (the rekey topic nothing was written to, a fresh group)
    topic = new_topic("beginning")

    async def scenario() -> None:
        await create_topics(kafka_bootstrap, [topic], 2)
        await produce_to(kafka_bootstrap, topic, 0, ["a0", "a1", "a2"])
        await produce_to(kafka_bootstrap, topic, 1, ["b0", "b1"])
        deliveries = Deliveries()
        async with running_reader(kafka_bootstrap, deliveries) as reader:
            reader.assign({(topic, 0): 2})
            await deliveries.until(lambda: len(deliveries.offsets(topic, 0)) >= 1, "p0 from 2")
            reader.assign({(topic, 0): None, (topic, 1): None})  # p0 was at 3: a new assignment starts over
            await deliveries.until(lambda: len(deliveries.offsets(topic, 0, epoch=2)) >= 3
                                   and len(deliveries.offsets(topic, 1, epoch=2)) >= 2, "both from 0")
            await asyncio.sleep(QUIET_S)

            assert deliveries.offsets(topic, 0, epoch=1) == [2]
            assert deliveries.offsets(topic, 0, epoch=2) == [0, 1, 2]
            assert deliveries.keys(topic, 1, epoch=2) == ["b0", "b1"]
            assert not deliveries.errors

    run(scenario())


# ----------------------------------------------------------------------------------------- ready


@pytest.mark.timeout(120)
def test_partition_is_delivered_only_once_ready(kafka_bootstrap: str) -> None:
    topic = new_topic("ready")
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def scenario() -> None:
        await create_topics(kafka_bootstrap, [topic], 2)
        await produce_to(kafka_bootstrap, topic, 0, [f"a{i}" for i in range(4)])
        await produce_to(kafka_bootstrap, topic, 1, [f"b{i}" for i in range(4)])
        deliveries = Deliveries()
        ready_tps = {p0}
        asked: list[Any] = []

        def ready(tp: TopicPartition) -> bool:
            asked.append(tp)
            return tp in ready_tps

        async with running_reader(kafka_bootstrap, deliveries, ready=ready) as reader:
            reader.assign({(topic, 0): 0, (topic, 1): 1})
            await deliveries.until(lambda: len(deliveries.offsets(topic, 0)) >= 4, "ready p0 from 0")
            # the reader keeps asking about p1 between fetches, and keeps it back
            seen = asked.count(p1)
            await deliveries.until(lambda: asked.count(p1) >= seen + 5, "5 more ready(p1) checks")
            assert deliveries.offsets(topic, 1) == []
            assert all(isinstance(tp, TopicPartition) for tp in asked)

            ready_tps.add(p1)
            await deliveries.until(lambda: len(deliveries.offsets(topic, 1)) >= 3, "p1 from 1 once ready")
            assert deliveries.offsets(topic, 1) == [1, 2, 3]
            assert deliveries.keys(topic, 1) == ["b1", "b2", "b3"]
            assert deliveries.offsets(topic, 0) == [0, 1, 2, 3]  # p0 not read again
            assert deliveries.epochs() == {1} and reader.epoch == 1  # readiness is no new epoch
            assert not deliveries.errors

    run(scenario())


# ---------------------------------------------------------------------------------------- assign again


@pytest.mark.timeout(120)
def test_assign_from_the_handler_delivers_again_from_the_offset_with_a_new_epoch(kafka_bootstrap: str) -> None:
    """The partition is assigned again (another offset) while the handler holds a batch."""
    topic = new_topic("seek-in-handler")

    async def scenario() -> None:
        await create_topics(kafka_bootstrap, [topic], 1)
        await produce_to(kafka_bootstrap, topic, 0, [f"k{i}" for i in range(6)])
        deliveries = Deliveries()
        stale_in_hand: list[tuple[int, int]] = []  # (epoch of the batch, reader epoch after the assign)
        reader_box: list[InputReader] = []

        async def handler(batch: Any, epoch: int) -> None:
            await deliveries.handler(batch, epoch)
            reader = reader_box[0]
            if not stale_in_hand and any(r.offset == 3 for _, records in batch for r in records):
                reader.assign({(topic, 0): 1})
                stale_in_hand.append((epoch, reader.epoch))

        async with running_reader(kafka_bootstrap, deliveries, handler=handler, max_poll_records=2) as reader:
            reader_box.append(reader)
            reader.assign({(topic, 0): 0})
            await deliveries.until(lambda: len(deliveries.offsets(topic, 0, epoch=2)) >= 5, "offsets 1..5 again")

            assert stale_in_hand == [(1, 2)]  # the batch in hand carries the epoch it was fetched in
            assert deliveries.offsets(topic, 0, epoch=1) == [0, 1, 2, 3]
            assert deliveries.offsets(topic, 0, epoch=2) == [1, 2, 3, 4, 5]
            assert deliveries.keys(topic, 0, epoch=2) == ["k1", "k2", "k3", "k4", "k5"]
            assert deliveries.epochs() == {1, 2} and reader.epoch == 2
            assert not deliveries.errors

    run(scenario())


@pytest.mark.timeout(120)
def test_assign_while_the_reader_waits_for_records_delivers_again(kafka_bootstrap: str) -> None:
    """assign() from another task while nothing is being handled (the reader waits in a fetch)."""
    topic = new_topic("seek-idle")

    async def scenario() -> None:
        await create_topics(kafka_bootstrap, [topic], 1)
        await produce_to(kafka_bootstrap, topic, 0, [f"k{i}" for i in range(5)])
        deliveries = Deliveries()
        async with running_reader(kafka_bootstrap, deliveries) as reader:
            reader.assign({(topic, 0): 0})
            await deliveries.until(lambda: len(deliveries.offsets(topic, 0)) >= 5, "offsets 0..4")
            assert deliveries.offsets(topic, 0, epoch=1) == [0, 1, 2, 3, 4]
            for round_ in range(10):  # each round: the reader is waiting for records when assign() comes
                reader.assign({(topic, 0): 2})
                epoch = reader.epoch
                await deliveries.until(lambda: len(deliveries.offsets(topic, 0, epoch=epoch)) >= 3,
                                       f"round {round_}: offsets 2..4 again at epoch {epoch}")
                assert deliveries.offsets(topic, 0, epoch=epoch) == [2, 3, 4]
            assert not deliveries.errors

    run(scenario())


# ---------------------------------------------------------------------------------------- revoke


@pytest.mark.timeout(120)
def test_revoke_and_assign_while_a_batch_is_in_hand(kafka_bootstrap: str) -> None:
    """A rebalance during a batch: revoke() then assign(); the batch in hand is stale, reading restarts."""
    topic = new_topic("revoke-busy")

    async def scenario() -> None:
        await create_topics(kafka_bootstrap, [topic], 1)
        await produce_to(kafka_bootstrap, topic, 0, [f"k{i}" for i in range(5)])
        deliveries = Deliveries()
        entered, release = asyncio.Event(), asyncio.Event()
        refused: list[tuple[int, list[int]]] = []
        accepted: list[tuple[int, int]] = []
        reader_box: list[InputReader] = []

        async def handler(batch: Any, epoch: int) -> None:
            await deliveries.handler(batch, epoch)
            offsets = [r.offset for _, records in batch for r in records]
            if not entered.is_set():
                entered.set()
                await release.wait()
            if epoch != reader_box[0].epoch:
                refused.append((epoch, offsets))
            else:
                accepted.extend((epoch, o) for o in offsets)

        async with running_reader(kafka_bootstrap, deliveries, handler=handler, max_poll_records=2) as reader:
            reader_box.append(reader)
            reader.assign({(topic, 0): 0})
            await deliveries.until(entered.is_set, "the first batch in the handler")
            reader.revoke()
            assert reader.epoch == 2
            reader.assign({(topic, 0): 1})
            assert reader.epoch == 3
            release.set()
            await deliveries.until(lambda: len(accepted) >= 4, "offsets 1..4 at epoch 3")

            assert refused == [(1, [0, 1])]
            assert accepted == [(3, 1), (3, 2), (3, 3), (3, 4)]
            assert deliveries.epochs() == {1, 3}
            assert not deliveries.errors

    run(scenario())


@pytest.mark.timeout(120)
def test_revoke_stops_delivery_until_the_next_assign(kafka_bootstrap: str) -> None:
    topic = new_topic("revoke")

    async def scenario() -> None:
        await create_topics(kafka_bootstrap, [topic], 1)
        await produce_to(kafka_bootstrap, topic, 0, ["k0", "k1", "k2"])
        deliveries = Deliveries()
        async with running_reader(kafka_bootstrap, deliveries) as reader:
            reader.assign({(topic, 0): 0})
            await deliveries.until(lambda: len(deliveries.offsets(topic, 0)) >= 3, "offsets 0..2")
            reader.revoke()
            assert reader.epoch == 2
            assert await produce_to(kafka_bootstrap, topic, 0, ["k3", "k4"]) == [3, 4]
            await asyncio.sleep(QUIET_S)  # an absence: nothing may arrive in this window
            assert deliveries.offsets(topic, 0) == [0, 1, 2], "delivered after revoke()"

            reader.assign({(topic, 0): 1})
            assert reader.epoch == 3
            await deliveries.until(lambda: len(deliveries.offsets(topic, 0, epoch=3)) >= 4, "offsets 1..4")
            assert deliveries.offsets(topic, 0, epoch=3) == [1, 2, 3, 4]
            assert deliveries.keys(topic, 0, epoch=3) == ["k1", "k2", "k3", "k4"]
            assert deliveries.epochs() == {1, 3}
            assert not deliveries.errors

    run(scenario())


# ----------------------------------------------------------------------------------------- error


@pytest.mark.timeout(120)
def test_handler_exception_reaches_on_error_and_delivery_stops(kafka_bootstrap: str) -> None:
    topic = new_topic("error")

    async def scenario() -> None:
        await create_topics(kafka_bootstrap, [topic], 1)
        await produce_to(kafka_bootstrap, topic, 0, ["k0", "k1"])
        deliveries = Deliveries()
        boom = RuntimeError("handler failed")
        handled: list[list[int]] = []

        async def handler(batch: Any, epoch: int) -> None:
            handled.append([r.offset for _, records in batch for r in records])
            raise boom

        async with running_reader(kafka_bootstrap, deliveries, handler=handler) as reader:
            reader.assign({(topic, 0): 0})
            deadline = time.monotonic() + WAIT_S
            while not deliveries.errors:
                assert time.monotonic() < deadline, "on_error not called"
                await asyncio.sleep(0.01)
            assert deliveries.errors == [boom]  # the handler's own exception, once
            assert handled == [[0, 1]]

            assert await produce_to(kafka_bootstrap, topic, 0, ["k2", "k3"]) == [2, 3]
            await asyncio.sleep(QUIET_S)  # an absence: the stopped reader hands nothing more over
            assert handled == [[0, 1]]
            assert deliveries.errors == [boom]
        # running_reader's stop() returned cleanly after the failure

    run(scenario())


# ------------------------------------------------------------------------------------- highwater


@pytest.mark.timeout(120)
def test_highwater_is_the_end_offset_after_a_fetch(kafka_bootstrap: str) -> None:
    topic = new_topic("highwater")

    async def scenario() -> None:
        await create_topics(kafka_bootstrap, [topic], 2)
        await produce_to(kafka_bootstrap, topic, 0, [f"k{i}" for i in range(5)])
        await produce_to(kafka_bootstrap, topic, 1, ["other"])
        deliveries = Deliveries()
        reader = InputReader(kafka_bootstrap, deliveries.handler, lambda tp: True, deliveries.on_error,
                             **FETCH_OPTIONS)
        try:
            assert reader.highwater(topic, 0) is None  # not started
            with pytest.raises(RuntimeError):
                reader.assign({(topic, 0): 0})  # assign needs start()
            await reader.start()
            await reader.start()  # a second start is a no-op

            reader.assign({(topic, 0): 2})
            assert reader.highwater(topic, 0) is None  # assigned, nothing fetched yet
            await deliveries.until(lambda: len(deliveries.offsets(topic, 0)) >= 3, "offsets 2..4")
            assert deliveries.offsets(topic, 0) == [2, 3, 4]
            assert reader.highwater(topic, 0) == 5  # the end offset, not a count of delivered records
            assert reader.highwater(topic, 1) is None  # same topic, not assigned
            assert reader.highwater(new_topic("absent"), 0) is None

            assert await produce_to(kafka_bootstrap, topic, 0, ["k5", "k6", "k7"]) == [5, 6, 7]
            await deliveries.until(lambda: len(deliveries.offsets(topic, 0)) >= 6, "offsets 5..7")
            assert deliveries.offsets(topic, 0) == [2, 3, 4, 5, 6, 7]
            assert reader.highwater(topic, 0) == 8
            assert not deliveries.errors
        finally:
            await reader.stop()
        assert reader.highwater(topic, 0) is None  # stopped

    run(scenario())


# ---------------------------------------------------------------------------------------- idle fetches


@pytest.mark.timeout(120)
def test_idle_partitions_are_fetched_with_a_long_wait_and_a_record_brings_the_short_one_back(
        kafka_bootstrap: str) -> None:
    """Nothing to read for IDLE_AFTER_S: the broker holds each fetch up to IDLE_FETCH_WAIT_MS (fewer requests);
    the response bringing a record sets 25 ms back before the next request, and the record is handed over at
    once (a fetch held long ends when a record arrives)."""
    from streams.worker.fetch_pacing import IDLE_AFTER_S
    from streams.worker.reader import IDLE_FETCH_WAIT_MS

    topic = new_topic("idle")

    async def scenario() -> None:
        await create_topics(kafka_bootstrap, [topic], 2)
        deliveries = Deliveries()
        async with running_reader(kafka_bootstrap, deliveries) as reader:
            reader.assign({(topic, 0): 0, (topic, 1): 0})
            fetcher = reader._consumer._fetcher
            await deliveries.until(lambda: fetcher._fetch_max_wait_ms == IDLE_FETCH_WAIT_MS, "the idle wait",
                                   timeout=IDLE_AFTER_S + 5)
            await asyncio.sleep(IDLE_FETCH_WAIT_MS / 1000.0)  # a request with the idle wait is in flight
            sent = time.monotonic()
            await produce_to(kafka_bootstrap, topic, 1, ["after-idle"])
            await deliveries.until(lambda: deliveries.keys(topic, 1) == ["after-idle"], "the record")
            delivered = time.monotonic()
            assert delivered - sent < 5  # not held for the fetch's wait (on a loaded machine: generous)
            # short again (unless this machine stalled us for IDLE_AFTER_S since: idle again, rightly)
            assert fetcher._fetch_max_wait_ms == 25 or time.monotonic() - delivered >= IDLE_AFTER_S
            # the next record of the same partition, right after: its fetch was built with the short wait
            await produce_to(kafka_bootstrap, topic, 1, ["next"])
            await deliveries.until(lambda: deliveries.keys(topic, 1) == ["after-idle", "next"], "the next record")

    run(scenario())
