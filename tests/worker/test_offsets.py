"""streams.worker.offsets.CommittedOffsets against the real broker: a group's committed offsets, read without
joining the group, exactly as committed; a partition the group never committed gives None; an offset commit a
transaction holds pending is waited for (OffsetFetch v7, require_stable), never read past; a broker that does not
answer raises (the worker's assignment then tries again). Without a broker: the retries, against a coordinator
that answers what a test tells it."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import OffsetAndMetadata

from streams.worker.offset_fetch import OffsetFetchResponse_v7
from streams.worker.offsets import CommittedOffsets, UnstableOffsets
from tests.worker_harness import create_topics


@pytest.mark.kafka
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


@pytest.mark.kafka
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


@pytest.mark.kafka
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


class _Coordinator:
    """Answers each OffsetFetch with the next of ``answers`` (group error code, {partition: (offset, error code)})."""

    def __init__(self, topic: str, answers: list[tuple[int, dict[int, tuple[int, int]]]]) -> None:
        self.topic, self.answers, self.asked, self.found = topic, answers, 0, 0
        self._client = self

    async def find_coordinator(self, group: str) -> int:
        self.found += 1
        return 1

    async def send(self, node: int, request) -> OffsetFetchResponse_v7:
        assert request.prepare({9: (0, 9)}).require_stable is True
        group_error, partitions = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        rows = [(p, offset, -1, "", error, {}) for p, (offset, error) in sorted(partitions.items())]
        return OffsetFetchResponse_v7(0, [(self.topic, rows, {})], group_error, {})

    async def close(self) -> None:
        pass


def _read_from(coordinator: _Coordinator, tps: list[TopicPartition], stable_wait_s: float = 5.0) -> dict:
    offsets = CommittedOffsets("unused:1", "g", "c", stable_wait_s=stable_wait_s)

    async def started() -> _Coordinator:
        return coordinator

    offsets._started = started  # type: ignore[method-assign]
    return asyncio.run(offsets.read(tps))


def test_unstable_partitions_are_asked_again_until_stable():
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    coordinator = _Coordinator("t", [(0, {0: (-1, 88), 1: (4, 0)}), (0, {0: (-1, 88), 1: (4, 0)}),
                                     (0, {0: (12, 0), 1: (4, 0)})])
    assert _read_from(coordinator, tps) == {tps[0]: 12, tps[1]: 4}
    assert coordinator.asked == 3 and coordinator.found == 1


def test_a_coordinator_that_moved_is_looked_up_again():
    tps = [TopicPartition("t", 0)]
    coordinator = _Coordinator("t", [(16, {}), (14, {}), (0, {0: (-1, 0)})])  # NOT_COORDINATOR, LOAD_IN_PROGRESS
    assert _read_from(coordinator, tps) == {tps[0]: None}
    assert coordinator.asked == 3 and coordinator.found == 3


def test_other_errors_raise_at_once():
    from aiokafka.errors import GroupAuthorizationFailedError, UnknownTopicOrPartitionError

    with pytest.raises(GroupAuthorizationFailedError):
        _read_from(_Coordinator("t", [(30, {})]), [TopicPartition("t", 0)])
    with pytest.raises(UnknownTopicOrPartitionError, match=r"t\[0\]"):
        _read_from(_Coordinator("t", [(0, {0: (-1, 3)})]), [TopicPartition("t", 0)])


def test_still_unstable_past_the_stable_wait_raises():
    with pytest.raises(UnstableOffsets, match=r"t\[0\].*still pending after 0.2 s"):
        _read_from(_Coordinator("t", [(0, {0: (-1, 88)})]), [TopicPartition("t", 0)], stable_wait_s=0.2)
