"""Faust's consumer thread (changelogs, fleet topics) fetches with a long wait when idle, the short one from a
rebalance's start, and the verdict path (the worker's own reader) stays fast while it is idle."""

from __future__ import annotations

import asyncio
import time

import msgpack
import pytest

from streams.worker.consumer import _CHANGELOG_FETCH_WAIT_MS, CHANGELOG_IDLE_FETCH_WAIT_MS
from streams.worker.fetch_pacing import IDLE_AFTER_S
from tests.worker.test_open_transaction import _rejoin
from tests.worker_harness import consume_all, encode, produce, running_worker, worker_settings

pytestmark = [pytest.mark.kafka]


async def _until(check, what: str, timeout: float) -> float:
    """Wait until ``check()``; the monotonic time it first held."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        await asyncio.sleep(0.02)
    return time.monotonic()


@pytest.mark.timeout(180)
def test_fausts_fetches_wait_long_when_idle_short_from_a_rebalance_and_verdicts_stay_fast(kafka_bootstrap, tmp_path):
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2)

    async def scenario() -> None:
        async with running_worker(settings) as worker:
            thread = worker.app.consumer._thread
            fetcher = thread._ensure_consumer()._fetcher
            wait = lambda: fetcher._fetch_max_wait_ms  # noqa: E731
            await _until(lambda: wait() == CHANGELOG_IDLE_FETCH_WAIT_MS, "idle wait", IDLE_AFTER_S + 30)

            # a rebalance (nothing in the changelogs yet: no record brings the short wait back): the short wait from
            # its start (Faust's recovery seeks after it), idle again later
            generation = worker.app.consumer_generation_id
            seen: set[float] = set()

            def settled() -> bool:
                seen.add(wait())
                return (worker.app.consumer_generation_id != generation and not worker.app.rebalancing
                        and worker.app.tables.recovery.completed.is_set())

            await thread.call_thread(_rejoin, thread._ensure_consumer())
            await _until(settled, "rebalance and recovery", 60)
            assert _CHANGELOG_FETCH_WAIT_MS in seen, seen
            await _until(lambda: wait() == CHANGELOG_IDLE_FETCH_WAIT_MS, "idle wait after the rebalance",
                         IDLE_AFTER_S + 30)

            # the verdict path does not go through this consumer: an event while it is idle gets its verdict
            event = {"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": "c1",
                     "tool_name": "read", "args": {"path": "a"}, "event_id": "e1"}
            await produce(kafka_bootstrap, settings.input_topics[0], [(b"r1", encode(event))])
            verdicts = await consume_all(kafka_bootstrap, settings.verdicts_topic, 1, timeout=60)
            assert [(v["event_id"], v["verdict"]) for v in map(msgpack.unpackb, (r.value for r in verdicts))] == \
                [("e1", "allow")]

    asyncio.run(scenario())
