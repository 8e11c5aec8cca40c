"""Loopwatch._open_outputs (streams.worker.producers): the worker's own producers are stopped on every failure path
(no broker needed)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from streams.worker.app import Loopwatch
from streams.worker.settings import WorkerSettings


class _Producer:
    def __init__(self, name: str) -> None:
        self.name, self.stopped, self.client = name, False, None

    async def stop(self) -> None:
        self.stopped = True


def _worker(tmp_path: Path) -> Loopwatch:
    return Loopwatch(WorkerSettings(broker="kafka://127.0.0.1:1", app_id="lw-unit", input_topics=["unit.events"],
                                    metrics_port=0, data_dir=str(tmp_path / "faust")))


@pytest.mark.parametrize("failure", [RuntimeError("broker gone"), asyncio.CancelledError()],
                         ids=["error", "cancelled"])
def test_the_producer_started_is_stopped_when_the_next_step_fails(tmp_path, monkeypatch, failure):
    worker = _worker(tmp_path)
    started: list[_Producer] = []

    async def new_producer(name: str) -> Any:
        started.append(_Producer(name))
        return started[-1]

    async def partition_counts(*args: Any, **kwargs: Any) -> Any:  # the topics' metadata cannot be read
        raise failure

    monkeypatch.setattr("streams.worker.producers._partition_counts", partition_counts)

    async def declared() -> None:
        pass

    monkeypatch.setattr(worker, "_new_producer", new_producer)
    for topic in (worker.verdicts, worker.loop_events, worker.dead_letters, *worker.fleet.declare()):
        monkeypatch.setattr(topic, "maybe_declare", declared)

    async def run() -> None:
        with pytest.raises(type(failure)):
            await worker._open_outputs()

    asyncio.run(run())
    assert [p.name for p in started] == ["outputs"]
    assert started[0].stopped  # not left running (its connections and sender task)
    assert worker._producers == () and worker._out is None


def test_every_producer_is_stopped_when_one_stop_raises():
    from streams.worker.producers import _stop

    class _Failing(_Producer):
        async def stop(self) -> None:
            self.stopped = True
            raise RuntimeError("stop failed")

    first, second = _Failing("outputs"), _Producer("states")
    with pytest.raises(RuntimeError, match="stop failed"):
        asyncio.run(_stop(first, second))
    assert first.stopped and second.stopped
