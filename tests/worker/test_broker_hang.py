"""Two workers ride out a broker that hangs (SIGSTOP of its JVM) for longer than a request times out.

A hung broker answers nothing: after aiokafka's request timeout (40 s) the
workers' last verdict batches expire unsent and their checkpoints' transactions
time out. They used to exit (status 1, both at once). Now each goes back to its
last checkpoint, probes the broker, and once it answers (SIGCONT) goes on from
the committed offsets (streams/worker/outage.py): every event gets a verdict, a
verdict published again is byte-identical, all equal the offline engine's, and
no worker exits. The broker is the module's own (tests/private_broker.py).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time

import pytest
from aiokafka import AIOKafkaProducer

from tests.private_broker import broker  # noqa: F401  (the module's own broker, a fixture)
from tests.worker.test_rebalance import assert_every_verdict_once_as_offline
from tests.worker.test_worker import ENABLED, _fleet_stream, verdicts_by_source
from tests.worker_harness import WorkerProcess, create_topics, encode, worker_settings

pytestmark = pytest.mark.kafka

FROZEN_S = 50.0  # longer than aiokafka's request_timeout_ms (40 s), the old limit
BEFORE, AFTER = 6000, 1500  # events sent just before the freeze (still being handled when it starts), and after


async def _send(bootstrap: str, topic: str, events: list[dict]) -> list[tuple[str, int, int]]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, encode(e), key=e["run_id"].encode()) for e in events]
        return [(m.topic, m.partition, m.offset) for m in await asyncio.gather(*futures)]
    finally:
        await producer.stop()


@pytest.mark.timeout(480)
def test_two_workers_ride_out_a_hung_broker_and_lose_nothing(broker, tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps(ENABLED))
    shared = worker_settings(broker.bootstrap, tmp_path, partitions=4, config=config)
    topic = shared.input_topics[0]
    asyncio.run(create_topics(broker.bootstrap, [topic], 4))
    workers = [WorkerProcess(shared.model_copy(update={"data_dir": str(tmp_path / f"faust-{name}-{{app_id}}")}),
                             tmp_path / f"worker-{name}.log") for name in ("a", "b")]
    stream = _fleet_stream(runs=60)
    before = list(itertools.islice(stream, BEFORE))
    after = list(itertools.islice(stream, AFTER))
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.wait_ready()
        sources = asyncio.run(_send(broker.bootstrap, topic, before))
        broker.freeze()  # mid-stream: the workers are still handling the events just sent
        frozen_at = time.monotonic()
        try:
            while time.monotonic() - frozen_at < FROZEN_S:
                for worker in workers:
                    assert worker.proc.poll() is None, f"exited during the hang:\n{worker.log_text()[-3000:]}"
                time.sleep(1)
        finally:
            broker.thaw()
        sources += asyncio.run(_send(broker.bootstrap, topic, after))
        by_source = verdicts_by_source(broker.bootstrap, shared.verdicts_topic, sources, timeout=180, partial=True)
        running = [worker.proc.poll() is None for worker in workers]
        logs = [worker.log_text() for worker in workers]
    finally:
        for worker in workers:
            worker.stop()
    assert running == [True, True], [log[-3000:] for log in logs]
    for log in logs:
        assert "We experienced a crash" not in log and "Traceback" not in log, log[-3000:]
    # the hang was felt: at least one worker went back to its checkpoint and came back
    assert any("loopwatch: Kafka did not answer" in log for log in logs), [log[-2000:] for log in logs]
    assert all(log.count("loopwatch: Kafka did not answer") == log.count("loopwatch: Kafka answers again")
               for log in logs), [log[-2000:] for log in logs]
    assert_every_verdict_once_as_offline(before + after, sources, by_source)
