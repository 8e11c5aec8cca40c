"""The worker's records and metrics for late calls and ended runs, without Kafka (a fake wall clock)."""

from __future__ import annotations

import msgpack

from streams.detection import Engine, OpenClawConfig, SessionState
from streams.worker import metrics
from streams.offline.replay import Replayer
from streams.worker.processor import APPLIED, Processor
from streams.worker.records import Source



def call(i: int, **extra) -> dict:
    return {"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": f"c{i}", "tool_name": "read",
            "args": {"path": "/a"}, "outcome_follows": True, "event_id": f"e{i}", **extra}


def result(i: int, **extra) -> dict:
    return {"type": "tool_result", "run_id": "r1", "session_id": "s1", "tool_call_id": f"c{i}", "result": "same",
            "error": None, "event_id": f"r{i}", **extra}


def sample(name: str, labels: dict | None = None) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels or {}) or 0.0


def test_late_verdicts_are_counted_by_the_fake_clock_and_the_runners_report():
    now = [1_000.0]  # seconds
    proc = Processor(Engine(OpenClawConfig({"tools": {"loopDetection": {
        "enabled": True, "warningThreshold": 2, "criticalThreshold": 3, "globalCircuitBreakerThreshold": 5}}})),
        clock=lambda: now[0])
    state = SessionState()
    before = {reason: sample("loopwatch_late_verdicts_total", {"reason": reason})
              for reason in ("past_deadline", "ran_without_verdict")}
    verdicts_before = {v: sample("loopwatch_verdicts_total", {"verdict": v}) for v in ("late", "block", "allow")}
    offset = 0

    def apply(event: dict) -> dict:
        nonlocal offset
        out = proc.apply(b"r1", event, Source("events", 0, offset), state)
        offset += 1
        assert out.kind == APPLIED
        return msgpack.unpackb(out.verdict)

    on_time = apply(call(0, deadline=1_000_500))  # 0.5 s left by the clock
    assert on_time["deadline"] == 1_000_500 and "late" not in on_time
    apply(result(0))
    now[0] = 1_002.0
    past = apply(call(1, deadline=1_001_000))  # the clock is past it: the runner has stopped waiting
    assert past["deadline"] == 1_001_000 and past["verdict"] == "allow" and "late" not in past  # no clock in records
    reported = apply(result(1, ran_without_verdict=True))
    assert reported["late"] is True
    said = []
    for i in range(2, 5):  # more identical calls, all past their deadlines: the rules block the last ones
        said.append(apply(call(i, deadline=1_001_000))["verdict"])
        apply(result(i, ran_without_verdict=True))
    assert said == ["allow", "block", "block"]  # what the rules said, after the runner had run them
    proc.flush_metrics()
    counted = {v: sample("loopwatch_verdicts_total", {"verdict": v}) - verdicts_before[v] for v in verdicts_before}
    assert counted == {"late": 4, "block": 0, "allow": 6}  # calls counted late, not blocked; results allowed
    assert sample("loopwatch_late_verdicts_total", {"reason": "past_deadline"}) - before["past_deadline"] == 4
    assert sample("loopwatch_late_verdicts_total", {"reason": "ran_without_verdict"}) - \
        before["ran_without_verdict"] == 4


def test_refusals_of_an_ended_run_are_counted():
    proc = Processor(Engine(OpenClawConfig({})))
    state = SessionState()
    before = sample("loopwatch_run_ended_events_total")
    events = [{"type": "compaction_retry", "run_id": "r1", "session_id": "s1", "event_id": "k"}]
    events += [{**call(i), "outcome_follows": False, "result": "same", "error": None} for i in range(5)]
    records = [msgpack.unpackb(proc.apply(b"r1", e, Source("events", 0, n), state).verdict)
               for n, e in enumerate(events)]
    assert [r["verdict"] for r in records] == ["allow", "allow", "allow", "abort", "abort", "abort"]
    assert ["run_ended" in r for r in records] == [False] * 4 + [True] * 2
    assert records[4]["evidence"] == [["e2", 0, 3]]  # the event that ended the run
    proc.flush_metrics()
    assert sample("loopwatch_run_ended_events_total") - before == 2


