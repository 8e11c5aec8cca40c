"""PartitionWriters: which partitions get a fresh (fencing) changelog writer at an assignment (no broker)."""

from __future__ import annotations

import asyncio

import pytest

from streams.worker.fencing import Fenced, is_fenced
from tests.worker.test_checkpoint_fenced_writer import _writers


def test_a_partition_kept_from_the_generation_before_keeps_its_writer(monkeypatch):
    writers, started = _writers(monkeypatch)
    asyncio.run(writers.own([0, 1], generation=5))
    first = {p: writers.get(p) for p in (0, 1)}
    asyncio.run(writers.own([1, 2], generation=6))
    assert writers.get(1) is first[1] and [w.partition for w in started] == [0, 1, 2]
    assert first[0].stopped and not first[1].stopped
    with pytest.raises(Fenced):
        writers.get(0)  # not owned any more


def test_after_a_gap_in_generations_or_a_fence_every_writer_is_fresh(monkeypatch):
    writers, started = _writers(monkeypatch)
    asyncio.run(writers.own([0, 1], generation=5))
    # generation 6 went by without this worker (removed from the group): another may have owned 0 and 1
    asyncio.run(writers.own([0, 1], generation=7))
    assert [w.partition for w in started] == [0, 1, 0, 1] and started[0].stopped and started[1].stopped
    writers.renew()  # a writer was fenced
    asyncio.run(writers.own([0], generation=8))
    assert [w.partition for w in started] == [0, 1, 0, 1, 0] and writers.get(0) is started[-1]
    asyncio.run(writers.close())
    assert all(w.stopped for w in started)


def test_fenced_errors_are_told_apart():
    from aiokafka.errors import InvalidProducerEpoch, KafkaConnectionError, ProducerFenced

    assert is_fenced(ProducerFenced()) and is_fenced(InvalidProducerEpoch()) and is_fenced(Fenced("x"))
    assert not is_fenced(KafkaConnectionError()) and not is_fenced(RuntimeError("x"))
