"""The worker on a broker of its own that the tests start, stop and restart (tests/private_broker.py).

* A fresh start on topics that do not exist yet: "Ready" only once the input
  partitions are read, and the first event after it answered at once (the
  first assignment used to miss the input topics just created: verdicts came
  ~6 s later, at the next metadata refresh).
* SIGINT and SIGTERM while the broker is down end the worker within
  ``shutdown_timeout_s`` with status 0, one line saying there was no last
  checkpoint, and no traceback (it used to log "Closing event loop" and keep
  running until a second Ctrl-C, which ended in a KeyboardInterrupt traceback); a second Ctrl-C during
  the stop ends the process at once.

The module shares one broker (a JVM start costs 5-15 s); the tests run in file order.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streams.wire.codecs import decode_event
from streams.worker.faust_app import METADATA_MAX_AGE_MS  # the consumer's metadata refresh interval
from tests.private_broker import broker  # noqa: F401  (the module's own broker, a fixture)
from tests.worker_harness import WorkerProcess, encode, worker_settings

pytestmark = pytest.mark.kafka

# From the first event sent after "Ready" to its verdict: a healthy worker takes ~20 ms (more on a loaded
# machine), one that missed its input partitions waited for the next metadata refresh and the
# rebalance it starts. The bound is that refresh interval: a verdict as late as that is the bug, anything
# sooner a loaded machine.
FIRST_VERDICT_S = METADATA_MAX_AGE_MS / 1000.0
SHUTDOWN_S = 10.0  # WorkerSettings.shutdown_timeout_s, the documented bound
SLACK_S = 5.0  # a loaded 2-core machine: signal delivery, interpreter exit


def _event(number: int, run: str = "run-1") -> dict:
    return {"type": "tool_call", "run_id": run, "session_id": "s-1", "tool_call_id": f"c-{number}",
            "tool_name": "read", "args": {"path": str(number)}, "result": "ok", "event_id": f"e-{number}"}


async def _verdict_after_send(bootstrap: str, events_topic: str, verdicts_topic: str, event: dict) -> float:
    """Seconds from sending ``event`` (a consumer already at the verdicts topic) to its verdict."""
    consumer = AIOKafkaConsumer(verdicts_topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                group_id=None, enable_auto_commit=False, metadata_max_age_ms=500)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await consumer.start()
    await producer.start()
    try:
        sent = time.monotonic()
        await producer.send_and_wait(events_topic, encode(event), key=event["run_id"].encode())
        while time.monotonic() - sent < 30:
            for records in (await consumer.getmany(timeout_ms=20)).values():
                if any(decode_event(r.value).get("event_id") == event["event_id"] for r in records):
                    return time.monotonic() - sent
        raise AssertionError(f"no verdict for {event['event_id']} within 30 s")
    finally:
        await producer.stop()
        await consumer.stop()


def _signal_all(workers: list[WorkerProcess], signals: tuple[signal.Signals, ...], bound: float
                ) -> list[tuple[int | None, float]]:
    """Send each worker its signal at once; return per worker (exit status, or None if still running after
    ``bound`` s; seconds to exit)."""
    sent = time.monotonic()
    for worker, sig in zip(workers, signals):
        assert worker.proc is not None
        worker.proc.send_signal(sig)
    results = []
    for worker in workers:
        try:
            status = worker.proc.wait(max(0.0, bound - (time.monotonic() - sent)))  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            results.append((None, time.monotonic() - sent))
            continue
        results.append((status, time.monotonic() - sent))
    return results


@pytest.mark.timeout(150)
def test_a_fresh_start_is_ready_when_it_reads_its_input_and_answers_at_once(broker, tmp_path):
    # Three at once, as a fleet's deployment does: the race was not lost at every single start
    workers = []
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        settings = worker_settings(broker.bootstrap, tmp_path / name, checkpoint_interval_s=60)  # no topic exists
        workers.append(WorkerProcess(settings, tmp_path / f"{name}.log").start())
    try:
        def first_verdict(worker: WorkerProcess) -> float:  # its event sent as soon as it says "Ready"
            worker.wait_ready()
            return asyncio.run(_verdict_after_send(broker.bootstrap, worker.settings.input_topics[0],
                                                   worker.settings.verdicts_topic, _event(1)))

        with ThreadPoolExecutor(len(workers)) as pool:
            took = list(pool.map(first_verdict, workers))
        [(status, _)] = _signal_all(workers[:1], (signal.SIGINT,), SHUTDOWN_S + SLACK_S)
    finally:
        for worker in workers:
            worker.kill()
    logs = [worker.log_text() for worker in workers]
    assert max(took) < FIRST_VERDICT_S, f"first verdicts {took} s after the event"
    assert not [log for log in logs if "not found in cluster metadata" in log or "Ignoring missing topic" in log]
    for log in logs:  # 2 input + 2 rekey partitions, before "Ready"
        assert "loopwatch: reading 4 input partition(s)" in log[:log.index("[^Worker]: Ready")]
    # the broker is up: Ctrl-C writes the last checkpoint (the event's; the timer's is a minute away)
    log = workers[0].log_text()
    assert status == 0 and "loopwatch: last checkpoint written" in log and "no last checkpoint" not in log


@pytest.mark.timeout(200)
def test_sigint_and_sigterm_during_an_outage_end_the_worker_within_the_bound(broker, tmp_path):
    workers = []
    for name in ("int", "term", "twice"):
        # No checkpoint by the timer: the event below waits for the stop's last one, which the broker,
        # down by then, cannot acknowledge.
        (tmp_path / name).mkdir()
        settings = worker_settings(broker.bootstrap, tmp_path / name, checkpoint_interval_s=600)
        workers.append(WorkerProcess(settings, tmp_path / f"{name}.log").start())
    try:
        for worker in workers:
            worker.wait_ready()
            asyncio.run(_verdict_after_send(broker.bootstrap, worker.settings.input_topics[0],
                                            worker.settings.verdicts_topic, _event(1)))
        broker.stop()
        time.sleep(2)  # the clients notice: connections refused, coordinator dead
        workers[2].proc.send_signal(signal.SIGINT)  # type: ignore[union-attr]
        pool = ThreadPoolExecutor(1)
        stopping = pool.submit(_signal_all, workers[:2], (signal.SIGINT, signal.SIGTERM), SHUTDOWN_S + SLACK_S)
        time.sleep(1.0)
        second = time.monotonic()
        workers[2].proc.send_signal(signal.SIGINT)  # type: ignore[union-attr]  # a second Ctrl-C, a second later
        twice_status = workers[2].proc.wait(SHUTDOWN_S)  # type: ignore[union-attr]
        twice_took = time.monotonic() - second
        stops = stopping.result()
        pool.shutdown()
    finally:
        for worker in workers:
            worker.kill()
    for worker, (status, took) in zip(workers, stops):
        log = worker.log_text()
        assert status == 0, f"exit status {status} after {took:.1f} s:\n{log[-3000:]}"
        assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-3000:]
        assert log.count("loopwatch: no last checkpoint: Kafka did not acknowledge it") == 1, log[-3000:]
    twice = workers[2].log_text()  # still stopping at the second Ctrl-C (no checkpoint can be written): exits at once
    # at once: well before the bound (SHUTDOWN_S after the first signal) it would otherwise wait out
    assert twice_status == 0 and twice_took < SHUTDOWN_S / 2, (
        f"{twice_status} after {twice_took:.1f} s:\n{twice[-3000:]}")
    assert "loopwatch: a second signal: exiting now, without a last checkpoint" in twice, twice[-3000:]
    assert "Traceback" not in twice and "KeyboardInterrupt" not in twice, twice[-3000:]
