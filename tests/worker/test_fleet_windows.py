"""The fleet view's store: one table record per signature per flush, expired windows dropped, tombstones.

No broker: a producer that acknowledges every batch at once, with offsets counted per partition.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import msgpack
from aiokafka.producer.message_accumulator import BatchBuilder
from faust.types import TP

from streams.detection.fleet import window_ranges
from streams.worker.app import Loopwatch
from streams.worker.settings import WorkerSettings


class _Producer:
    """Acknowledges each batch at once; ``records`` lists what it got as (partition, key, value)."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes, bytes | None]] = []
        self._next: dict[int, int] = {}

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(16384, 0)

    async def send_batch(self, builder: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        offset = self._next.get(partition, 0)
        self._next[partition] = offset + builder.record_count()
        future.set_result(SimpleNamespace(topic_partition=TP(topic, partition), offset=offset))
        return future


def _obs(run: int, ts_s: float, sig: str = "error:web_fetch:1") -> dict:
    return {"sig": sig, "kind": "error", "tool": "web_fetch", "args_hash": "a", "result_hash": None,
            "detector": None, "unknown_tool": None, "match": None, "run": f"run-{run}", "session": "s",
            "agent": "agent", "ts": int(ts_s * 1000), "event_id": f"e{run}", "where": f"t:0:{run}"}


def test_each_flush_writes_one_record_per_changed_signature_and_drops_expired_windows(tmp_path: Path) -> None:
    worker = Loopwatch(WorkerSettings(broker="kafka://127.0.0.1:1", app_id="lw-unit", input_topics=["unit.events"],
                                      partitions=2, metrics_port=0, data_dir=str(tmp_path / "faust")))
    fleet = worker.fleet
    producer = _Producer()
    fleet.producer = lambda: producer
    write = fleet.table.write

    async def recorded(out, partition, records):  # what goes to the changelog, as (partition, key, value)
        producer.records.extend((partition, key, value) for key, value in records)
        return await write(out, partition, records)

    fleet.table.write = recorded
    windows, correlator, settings = fleet.windows, fleet.correlator, fleet.settings  # 600 s windows, 60 s step

    def observe(obs: dict, partition: int) -> None:
        windows.partition = partition
        correlator.observe(obs)
        windows.latest = correlator.latest

    async def run() -> None:
        t0 = 1_800_000_000.0
        for run_number in range(30):  # 30 observations of one signature, 2 of another, within a minute
            observe(_obs(run_number, t0 + run_number), 1)
        observe(_obs(1, t0, sig="error:exec:2"), 0)
        observe(_obs(2, t0 + 5, sig="error:exec:2"), 0)
        await fleet.flush()
        assert sorted((p, k) for p, k, _ in producer.records) == [(0, b"error:exec:2"), (1, b"error:web_fetch:1")]
        stored = msgpack.unpackb(worker.fleet.table.data[b"error:web_fetch:1"])
        assert [(start, end) for start, end, _ in stored] == window_ranges(t0, settings.window_s, settings.step_s)
        assert all(aggregate["count"] == 30 for _, _, aggregate in stored)
        assert fleet.table.key_partitions == {b"error:web_fetch:1": 1, b"error:exec:2": 0}

        await fleet.flush()  # nothing changed: nothing written
        assert len(producer.records) == 2

        # much later, only the second signature is observed: its old windows go, the first is swept
        later = t0 + settings.expires + 1000
        observe(_obs(3, later, sig="error:exec:2"), 0)
        await fleet.flush()
        assert producer.records[2][:2] == (0, b"error:exec:2")
        assert [start for start, _, _ in msgpack.unpackb(producer.records[2][2])] == [
            start for start, _ in window_ranges(later, settings.window_s, settings.step_s)]
        windows.forget()  # a rebalance: the copies in memory go, the table stays
        windows.sweep({0, 1})
        await fleet.flush()
        assert producer.records[3] == (1, b"error:web_fetch:1", None)  # every window expired: a tombstone
        assert b"error:web_fetch:1" not in fleet.table.data and fleet.table.key_partitions == {b"error:exec:2": 0}
        assert worker.fleet.table.data.persisted_offset(TP(fleet.table.changelog_topic.get_topic_name(), 1)) == 1

    asyncio.run(run())


def test_a_flush_of_many_signatures_lets_the_event_loop_run_and_writes_each_once(tmp_path: Path) -> None:
    worker = Loopwatch(WorkerSettings(broker="kafka://127.0.0.1:1", app_id="lw-unit", input_topics=["unit.events"],
                                      partitions=2, metrics_port=0, data_dir=str(tmp_path / "faust")))
    fleet, producer = worker.fleet, _Producer()
    fleet.producer = lambda: producer
    sigs = [f"error:web_fetch:{n}" for n in range(450)]
    ticks: list[int] = []  # written records when another task got the loop

    async def run() -> int:
        for number, sig in enumerate(sigs):
            fleet.windows.partition = number % 2
            fleet.correlator.observe(_obs(number, 1_000_000.0, sig=sig))
        fleet.windows.latest = fleet.correlator.latest
        stop = asyncio.Event()

        async def other() -> None:  # the verdict path, wanting the loop while the flush packs
            while not stop.is_set():
                ticks.append(len(producer.records))
                await asyncio.sleep(0)

        task = asyncio.ensure_future(other())
        await asyncio.sleep(0)
        write = fleet.table.write

        async def recorded(out, partition, records):
            producer.records.extend((partition, key, value) for key, value in records)
            return await write(out, partition, records)

        fleet.table.write = recorded
        written = await fleet.windows.flush(producer)
        stop.set()
        await task
        return written

    written = asyncio.run(run())
    assert written == len(sigs) and sorted(key for _, key, _ in producer.records) == sorted(s.encode() for s in sigs)
    # the loop ran other tasks while the 450 signatures were packed (before any was written): once per 100
    assert ticks.count(0) >= 1 + len(sigs) // 100
