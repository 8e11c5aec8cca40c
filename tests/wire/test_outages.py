"""streams.wire.outages: metadata refreshes paced while the broker is down; consumers and producers stopped
in bounded time without a stray CancelledError. No broker: a port nobody listens on."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from aiokafka import AIOKafkaClient, AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError

from streams.wire import outages
from streams.wire.outages import Backoff, pace_metadata, stop_consumer, stop_producer


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Updates:
    """A stand-in client whose metadata refreshes succeed or fail as scripted."""

    def __init__(self, results: list[bool]) -> None:
        self.results = results

    async def _metadata_update(self, cluster: object, topics: object) -> bool:
        return self.results.pop(0)


def test_failed_refreshes_wait_doubling_up_to_the_most_and_a_success_resets(monkeypatch):
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(outages.asyncio, "sleep", sleep)
    client = pace_metadata(_Updates([False] * 6 + [True, False]), 0.1, 0.5)

    async def run() -> list[bool]:
        return [await client._metadata_update(None, None) for _ in range(8)]

    assert asyncio.run(run()) == [False] * 6 + [True, False]
    assert waits == [0.1, 0.2, 0.4, 0.5, 0.5, 0.5, 0.1]  # nothing after the success; the next failure starts over


def test_pacing_twice_waits_once_per_failure(monkeypatch):
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(outages.asyncio, "sleep", sleep)
    client = pace_metadata(pace_metadata(_Updates([False]), 0.1, 1.0), 0.1, 1.0)
    assert asyncio.run(client._metadata_update(None, None)) is False
    assert waits == [0.1]


def test_backoff_rejects_a_most_below_the_first():
    with pytest.raises(ValueError, match="retry_ms <= reconnect_max_ms"):
        Backoff(500, 100)


@pytest.mark.timeout(30)
def test_a_client_asked_again_and_again_while_the_broker_is_down_tries_a_few_times_a_second():
    """aiokafka's sender and fetcher ask for a refresh again as soon as one ends; unpaced, each failed
    refresh against a refused port takes microseconds: thousands a second."""

    async def refreshes(paced: bool) -> int:
        client = AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{_closed_port()}")
        if paced:
            Backoff(100, 400).apply(client)
        count, until = 0, time.monotonic() + 1.5
        while time.monotonic() < until:
            with pytest.raises(KafkaError):
                await client.fetch_all_metadata()
            count += 1
        await client.close()
        return count

    assert asyncio.run(refreshes(paced=False)) > 200  # what aiokafka does on its own
    # 0.1 + 0.2 + 0.4 + 0.4 ... in 1.5 s: at most 6; a loaded machine may fit fewer, never more
    assert 1 <= asyncio.run(refreshes(paced=True)) <= 6


@pytest.mark.timeout(60)
def test_stopping_a_consumer_and_a_producer_while_the_broker_is_down_ends_in_bounded_time():
    async def run() -> tuple[float, bool]:
        bootstrap = f"127.0.0.1:{_closed_port()}"
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        started = time.monotonic()
        await stop_consumer(consumer)  # never started: stop is a no-op that must not raise
        delivered = await stop_producer(producer, timeout=2.0)
        return time.monotonic() - started, delivered

    took, delivered = asyncio.run(run())
    assert took < 2.0 + 3.0 and delivered  # the producer's 2 s bound, and slack for a loaded machine


@pytest.mark.timeout(30)
def test_a_real_cancellation_of_the_caller_still_cancels_a_consumer_stop():
    class Stuck:
        class _client:
            @staticmethod
            async def close() -> None:
                raise AssertionError("not reached")

        async def stop(self) -> None:
            await asyncio.sleep(10)

    async def run() -> bool:
        task = asyncio.ensure_future(stop_consumer(Stuck()))
        await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert asyncio.run(run())


@pytest.mark.timeout(30)
def test_a_cancelled_error_from_inside_a_consumer_stop_is_absorbed_and_the_connections_closed():
    closed = []

    class Fetching:  # aiokafka's Fetcher.close awaits the fetch tasks it just cancelled
        class _client:
            @staticmethod
            async def close() -> None:
                closed.append(True)

        async def stop(self) -> None:
            task = asyncio.ensure_future(asyncio.sleep(10))
            await asyncio.sleep(0)
            task.cancel()
            await task

    asyncio.run(stop_consumer(Fetching()))
    assert closed == [True]
