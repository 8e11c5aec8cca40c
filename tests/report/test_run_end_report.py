"""Reports agree with what ran: refusals of an ended run are not more aborts, a call the runner ran
without its verdict is not a block."""

from streams.detection import Engine, OpenClawConfig
from streams.offline.replay import Replayer
from streams.report import build_report
from streams.report.text import render_text


def _records(events, config=None):
    replayer = Replayer(Engine(OpenClawConfig(config or {})))
    return [replayer.apply(event, event["event_id"]) for event in events]


def _call(i, **extra):
    return {"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": f"c{i}", "tool_name": "read",
            "args": {"path": "/a"}, "event_id": f"e{i}", **extra}


def test_a_blocked_call_that_ran_late_counts_as_run_not_as_a_block():
    events = [_call(i, result="same", error=None) for i in range(20)]
    events += [_call(20, outcome_follows=True),
               {"type": "tool_result", "run_id": "r1", "session_id": "s1", "tool_call_id": "c20", "result": "same",
                "error": None, "ran_without_verdict": True, "event_id": "x20"}]
    records = _records(events, {"tools": {"loopDetection": {"enabled": True}}})
    assert records[20]["verdict"] == "block" and records[21]["late"] is True
    report = build_report(records)
    assert (report.totals.blocks, report.totals.late) == (0, 1)
    [run] = report.sessions["s1"].runs.values()
    assert run.calls[-1].status == "allow"
    assert records[21]["corrects"]["event_id"] == "e20"
    assert "1 call the runner ran without a verdict (late)" in render_text(report)
    # the detections say the block came late, the calls-per-tool table that the call ran
    detector = records[20]["decided_by"]["detector"]
    assert report.totals.detections[(detector, "critical", "late")] == 1
    assert report.totals.detections[(detector, "critical", "block")] == 0
    assert report.totals.decisions[("detection", "", "late", True)] == 1
    assert report.totals.by[("tool", "read", "block")] == 0 and report.totals.by[("tool", "read", "allow")] == 11
    text = render_text(report)
    assert "ran late" in text and f"{detector:<26} critical  " in text and "1 late" in text


def test_a_refused_call_of_an_ended_run_that_ran_late_is_not_a_refusal():
    events = [{"type": "compaction_retry", "run_id": "r1", "session_id": "s1", "event_id": "k"}]
    events += [_call(i, result="same", error=None) for i in range(3)]
    events += [_call(3, outcome_follows=True),
               {"type": "tool_result", "run_id": "r1", "session_id": "s1", "tool_call_id": "c3", "result": "x",
                "error": None, "ran_without_verdict": True, "event_id": "x3"}]
    records = _records(events)
    assert records[4]["run_ended"] and records[5]["corrects"]["verdict"] == "abort"
    totals = build_report(records).totals
    # the late result itself is an event of the ended run (refused); the call it answers ran
    assert (totals.aborts, totals.refused, totals.late) == (1, 1, 1)


def test_events_of_an_ended_run_are_refusals_not_more_aborts():
    events = [{"type": "compaction_retry", "run_id": "r1", "session_id": "s1", "event_id": "k"}]
    events += [_call(i, result="same", error=None) for i in range(5)]
    records = _records(events)
    assert [r["verdict"] for r in records] == ["allow", "allow", "allow", "abort", "abort", "abort"]
    totals = build_report(records).totals
    assert (totals.aborts, totals.refused) == (1, 2)
    assert "2 events refused (run_ended)" in render_text(build_report(records))


def test_the_html_report_shows_refusals_and_late_calls():
    from streams.report.html import render_html

    events = [{"type": "compaction_retry", "run_id": "r1", "session_id": "s1", "event_id": "k"}]
    events += [_call(i, result="same", error=None) for i in range(5)]
    events += [_call(5, outcome_follows=True, run_id="r2"),
               {"type": "tool_result", "run_id": "r2", "session_id": "s1", "tool_call_id": "c5", "result": "x",
                "error": None, "ran_without_verdict": True, "event_id": "x5"}]
    page = render_html(build_report(_records(events)))
    assert '<div class="card refused" data-metric="refused"><div class="v">2</div>' in page
    # the refused calls have their own colour on the timeline, after the abort
    statuses = [part.split('"')[0] for part in page.split('data-status="')[1:]]
    assert statuses == ["allow", "allow", "abort", "refused", "refused", "allow"]
    assert "compaction_loop_persisted / critical" in page.split('data-status="refused"')[1].split("></span>")[0]
    assert 'data-metric="late"><div class="v">1</div>' in page
    assert "2 refused after the run ended" in page and "1 late" in page
    clean = render_html(build_report(_records([_call(0, result="same", error=None)])))
    assert 'data-metric="refused"' not in clean and 'data-metric="late"' not in clean


def test_an_abort_on_a_tool_result_is_in_the_aborted_column_of_its_tool_agent_and_model():
    # the guard judges the result of the third same call after a compaction: the abort is on the tool_result
    events = [{"type": "compaction_retry", "run_id": "r1", "session_id": "s1", "event_id": "k"}]
    for i in range(3):
        events += [_call(i, outcome_follows=True, agent_id="main", model="m-1"),
                   {"type": "tool_result", "run_id": "r1", "session_id": "s1", "tool_call_id": f"c{i}",
                    "tool_name": "read", "args": {"path": "/a"}, "result": "same", "error": None,
                    "event_id": f"x{i}", "agent_id": "main", "model": "m-1"}]
    records = _records(events)
    assert [r["verdict"] for r in records[1:]] == ["allow"] * 5 + ["abort"] and records[-1]["type"] == "tool_result"
    totals = build_report(records).totals
    assert totals.aborts == 1
    for dimension, name in (("tool", "read"), ("agent", "main"), ("model", "m-1")):
        [(value, counts)] = totals.breakdown(dimension)
        assert (value, dict(counts)) == (name, {"allow": 2, "abort": 1}), dimension
    text = render_text(build_report(records))
    row = next(line for line in text.splitlines() if line.split()[:1] == ["read"] and len(line.split()) == 7)
    assert row.split() == ["read", "3", "0", "0", "0", "1", "0"]  # calls, warned, suppressed, blocked, aborted, refused
