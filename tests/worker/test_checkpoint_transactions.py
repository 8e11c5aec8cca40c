"""Steps (b) and (c) of a checkpoint: one transaction per partition, a bounded number under way at once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from aiokafka import TopicPartition

from streams.worker.checkpoint import PARALLEL_TRANSACTIONS, Checkpoints
from streams.worker.fencing import Fenced


class _States:
    def snapshot(self, changed: dict) -> None:
        pass

    async def encode_snapshot(self) -> list:
        return []


class _Worker(Checkpoints):
    """The checkpoint protocol over partitions whose transactions take a while, one of them fenced."""

    def __init__(self, fenced: int) -> None:
        self._init_checkpoints()
        self.states = _States()
        self.settings = SimpleNamespace(gc_full_interval_s=0)
        self.app = SimpleNamespace(should_stop=False)
        self._outage_since = None
        self.fenced = fenced
        self.running = 0
        self.most = 0
        self.committed: dict[int, dict] = {}

    async def _commit_partition(self, partition: int, records: list, offsets: dict) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(0.01)  # a transaction's round trips
            if partition == self.fenced:
                raise Fenced(f"changelog partition {partition}: another worker owns it now")
            self.committed[partition] = offsets
        finally:
            self.running -= 1


def test_a_checkpoint_of_many_partitions_runs_a_bounded_number_of_transactions_at_once() -> None:
    partitions = 3 * PARALLEL_TRANSACTIONS + 1
    worker = _Worker(fenced=5)
    handled = {TopicPartition("events", p): 10 * p for p in range(partitions)}
    fenced = asyncio.run(worker._run_checkpoint([], handled, {}))
    assert worker.most == PARALLEL_TRANSACTIONS  # all due together, never more at once
    assert fenced == {5} and worker._failed is None  # a fence is reported, the others committed anyway
    assert sorted(worker.committed) == [p for p in range(partitions) if p != 5]
    assert worker.committed[7] == {TopicPartition("events", 7): 71}  # the offset after the last handled
