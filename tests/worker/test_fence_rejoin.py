"""After a fence, a worker the group still assigns the fenced partitions to rejoins (streams/worker/outage.py).

The transaction coordinator fences a writer whose transaction outlived transaction.timeout.ms, as after a
broker that hung past it, without any rebalance: the worker dropped those partitions and waited for an
assignment that never came (a hung-broker run left 25 events without a verdict for minutes).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aiokafka.structs import TopicPartition

from streams.worker import outage
from streams.worker.outage import Outages


class _Worker(Outages):
    def __init__(self, assigned: set[int]) -> None:
        self._init_outages()
        self.rejoins = 0
        consumer = SimpleNamespace(assignment=lambda: {TopicPartition("t", p) for p in assigned})
        self.app = SimpleNamespace(should_stop=False, rebalancing=False, rebalancing_count=3, consumer=consumer)

    async def _rejoin(self) -> None:
        self.rejoins += 1


async def _after_fence(worker: _Worker, partitions: set[int], meanwhile=None) -> int:
    worker._rejoin_if_still_assigned(partitions)
    if meanwhile is not None:
        await asyncio.sleep(0.05)
        meanwhile(worker)
    await worker._fence_rejoin
    return worker.rejoins


@pytest.fixture(autouse=True)
def _short_settle(monkeypatch):
    monkeypatch.setattr(outage, "FENCE_SETTLE_S", 0.3)


def test_still_assigned_and_no_rebalance_rejoins():
    assert asyncio.run(_after_fence(_Worker({1, 3}), {1, 3})) == 1


def test_a_rebalance_meanwhile_is_enough():
    def rebalanced(worker):
        worker.app.rebalancing_count += 1
    assert asyncio.run(_after_fence(_Worker({1, 3}), {1, 3}, rebalanced)) == 0


def test_partitions_another_worker_was_given_need_no_rejoin():
    assert asyncio.run(_after_fence(_Worker({0, 2}), {1, 3})) == 0


def test_a_stopping_worker_does_not_rejoin():
    def stopping(worker):
        worker.app.should_stop = True
    assert asyncio.run(_after_fence(_Worker({1, 3}), {1, 3}, stopping)) == 0
