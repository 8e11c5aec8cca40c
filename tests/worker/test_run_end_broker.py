"""Against the real broker: a run end survives a worker restart; a call run while the worker was down is
recorded as executed when it comes back (its result late), and the worker's verdicts equal the offline replay's."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest

from streams.detection import Engine, OpenClawConfig
from streams.offline.replay import Replayer
from streams.runners.client import LoopwatchClient
from streams.worker import metrics
from streams.worker.processor import loop_events
from tests.worker_harness import (
    WorkerProcess, consume_all, create_topics, encode, produce, running_worker, whole_topic, worker_settings,
)

pytestmark = [pytest.mark.kafka]


def _call(i: int, run: str = "run-a", tool: str = "exec", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_call", "run_id": run, "session_id": "s-" + run, "tool_call_id": f"{run}-{i}",
            "tool_name": tool, "args": {"command": "ls"}, "result": "same", "error": None,
            "event_id": f"{run}:{i}", "ts": int(time.time() * 1000), **extra}


@pytest.mark.timeout(240)
def test_a_run_end_survives_a_worker_restart(kafka_bootstrap, tmp_path):
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2)  # OpenClaw's defaults: the guard on
    topic = settings.input_topics[0]
    asyncio.run(create_topics(kafka_bootstrap, [topic], 2))
    before = [{"type": "compaction_retry", "run_id": "run-a", "session_id": "s-run-a", "event_id": "run-a:k"}]
    before += [_call(i) for i in range(3)]
    after = [_call(3, tool="read"), _call(4, run="run-b")]

    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        worker.wait_ready()
        asyncio.run(produce(kafka_bootstrap, topic, [(e["run_id"].encode(), encode(e)) for e in before]))
        first = asyncio.run(consume_all(kafka_bootstrap, settings.verdicts_topic, 4, timeout=60))
        assert [msgpack.unpackb(r.value)["verdict"] for r in first] == ["allow", "allow", "allow", "abort"]
        ending = msgpack.unpackb(first[-1].value)
        worker.stop()
        assert worker.proc.returncode == 0, worker.log_text()[-3000:]

        worker = WorkerProcess(settings, tmp_path / "worker.log").start()  # state from the changelog
        worker.wait_ready()
        asyncio.run(produce(kafka_bootstrap, topic, [(e["run_id"].encode(), encode(e)) for e in after]))
        records = asyncio.run(consume_all(kafka_bootstrap, settings.verdicts_topic, 6, timeout=60))
    finally:
        worker.stop()
    later, other = (msgpack.unpackb(r.value) for r in records[4:])
    assert later["event_id"] == "run-a:3" and later["verdict"] == "abort"
    assert later["decision"] == "allow" and later["run_aborted"] is True  # OpenClaw's fields as OpenClaw's
    assert later["run_ended"]["by"] == "compaction_loop_persisted"
    assert later["run_ended"]["reason"] == ending["guard"]["message"]
    assert later["evidence"] == [["run-a:2", ending["source"]["partition"], ending["source"]["offset"]]]
    assert other["event_id"] == "run-b:4" and other["verdict"] == "allow" and "run_ended" not in other


LOOPY = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3,
                                     "globalCircuitBreakerThreshold": 5}}}


def _check(i: int) -> dict[str, Any]:
    return {"type": "tool_call", "run_id": "run-l", "session_id": "s-l", "tool_call_id": f"l-{i}",
            "tool_name": "read", "args": {"path": "/same"}, "outcome_follows": True}


def _result(i: int) -> dict[str, Any]:
    return {"type": "tool_result", "run_id": "run-l", "session_id": "s-l", "tool_call_id": f"l-{i}",
            "result": {"content": [{"type": "text", "text": "same"}], "details": {}}, "error": None}


@pytest.mark.timeout(240)
def test_calls_run_while_the_worker_was_down_are_recorded_as_executed_when_it_is_back(kafka_bootstrap, tmp_path):
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2)
    topic = settings.input_topics[0]
    late_before = metrics.LATE_VERDICTS.labels("ran_without_verdict")._value.get()

    async def run() -> tuple[list[Any], list[Any], Any]:
        await create_topics(kafka_bootstrap, [topic, settings.verdicts_topic], 2)
        async with LoopwatchClient(kafka_bootstrap, events_topic=topic, verdicts_topic=settings.verdicts_topic,
                                   on_timeout="allow", timeout=0.3) as client:
            down = []
            for i in range(4):  # no worker: every check falls open, every result goes marked, unwaited
                call = await client.check(_check(i))
                result = await client.report_result(_result(i), timeout=30)
                down.append((call, result))
            async with running_worker(settings, Engine(OpenClawConfig(LOOPY))):
                live = await client.check(_check(4), timeout=30)  # answered after the backlog
                await client.report_result(_result(4), timeout=30)
            records = await consume_all(kafka_bootstrap, settings.verdicts_topic, 10, timeout=60)
            events = await consume_all(kafka_bootstrap, topic, 10, timeout=60)
            expected = sum(len(loop_events(msgpack.unpackb(r.value))) for r in records)
            published = await whole_topic(kafka_bootstrap, settings.loop_events_topic, settings.partitions)
        return down, records, (live, events, published)

    down, records, (live, events, published) = asyncio.run(run())
    assert [(c.timed_out, c.verdict, r.waited, r.verdict) for c, r in down] == [(True, "allow", False, "allow")] * 4
    verdicts = sorted((msgpack.unpackb(r.value) for r in records), key=lambda v: (v["source"]["offset"]))
    by_id = {(v["type"], v["tool_call_id"]): v for v in verdicts}
    # the rules block the 4th identical call (criticalThreshold 3), but the runner had already run it
    blocked = by_id[("tool_call", "l-3")]
    assert blocked["verdict"] == "block" and isinstance(blocked["deadline"], int)
    assert max(r.timestamp for r in records if msgpack.unpackb(r.value)["tool_call_id"] == "l-3") > \
        blocked["deadline"]  # produced after the runner stopped waiting: tail shows it LATE
    ran = by_id[("tool_result", "l-3")]
    assert ran["late"] is True and ran["verdict"] == "allow" and "ignored" not in ran
    assert ran["outcome"]["recorded"] is True
    # its result corrects the block: the runner ran the call; the loop events say so too
    assert ran["corrects"] == {"event_id": blocked["event_id"], "tool_call_id": "l-3", "verdict": "block",
                               "by": blocked["decided_by"]["detector"]}
    assert [v["tool_call_id"] for v in verdicts if "corrects" in v] == ["l-3"]
    loop = [msgpack.unpackb(r.value) for r in published]
    assert len(loop) == sum(len(loop_events(v)) for v in verdicts)  # nothing more
    assert [(e["action"], e["corrects"]["event_id"]) for e in loop if e["kind"] == "correction"] == \
        [("ran", blocked["event_id"])]
    assert all(by_id[("tool_result", f"l-{i}")]["late"] is True for i in range(4))
    # no block after the fact in the state: the 5th call counts the 4th as run (count 4, not 3)
    assert live.record["detection"]["count"] == 4 and live.verdict == "block"
    # the worker gave what the offline replay gives on the same events (keyed by run as the worker, or by
    # session, replay's default)
    decoded = [msgpack.unpackb(e.value) for e in sorted(events, key=lambda e: e.offset)]
    strip = ("source", "evidence", "key")
    for key_by in ("run", "session"):
        replayer = Replayer(Engine(OpenClawConfig(LOOPY)), key_by=key_by)
        offline = [replayer.apply(e, [e["event_id"], 0, 0]) for e in decoded]
        assert [{k: v for k, v in o.items() if k not in strip} for o in offline] == \
            [{k: v for k, v in w.items() if k not in strip} for w in verdicts]
    assert metrics.LATE_VERDICTS.labels("ran_without_verdict")._value.get() - late_before == 4
