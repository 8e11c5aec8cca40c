"""When the partitioned worker gives exactly the offline verdicts, and when it cannot (docs/keying.md).

Against the real broker: one worker, events produced with the record keys a
runner's client gives them (``record_key(event, key_by)``), verdicts compared
with the offline store (:class:`SessionStore`, every state in one place, Spec
§7/§8.1). Inside the line they are equal; outside it the test pins the
difference the docs describe.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgpack
import pytest
from aiokafka import AIOKafkaProducer

from streams.detection import Engine, OpenClawConfig, SessionStore
from streams.offline.conformance import spec_view
from streams.runners.completion import EventCompleter
from streams.wire.keys import record_key
from tests.detection._support import READ_ARGS, compaction, text_result, tool_call, tool_result
from tests.worker_harness import consume_all, encode, running_worker, worker_settings

pytestmark = [pytest.mark.kafka]

CONFIG = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5,
                                      "globalCircuitBreakerThreshold": 7}}}


def _exact_by_session(tag: str) -> list[dict[str, Any]]:
    """One session, every event with its session key (as the client completes them): two runs, a
    compaction retry, deferred and unmatched results, a blocked call and its result."""
    s, k = f"{tag}-S", f"{tag}-agent:main:S"
    raw = [tool_call("list", {}, call_id="first", run="r1", session=s, session_key=k)]
    raw += [compaction(run="r1", session=s)]  # sent with ids only: the completer adds the session key
    raw += [tool_call(call_id=f"a{i}", run="r1", session=s, session_key=k) for i in range(2)]
    raw += [tool_call(call_id=f"d{i}", run="r2", session=s, session_key=k, outcome_follows=True) for i in range(6)]
    raw += [tool_result(f"d{i}", run="r2", session=s) for i in range(6)]
    raw += [tool_result("never-seen", run="r2", session=s, tool_name="read", args=READ_ARGS)]
    raw += [tool_call("exec", {"command": "ls"}, text_result("same"), call_id=f"e{i}", run="r2", session=s,
                      session_key=k) for i in range(7)]
    raw += [tool_call("exec", {"command": "ls"}, None, call_id="blocked", run="r2", session=s, session_key=k,
                      outcome_follows=True), tool_result("blocked", run="r2", session=s)]
    raw += [tool_call(call_id="a2", run="r1", session=s, session_key=k)]
    completer = EventCompleter()
    return [dict(completer.complete(e)) for e in raw]


def _exact_by_run(tag: str) -> list[dict[str, Any]]:
    """One run per session, its compaction retry without the session key its calls carry (the README's shape)."""
    s = f"{tag}-T"
    events = [compaction(run=f"{tag}-r", session=s)]
    events += [tool_call(call_id=f"c{i}", run=f"{tag}-r", session=s, session_key=f"{tag}-agent:main:T")
               for i in range(4)]
    return events


def _run_over_two_sessions(tag: str) -> list[dict[str, Any]]:
    """Outside the line for session keys: one run id in two sessions (two record keys), one guard offline."""
    run = f"{tag}-spread"
    return [compaction(run=run, session=f"{tag}-A")] + [
        tool_call(call_id=f"s{i}", run=run, session=f"{tag}-B") for i in range(3)]


def _session_id_under_two_keys(tag: str) -> list[dict[str, Any]]:
    """Outside the line for session keys: one session id with and without its session key (two record keys)."""
    s, k = f"{tag}-U", f"{tag}-agent:main:U"
    return [tool_call(call_id="p", run="r", session=s, session_key=k, outcome_follows=True),
            tool_result("p", run="r", session=s, session_key=None)]


async def _through_worker(bootstrap: str, tmp_path: Path, batches: list[tuple[list[dict], str]]) -> list[list[dict]]:
    settings = worker_settings(bootstrap, tmp_path, partitions=2)
    topic = settings.input_topics[0]
    total = sum(len(events) for events, _ in batches)
    async with running_worker(settings, Engine(OpenClawConfig(CONFIG))):
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        await producer.start()
        try:
            for events, key_by in batches:
                for index, event in enumerate(events):
                    event["event_id"] = f"{key_by}-{id(events)}-{index}"
                    await (await producer.send(topic, encode(event), key=record_key(event, key_by)))
        finally:
            await producer.stop()
        records = await consume_all(bootstrap, settings.verdicts_topic, total, timeout=60)
    by_id = {v["event_id"]: v for v in (msgpack.unpackb(r.value) for r in records)}
    return [[by_id[e["event_id"]] for e in events] for events, _ in batches]


def _offline(events: list[dict]) -> list[dict]:
    store = SessionStore(Engine(OpenClawConfig(CONFIG)))
    return [store.process(e) for e in events]


def _view(verdicts: list[dict]) -> list[dict]:
    return [{**spec_view(v), "verdict": v["verdict"]} for v in verdicts]


@pytest.mark.timeout(120)
def test_inside_the_line_the_worker_gives_the_offline_verdicts_and_outside_it_differs(kafka_bootstrap, tmp_path):
    tag = tmp_path.name[-12:]
    exact_session, exact_run = _exact_by_session(tag), _exact_by_run(tag)
    spread, two_keys = _run_over_two_sessions(tag), _session_id_under_two_keys(tag)
    got = asyncio.run(_through_worker(kafka_bootstrap, tmp_path, [
        (exact_session, "session"), (exact_run, "run"), (spread, "session"), (two_keys, "session")]))

    # Inside: session keys on every event of the session; one run per session under run keys.
    want = _offline(exact_session)
    assert exact_session[1]["session_key"] == exact_session[0]["session_key"]
    assert _view(got[0]) == _view(want)
    assert {v["verdict"] for v in want} == {"abort", "allow", "block", "ignore"}  # the scenario exercises them
    assert [v["verdict"] for v in got[1]] == [v["verdict"] for v in _offline(exact_run)] == [
        "allow", "allow", "allow", "abort", "abort"]  # the guard's abort ends the run: its next call is refused

    # Outside: a run spread over sessions keeps one guard offline, two record keys in the worker.
    assert [v["verdict"] for v in _offline(spread)] == ["allow", "allow", "allow", "abort"]
    assert [v["verdict"] for v in got[2]] == ["allow"] * 4
    # Outside: a session id under two keys. Offline the keyless result finds the pending call; the
    # worker's state for the session id has none, so it records a result with no pending call.
    assert [v["tool_name"] for v in _offline(two_keys)] == ["read", "read"]
    assert [v["tool_name"] for v in got[3]] == ["read", "tool"]