LOOPY = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3,
                                     "globalCircuitBreakerThreshold": 5}}}


def _late_run() -> list[dict]:
    """A fail-open runner ran every call without waiting: calls c0-c3 identical (the rules block c3), then
    c4 of other args (the run budget, spent by c3's block, blocks it), then c5, whose result is not late."""
    events = []
    for i in range(4):
        events += [call(i), result(i, ran_without_verdict=True)]
    events += [call(4, args={"path": "/b"}), result(4, ran_without_verdict=True)]
    events += [call(5, args={"path": "/c"}), result(5)]
    return events


def test_a_late_result_corrects_its_calls_block_in_the_verdict_and_the_loop_events():
    config = {**LOOPY, "policies": {"runBudget": {"blockedCalls": 1, "action": "block"}}}
    proc = Processor(Engine(OpenClawConfig(config)))
    state = SessionState()
    records, loop_events = [], []
    for offset, event in enumerate(_late_run()):
        if offset % 2:  # the state goes through the changelog form between a call and its result
            state = SessionState.from_bytes(state.to_bytes())
        out = proc.apply(b"r1", event, Source("events", 0, offset), state)
        records.append(msgpack.unpackb(out.verdict))
        loop_events += [msgpack.unpackb(e) for e in out.loop_events]
    calls = {r["tool_call_id"]: r for r in records if r["type"] == "tool_call"}
    results = {r["tool_call_id"]: r for r in records if r["type"] == "tool_result"}
    assert [calls[f"c{i}"]["verdict"] for i in range(6)] == ["allow", "allow", "allow", "block", "block", "block"]
    assert calls["c3"]["decided_by"]["kind"] == "detection" and calls["c4"]["decided_by"]["kind"] == "budget"
    assert results["c3"]["corrects"] == {"event_id": "e3", "tool_call_id": "c3", "verdict": "block",
                                         "by": calls["c3"]["decided_by"]["detector"]}
    assert results["c4"]["corrects"] == {"event_id": "e4", "tool_call_id": "c4", "verdict": "block",
                                         "by": "run_budget"}
    # allowed calls need no correction, and c5's result was waited for: its block stands
    assert [c for c in ("c0", "c1", "c2", "c5") if "corrects" in results[c]] == []
    fixes = [e for e in loop_events if e["kind"] == "correction"]
    assert [(e["action"], e["event_id"], e["corrects"]["event_id"], e["tool_name"]) for e in fixes] == \
        [("ran", "r3", "e3", "read"), ("ran", "r4", "e4", "read")]
    assert "did not stop it" in fixes[0]["message"]
    # the offline replay gives the same records, keyed by run as the worker or by session
    for key_by in ("run", "session"):
        replayer = Replayer(Engine(OpenClawConfig(config)), key_by=key_by)
        offline = [replayer.apply(e, [e["event_id"], 0, n]) for n, e in enumerate(_late_run())]
        assert [o.get("corrects") for o in offline] == [r.get("corrects") for r in records]


def test_a_late_result_corrects_the_refusal_of_an_ended_run():
    proc = Processor(Engine(OpenClawConfig({})))  # the guard on: 3 identical outcomes after a retry abort
    state = SessionState()
    events = [{"type": "compaction_retry", "run_id": "r1", "session_id": "s1", "event_id": "k"}]
    events += [{**call(i), "outcome_follows": False, "result": "same", "error": None} for i in range(3)]
    events += [call(3), result(3, ran_without_verdict=True)]
    records = [msgpack.unpackb(proc.apply(b"r1", e, Source("events", 0, n), state).verdict)
               for n, e in enumerate(events)]
    refused, ran = records[-2:]
    assert refused["verdict"] == "abort" and refused["run_ended"]["by"] == "compaction_loop_persisted"
    assert ran["corrects"] == {"event_id": "e3", "tool_call_id": "c3", "verdict": "abort",
                               "by": "compaction_loop_persisted"}
