"""States.clear (a rebalance): the worker's cache is empty at once, the dropped states are freed a slice at a
time while the event loop goes on (freed at once, a long-running worker's states held the loop for seconds)."""

from __future__ import annotations

import asyncio
import time

from streams.detection import SessionState
from streams.worker.states import States


def test_clear_empties_the_cache_at_once_and_frees_the_states_between_other_work():
    async def run() -> tuple:
        states = States(table=None, encode=lambda state: b"")
        for number in range(20_000):
            states.cache[b"k%d" % number] = SessionState()
            states.last_seen[b"k%d" % number] = 1.0
        dropped = states.cache
        ticks: list[float] = []

        async def other_work() -> None:  # what the loop does meanwhile: verdicts, heartbeats
            while dropped:
                ticks.append(time.perf_counter())
                await asyncio.sleep(0)

        worker = asyncio.ensure_future(other_work())
        await asyncio.sleep(0)
        states.clear()
        empty_at_once = (len(states.cache), len(states.last_seen), len(dropped) > 0)
        await asyncio.wait_for(worker, 60)
        return empty_at_once, dropped, ticks

    empty_at_once, dropped, ticks = asyncio.run(run())
    assert empty_at_once == (0, 0, True)  # the new cache is empty; the old one still holds states to free
    assert dropped == {}  # all freed in the end
    assert len(ticks) > 10  # the loop ran other work between the slices


def test_clear_outside_a_running_loop_frees_at_once():
    states = States(table=None, encode=lambda state: b"")
    states.cache[b"k"] = SessionState()
    dropped = states.cache
    states.clear()
    assert states.cache == {} and dropped == {}
