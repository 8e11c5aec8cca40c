"""The client in a broker outage, on a broker of the module's own (tests/private_broker.py), stopped and restarted
under a running client and worker.

One flow, phase by phase (a broker start costs 5-15 s, so the phases share them):

1. Kafka down at start: ``async with LoopwatchClient(...)`` does not raise (it raised KafkaConnectionError);
   each check gets the ``on_timeout`` verdict at once; aiokafka's lines are rate-limited (~65 a second before).
2. The broker and a worker come up: the client connects by itself and answers normally.
3. The broker stops and restarts mid-stream (once the worker has checkpointed what it answered): checks during
   the gap get the policy's verdict within their timeout, the client answers normally after it, and every
   event sent while the broker was up has exactly one verdict in the verdicts topic (nothing lost, nothing
   doubled).
4. Leaving ``async with`` while the broker is down returns within ``stop_timeout`` without CancelledError
   (it hung for tens of seconds, then raised CancelledError).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter

import pytest

from streams.runners.client import LoopwatchClient, Verdict
from streams.wire.codecs import decode_event
from tests.private_broker import PrivateBroker
from tests.worker_harness import WorkerProcess, committed_to_end, whole_topic, worker_settings

pytestmark = pytest.mark.kafka

TIMEOUT_S = 1.0  # per check
ANSWER_S = 30.0  # per check that must get the worker's verdict (a loaded machine)
STOP_TIMEOUT_S = 3.0
SLACK_S = 1.5  # a loaded 2-core machine


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    own = PrivateBroker(tmp_path_factory.mktemp("kafka"))  # not started: the flow starts it
    yield own
    if own.is_up():
        own.stop()


class _Checks:
    """Sends numbered tool calls through ``client``; keeps each event id with its verdict."""

    def __init__(self, client: LoopwatchClient) -> None:
        self.client = client
        self.number = 0
        self.answered: list[tuple[str, Verdict, float]] = []  # (event id, verdict, seconds it took)

    async def one(self, timeout: float | None = None) -> Verdict:
        """One check, with the client's timeout (TIMEOUT_S) unless ``timeout`` is given."""
        self.number += 1
        event = {"type": "tool_call", "run_id": "run-1", "session_id": "s-1", "tool_call_id": f"c-{self.number}",
                 "tool_name": "read", "args": {"path": f"/f{self.number}"}, "result": "ok",
                 "event_id": f"e-{self.number}"}
        started = time.monotonic()
        verdict = await self.client.check(event, timeout=timeout)
        self.answered.append((event["event_id"], verdict, time.monotonic() - started))
        return verdict

    async def until_answered(self, within: float) -> float:
        """Check every 0.2 s until the worker answers one; return the seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < within:
            if (await self.one()).record is not None:
                return time.monotonic() - started
            await asyncio.sleep(0.2)
        raise AssertionError(f"no verdict from the worker within {within} s: {self.answered[-3:]}")


async def _whole_topic(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every record value of ``topic`` (``partitions`` partitions), up to its end offsets as of now."""
    return [record.value for record in await whole_topic(bootstrap, topic, partitions)]


def _in_time_and_by_policy_if_unanswered(verdict: Verdict, took: float) -> bool:
    return took <= TIMEOUT_S + SLACK_S and (verdict.record is not None or verdict.verdict == "block")


@pytest.mark.timeout(300)
def test_a_client_starts_answers_reconnects_and_stops_whatever_the_broker_does(broker, tmp_path, caplog):
    settings = worker_settings(broker.bootstrap, tmp_path)
    worker = WorkerProcess(settings, tmp_path / "worker.log")

    async def flow() -> None:
        caplog.set_level(logging.WARNING)
        client = LoopwatchClient(broker.bootstrap, settings.input_topics[0], settings.verdicts_topic,
                                 on_timeout="block", timeout=TIMEOUT_S, stop_timeout=STOP_TIMEOUT_S)
        checks = _Checks(client)
        # 1. Kafka down at start
        started = time.monotonic()
        async with client:
            # starts without waiting for Kafka (a start that waited for the broker would never end here)
            assert time.monotonic() - started < 60.0
            for _ in range(10):
                verdict = await checks.one()
                assert verdict.verdict == "block" and verdict.record is None and not verdict.timed_out
                assert "not connected to Kafka" in verdict.error and "failing closed" in verdict.message
            assert max(took for _, _, took in checks.answered) < TIMEOUT_S  # at once, not after the timeout
            await asyncio.sleep(1.5)
            kafka_lines = [r for r in caplog.records if r.name.startswith("aiokafka")]
            assert len(kafka_lines) <= 8, [r.getMessage() for r in kafka_lines]  # a few kinds, once per 10 s

            # 2. the broker and a worker come up: the client connects by itself
            await asyncio.to_thread(broker.start)
            worker.start()
            await asyncio.to_thread(worker.wait_ready)
            await checks.until_answered(within=30)
            up_before = len(checks.answered)
            for _ in range(20):
                assert (await checks.one(ANSWER_S)).record is not None

            # 3. a broker restart mid-stream, once a checkpoint covers those events: else the worker goes
            # back to the one before and publishes their verdicts again (byte-identical, streams.worker.checkpoint)
            sent_while_up = [event_id for event_id, verdict, _ in checks.answered[up_before:]]
            await committed_to_end(broker.bootstrap, settings.app_id, settings.input_topics[0], settings.partitions,
                                   timeout=ANSWER_S)
            await asyncio.to_thread(broker.stop)
            gap_from = len(checks.answered)
            for _ in range(3):
                await checks.one()
            gap = checks.answered[gap_from:]
            restarting = asyncio.ensure_future(asyncio.to_thread(broker.start))
            while not restarting.done():
                await checks.one()
                gap = checks.answered[gap_from:]
            await restarting
            # the worker rides the restart out too: it probes with backoff, then rejoins its group
            await checks.until_answered(within=120)
            after_from = len(checks.answered)
            for _ in range(20):
                assert (await checks.one(ANSWER_S)).record is not None
            sent_while_up += [event_id for event_id, _, _ in checks.answered[after_from:]]
            counts = Counter(decode_event(value)["event_id"]
                             for value in await _whole_topic(broker.bootstrap, settings.verdicts_topic, settings.partitions))

            # 4. leaving `async with` during an outage
            await asyncio.to_thread(broker.stop)
            await checks.one()  # a record the producer holds, with no broker to take it
            leaving = time.monotonic()
        left = time.monotonic() - leaving
        assert left <= STOP_TIMEOUT_S + SLACK_S
        assert [v for _, v, _ in gap[:3] if v.record is not None] == []  # the broker down: nobody answers
        assert [v for _, v, took in gap if not _in_time_and_by_policy_if_unanswered(v, took)] == []
        assert {event_id: counts[event_id] for event_id in sent_while_up if counts[event_id] != 1} == {}
        assert max(counts.values()) == 1  # the gap's events too (sent once the broker was back): at most one each

    try:
        asyncio.run(flow())
    except AssertionError as exc:  # what the worker did meanwhile, to tell its fault from the client's
        lines = [line for line in (worker.log_text() if worker.log_path.exists() else "").splitlines()
                 if "Unable connect" not in line]
        raise AssertionError(f"{exc}\n---- worker log, last lines ----\n" + "\n".join(lines[-80:])) from None
    finally:
        worker.kill()
