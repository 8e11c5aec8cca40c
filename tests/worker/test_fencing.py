"""A worker paused past the session timeout (a zombie) writes no state and commits no offset when it resumes.

Two workers share the partitions; one is stopped with SIGSTOP for longer than
the session timeout (as a long GC pause, a stalled VM or a network partition
would), so the group gives its partitions to the other, which moves their
states forward; then it gets SIGCONT and production goes on. Every event must
have a verdict, repeated verdicts must be byte-identical and equal the offline
engine's (``loopwatch replay``), and the committed changelog must never go
back in time: for each key, the ``last_offsets`` of its successive states only
grow (a zombie's revocation checkpoint wrote its paused-time states over the
newer ones, see streams/worker/checkpoint.py). Run with both stores.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from streams.worker.states import decode_state
from tests.worker.test_rebalance import (_events_applied, _wait_until, assert_every_verdict_once_as_offline,
                                         end_production)
from tests.worker.test_worker import ENABLED, _fleet_stream, _free_port, verdicts_by_source
from tests.worker_harness import PacedProducer, WorkerProcess, checkpoint_wait_s, create_topics, worker_settings

pytestmark = [pytest.mark.kafka]

_RATE_BATCH, _RATE_SLEEP = 15, 0.05  # ~300 events/s
_AFTER_RESUME = 600  # events produced after the paused worker resumed


async def _changelog(bootstrap: str, topic: str, timeout: float = 10.0) -> list[Any]:
    """Every committed record of the changelog, in offset order per partition (read_committed)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None, isolation_level="read_committed")
    await consumer.start()
    records: list[Any] = []
    try:
        partitions = consumer.assignment()
        while not partitions:
            await asyncio.sleep(0.1)
            partitions = consumer.assignment()
        ends = await consumer.end_offsets(list(partitions))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            positions = [await consumer.position(tp) for tp in ends]
            if all(position >= end for position, end in zip(positions, ends.values())):
                break
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                records.extend(batch)
    finally:
        await consumer.stop()
    return records


def _states_going_back(records: list[Any]) -> list[str]:
    """Changelog records whose state holds fewer events of an input partition than its key's previous state."""
    newest: dict[bytes, dict[str, int]] = {}
    back = []
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        if record.value is None:
            newest.pop(record.key, None)
            continue
        offsets = decode_state(record.value).last_offsets
        before = newest.get(record.key, {})
        older = {tp: (before[tp], offset) for tp, offset in offsets.items() if offset < before.get(tp, -1)}
        if older:
            back.append(f"{record.key!r} at changelog {record.partition}:{record.offset}: {older}")
        newest[record.key] = {**before, **offsets}
    return back


@pytest.mark.timeout(150)
@pytest.mark.parametrize("store", ["memory://", "rocksdb://"], ids=["memory", "rocksdb"])
def test_a_worker_paused_past_its_session_timeout_writes_no_stale_state(kafka_bootstrap, tmp_path, store):
    if store == "rocksdb://":
        pytest.importorskip("rocksdict")
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps(ENABLED))
    shared = worker_settings(kafka_bootstrap, tmp_path, partitions=4, config=config, store=store)
    topic, changelog = shared.input_topics[0], f"{shared.app_id}-states-changelog"
    port_a, port_b = _free_port(), _free_port()
    settings_a = shared.model_copy(update={"data_dir": str(tmp_path / "faust-a-{app_id}"), "metrics_port": port_a})
    settings_b = shared.model_copy(update={"data_dir": str(tmp_path / "faust-b-{app_id}"), "metrics_port": port_b})
    asyncio.run(create_topics(kafka_bootstrap, [topic], 4))

    finish = threading.Event()  # set once the paused worker has resumed: produce _AFTER_RESUME more
    producing = PacedProducer(kafka_bootstrap, topic, _fleet_stream(runs=60), every=_RATE_BATCH, pause=_RATE_SLEEP,
                              until=finish.is_set, then=_AFTER_RESUME)
    worker_a = WorkerProcess(settings_a, tmp_path / "worker-a.log").start()
    worker_b = WorkerProcess(settings_b, tmp_path / "worker-b.log").start()
    paused = False
    try:
        worker_a.wait_ready()
        worker_b.wait_ready()
        producing.start()
        _wait_until(lambda: _events_applied(port_a) >= 100 and _events_applied(port_b) >= 100, 60,
                    "both workers apply events", worker_a, worker_b)

        os.kill(worker_b.proc.pid, signal.SIGSTOP)  # B keeps its dirty states and its place in the group, for now
        paused = True
        applied_a = _events_applied(port_a)
        # the group drops B after the session timeout; A takes B's partitions and moves their states on
        time.sleep(shared.session_timeout_s)
        _wait_until(lambda: _events_applied(port_a) >= applied_a + 600, 60,
                    "A handles the paused worker's partitions too", worker_a)
        time.sleep(checkpoint_wait_s(shared))  # A's checkpoints write the newer states
        os.kill(worker_b.proc.pid, signal.SIGCONT)
        paused = False
        events, sources, by_source = end_production(producing, finish, kafka_bootstrap, shared.verdicts_topic)
        applied_b = _events_applied(port_b)
    finally:
        finish.set()
        if paused:
            os.kill(worker_b.proc.pid, signal.SIGCONT)
        worker_a.stop()
        worker_b.stop()
    records = asyncio.run(_changelog(kafka_bootstrap, changelog))

    for worker in (worker_a, worker_b):
        assert "We experienced a crash" not in worker.log_text(), worker.log_text()[-3000:]
    back = _states_going_back(records)
    assert back == [], f"{len(back)} changelog states older than their key's previous one, e.g. {back[:3]}"
    got = assert_every_verdict_once_as_offline(events, sources, by_source)
    assert sum(g.get("decision") == "block" for g in got) > 0  # OpenClaw blocks (in an ended run: verdict "abort")
    print(f"\n{len(sources)} events, {len(records)} changelog records; B applied {applied_b:.0f}")
