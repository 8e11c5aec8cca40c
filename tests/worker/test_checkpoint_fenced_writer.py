"""A checkpoint that starts after a fence and before the worker has handled it never begins a transaction on the
fenced writer (no broker: aiokafka's own transaction state machine under a stand-in producer).

The sequence seen once under load (tests/worker/test_transaction_timeout.py): a checkpoint's changelog batch of
partition 0 is refused for a stale epoch (``ProducerFenced`` on the batch; aiokafka leaves the writer
``IN_TRANSACTION``); the checkpoint ends reporting partition 0 fenced and leaves the loss to ``_lose_later``, which
waits for the worker's lock; a checkpoint tick holding the lock first starts the next checkpoint, which covers
partition 0 again. It used to call ``begin_transaction`` on the same writer: aiokafka's
``Invalid state transition IN_TRANSACTION -> IN_TRANSACTION``, and the worker crashed.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import ProducerFenced
from aiokafka.producer.transaction_manager import TransactionManager

from streams.worker.checkpoint import Checkpoints
from streams.worker.fencing import Fenced, PartitionWriters
from tests.worker.test_checkpoint_transactions import _States


class _Writer:
    """A transactional producer as far as a checkpoint uses it, over aiokafka's real transaction manager.

    ``fence_sends`` makes each changelog batch fail as a produce refused for a stale epoch does
    (``ProducerFenced`` on the batch, the transaction state left as it is)."""

    def __init__(self, partition: int) -> None:
        self.partition, self.stopped, self.fence_sends, self.commits = partition, False, False, 0
        self._txn_manager = TransactionManager(f"lw-unit-states-{partition}", 1000)
        self._txn_manager.set_pid_and_epoch(1, 0)  # started: READY

    async def begin_transaction(self) -> None:
        self._txn_manager.begin_transaction()

    async def send_offsets_to_transaction(self, offsets: dict, group_id: str) -> None:
        assert self._txn_manager.is_in_transaction()

    async def commit_transaction(self) -> None:
        self._txn_manager.committing_transaction()
        self._txn_manager.complete_transaction()
        self.commits += 1

    async def stop(self) -> None:
        self.stopped = True


class _Table:
    async def write(self, out: Any, partition: int, records: list) -> list:
        writer = out._producer
        assert writer._txn_manager.is_in_transaction()
        future = asyncio.get_running_loop().create_future()
        if writer.fence_sends:
            future.set_exception(ProducerFenced())
        else:
            future.set_result(None)
        return [(records, future)]

    def store_committed(self, partition: int, batches: list) -> None:
        pass


class _Worker(Checkpoints):
    def __init__(self, writers: PartitionWriters) -> None:
        self._init_checkpoints()
        self.states, self.table, self._writers = _States(), _Table(), writers
        self._changelog_partitions = {"lw-unit-states-changelog": 2}
        self.settings = SimpleNamespace(gc_full_interval_s=0)
        self.crashed: list[BaseException] = []

        async def crash(exc: BaseException) -> None:
            self.crashed.append(exc)

        self.app = SimpleNamespace(should_stop=False, conf=SimpleNamespace(id="lw-unit"), crash=crash)
        self._outage_since = None


def _writers(monkeypatch: Any) -> tuple[PartitionWriters, list[_Writer]]:
    """Writers whose start makes a :class:`_Writer` (no broker); the list holds every one started, in order."""
    writers, started = PartitionWriters("127.0.0.1:1", "lw-unit"), []

    async def start(partition: int) -> tuple[int, Any]:
        started.append(_Writer(partition))
        return partition, started[-1]

    monkeypatch.setattr(writers, "_start", start)
    return writers, started


def _handled(*partitions: int) -> dict:
    return {TopicPartition("events", p): 10 for p in partitions}


def test_a_checkpoint_before_the_fence_is_handled_does_not_begin_on_the_fenced_writer(monkeypatch) -> None:
    writers, started = _writers(monkeypatch)
    worker = _Worker(writers)

    async def scenario() -> tuple[set[int], set[int], set[int]]:
        await writers.own([0, 1], generation=3)
        fenced_writer = writers.get(0)
        fenced_writer.fence_sends = True  # the coordinator aborted its transaction and bumped the epoch
        first = await worker._run_checkpoint([], _handled(0, 1), {})
        assert fenced_writer._txn_manager.state.name == "IN_TRANSACTION"  # what aiokafka leaves after the refusal
        # _lose_later has not run yet (it waits for the lock): the next checkpoint covers partition 0 again
        second = await worker._run_checkpoint([], _handled(0, 1), {})
        await asyncio.sleep(0)  # a crash would be scheduled by now
        # the assignment after the rejoin: fresh writers for every partition, the fenced one stopped
        await writers.own([0, 1], generation=4)
        third = await worker._run_checkpoint([], _handled(0, 1), {})
        return first, second, third

    first, second, third = asyncio.run(scenario())
    assert (first, second, third) == ({0}, {0}, set())
    assert worker._failed is None and worker.crashed == []
    assert [w.partition for w in started] == [0, 1, 0, 1]
    assert started[0].stopped and started[0].commits == 0  # the fenced writer never committed, then was stopped
    assert started[1].commits == 2 and started[1].stopped  # partition 1 committed until the renewal
    assert started[2].commits == 1 and started[3].commits == 1


def test_a_writer_whose_transaction_did_not_end_is_given_up_not_reused(monkeypatch) -> None:
    writers, _ = _writers(monkeypatch)

    async def scenario() -> None:
        await writers.own([0, 1, 2], generation=7)
        open_one, failed_one = writers.get(0), writers.get(1)
        open_one._txn_manager.begin_transaction()  # a checkpoint cancelled half-way (an outage) left it open
        failed_one._txn_manager.begin_transaction()
        failed_one._txn_manager.fatal_error(ProducerFenced())  # its sender failed during a transaction
        for partition in (0, 1):
            try:
                writers.get(partition)
            except Fenced:
                pass
            else:
                raise AssertionError(f"writer {partition} handed out")
            assert partition not in writers
        kept = writers.get(2)
        assert kept._txn_manager.state.name == "READY"
        await writers.own([0, 1, 2], generation=8)  # next generation: every writer fresh, the given-up ones stopped
        assert open_one.stopped and failed_one.stopped and kept.stopped
        assert all(writers.get(p) not in (open_one, failed_one, kept) for p in (0, 1, 2))

    asyncio.run(scenario())
