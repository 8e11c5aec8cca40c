"""The combined fault: the broker hangs (SIGSTOP of its JVM) longer than the old limit, under two workers and a
gateway taking calls.

A hung broker answers nothing: after aiokafka's request timeout (40 s) the
workers' last verdict batches expired unsent and their checkpoints'
transactions timed out; both workers exited (status 1, together), and the
gateway dropped the events it could not send. Now each worker goes back to
its last checkpoint, probes the broker, and once it answers (SIGCONT) goes on
from the committed offsets (streams/worker/outage.py); the gateway keeps the
events it took in its outbox and publishes them once the broker is back.

Load: a burst of events straight to the input topic just before the hang
(the workers are mid-way through them when it starts) and senders posting
tool calls through the gateway before, during and after it. Checked, on the
module's own broker (tests/private_broker.py):

* no worker exits, neither logs a crash, and each "Kafka did not answer" has its "Kafka answers again";
* 0 lost: every call the gateway answered 200 is in the input topic exactly once, and every event of the
  input topic has a verdict (a verdict published again is byte for byte the same);
* 0 mismatches: every verdict equals the offline engine's on the input topic's events, in their order.

About two and a half minutes on the 2-core development machine (the 50 s hang, a broker start, two worker
starts, the catch-up); part of ``make test``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter

import aiohttp
import msgpack
import pytest
from aiokafka import AIOKafkaProducer

from streams.runners.gateway import GatewayConfig, serve
from tests.private_broker import broker, free_port  # noqa: F401  (the module's own broker, a fixture)
from tests.runners.gateway_support import call
from tests.worker.test_rebalance import assert_every_verdict_once_as_offline
from tests.worker.test_worker import ENABLED, _fleet_stream, verdicts_by_source
from tests.worker_harness import WorkerProcess, create_topics, encode, whole_topic, worker_settings

pytestmark = pytest.mark.kafka

FROZEN_S = 50.0  # longer than aiokafka's request_timeout_ms (40 s), the old limit
BURST = 6000  # events sent straight to the input topic just before the hang (still being handled when it starts)
SENDERS = 8  # gateway clients, each a run of its own, one call at a time
GATEWAY_TIMEOUT_S = 1.0  # the gateway's verdict wait (a call answered after it: timed_out, the event kept)
OUTBOX = 20_000  # events the gateway keeps for Kafka: more than the hang's calls, so none is refused


async def _send(bootstrap: str, topic: str, events: list[dict]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        await asyncio.gather(*[await producer.send(topic, encode(e), key=e["run_id"].encode()) for e in events])
    finally:
        await producer.stop()


RECOVERY_S = 120  # longest wait, after the verdicts are in, for each worker to say Kafka answers again


def _outages_ended(log: str) -> bool:
    """Each "Kafka did not answer" in a worker's log has its "Kafka answers again"."""
    return log.count("loopwatch: Kafka did not answer") == log.count("loopwatch: Kafka answers again")


@pytest.mark.timeout(480)
def test_two_workers_and_a_gateway_under_load_ride_out_a_hung_broker_and_lose_nothing(broker, tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps(ENABLED))
    shared = worker_settings(broker.bootstrap, tmp_path, partitions=4, config=config)
    topic = shared.input_topics[0]
    asyncio.run(create_topics(broker.bootstrap, [topic, shared.verdicts_topic], 4))
    workers = [WorkerProcess(shared.model_copy(update={"data_dir": str(tmp_path / f"faust-{name}-{{app_id}}")}),
                             tmp_path / f"worker-{name}.log") for name in ("a", "b")]
    burst = list(itertools.islice(_fleet_stream(runs=60), BURST))
    port = free_port()
    answers: list[tuple[str, int, dict]] = []  # (tool_call_id, HTTP status, body)
    alive_during: list[bool] = []

    async def sender(http: aiohttp.ClientSession, n: int, stop: asyncio.Event) -> None:
        for i in itertools.count():
            if stop.is_set():
                return
            event = call(f"gw{n}", i, path=f"/f{i % 3}")
            async with http.post(f"http://127.0.0.1:{port}/v1/events", json=event) as response:
                answers.append((event["tool_call_id"], response.status, await response.json()))
            await asyncio.sleep(0.05)

    async def load_and_hang() -> None:
        stop_gateway, listening, stop_senders = asyncio.Event(), asyncio.Event(), asyncio.Event()
        gateway = asyncio.ensure_future(serve(
            broker.bootstrap, GatewayConfig(timeout=GATEWAY_TIMEOUT_S), port=port, ready=lambda url: listening.set(),
            stop=stop_gateway, client_options={"events_topic": topic, "verdicts_topic": shared.verdicts_topic,
                                               "outbox_events": OUTBOX, "stop_timeout": 60.0}))
        await asyncio.wait_for(listening.wait(), 60)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            senders = [asyncio.ensure_future(sender(http, n, stop_senders)) for n in range(SENDERS)]
            await asyncio.sleep(2)
            await _send(broker.bootstrap, topic, burst)
            broker.freeze()  # mid-stream: the workers are still handling the burst
            try:
                frozen_at = time.monotonic()
                while time.monotonic() - frozen_at < FROZEN_S:
                    alive_during.append(all(worker.proc.poll() is None for worker in workers))
                    await asyncio.sleep(1)
            finally:
                broker.thaw()
            await asyncio.sleep(5)
            stop_senders.set()
            await asyncio.gather(*senders)
        stop_gateway.set()
        await asyncio.wait_for(gateway, 120)  # the drain waits until Kafka has taken the outbox's events

    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.wait_ready()
        asyncio.run(load_and_hang())
        records = asyncio.run(whole_topic(broker.bootstrap, topic, shared.partitions))
        sources = [(topic, record.partition, record.offset) for record in records]
        events = [msgpack.unpackb(record.value, raw=False) for record in records]
        by_source = verdicts_by_source(broker.bootstrap, shared.verdicts_topic, sources, timeout=180, partial=True)
        # the other worker may have published every verdict while this one still rejoins the group (a revoke
        # that waited on the thawed broker): wait for each outage to end before judging the logs
        deadline = time.monotonic() + RECOVERY_S
        while not all(_outages_ended(worker.log_text()) for worker in workers) and time.monotonic() < deadline:
            time.sleep(0.5)
        running = [worker.proc.poll() is None for worker in workers]
        logs = [worker.log_text() for worker in workers]
    finally:
        broker.thaw()
        for worker in workers:
            worker.stop()

    assert running == [True, True] and all(alive_during), [log[-3000:] for log in logs]
    for log in logs:
        assert "We experienced a crash" not in log and "Traceback" not in log, log[-3000:]
    # a worker that felt the hang (a send or checkpoint that Kafka did not answer) came back; one with
    # nothing to send while the broker was frozen may not feel it at all (the gateway's timed-out
    # answers below show the freeze was felt under load)
    assert all(_outages_ended(log) for log in logs), [log[-2000:] for log in logs]
    # the gateway: every call taken, and each exactly once in the input topic (some answered timed_out)
    in_kafka = Counter(event["tool_call_id"] for event in events if event["run_id"].startswith("gw"))
    assert {status for _, status, _ in answers} == {200} and len(answers) > 100
    assert any(body["timed_out"] for _, _, body in answers)  # calls made during the hang
    assert [cid for cid, _, _ in answers if in_kafka[cid] != 1] == [] and sum(in_kafka.values()) == len(answers)
    assert sum(not event["run_id"].startswith("gw") for event in events) == BURST
    # every event has a verdict, each equal to the offline engine's
    assert_every_verdict_once_as_offline(events, sources, by_source)
