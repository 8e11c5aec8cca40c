"""Aggregation: verdict records of the synthetic fleet (conftest) -> sessions, runs, calls, detections, totals."""

from collections import Counter

from streams.report import build_report
from streams.report.model import Call, Compaction, where


def _rows(report):
    return [(r.session_id, r.run_id, r.tool, r.detector, r.level, r.action, r.count, r.source["line"])
            for r in report.detections]


def test_fleet_totals(sensitive_records):
    t = build_report(sensitive_records).totals
    assert (t.sessions, t.runs, t.calls, t.compactions) == (4, 5, 26, 1)
    assert (t.warnings_emitted, t.warnings_suppressed, t.blocks, t.aborts) == (1, 10, 1, 1)
    assert t.detections == Counter({
        ("generic_repeat", "warning", "suppressed"): 9,
        ("generic_repeat", "warning", "warn"): 1,
        ("generic_repeat", "critical", "block"): 1,
        ("ping_pong", "warning", "suppressed"): 1,
        ("compaction_loop_persisted", "critical", "abort"): 1,
    })
    assert t.detection_count == 13


def test_detections_in_order_with_source_lines(sensitive_records):
    rows = _rows(build_report(sensitive_records))
    assert rows[:5] == [
        ("s1", "r1", "exec", "generic_repeat", "warning", "suppressed", 3, 16),
        ("s1", "r1", "exec", "generic_repeat", "warning", "suppressed", 4, 18),
        ("s1", "r1", "exec", "generic_repeat", "critical", "block", 5, 20),
        ("s2", "r3", "read", "ping_pong", "warning", "suppressed", 3, 7),
        ("s3", "r4", "read", "compaction_loop_persisted", "critical", "abort", 3, 5),
    ]
    # s4: counts 3..9 suppressed (spec §6: bucket = count // 10 stays 0), count 10 emitted
    assert [(r[5], r[6], r[7]) for r in rows[5:]] == [("suppressed", n, n + 1) for n in range(3, 10)] + [("warn", 10, 11)]


def test_sessions_runs_and_timelines(sensitive_records):
    report = build_report(sensitive_records)
    assert list(report.sessions) == ["s1", "s2", "s3", "s4"]
    s2 = report.sessions["s2"]
    assert s2.files == ["rec/s2.jsonl"]
    assert list(s2.runs) == ["r2", "r3"]
    assert [c.status for c in s2.runs["r2"].calls] == ["allow"] * 3
    assert [c.status for c in s2.runs["r3"].calls] == ["allow", "allow", "suppressed"]
    assert (s2.totals.runs, s2.totals.calls, s2.totals.warnings_suppressed) == (2, 6, 1)
    assert [c.status for c in report.sessions["s1"].runs["r1"].calls] == ["allow"] * 3 + ["suppressed"] * 2 + ["block"]
    items = report.sessions["s3"].runs["r4"].items
    assert [type(i) for i in items] == [Compaction, Call, Call, Call]
    abort = items[-1]
    assert (abort.status, abort.count, abort.label) == ("abort", 3, "abort compaction_loop_persisted/critical")
    assert abort.message.startswith("CRITICAL: tool read repeated 3 times")
    assert report.sessions["s4"].runs["r5"].status_counts() == Counter({"allow": 3, "suppressed": 7, "warn": 1})


def test_by_detector_groups_actions(sensitive_records):
    grouped = build_report(sensitive_records).totals.by_detector()
    assert [(d, lvl, dict(c)) for d, lvl, c in grouped] == [
        ("compaction_loop_persisted", "critical", {"abort": 1}),
        ("generic_repeat", "critical", {"block": 1}),
        ("generic_repeat", "warning", {"suppressed": 9, "warn": 1}),
        ("ping_pong", "warning", {"suppressed": 1}),
    ]


def test_abort_on_a_tool_result_marks_its_call():
    records = [
        {"type": "compaction_retry", "run_id": "r", "session_id": "s", "verdict": "allow"},
        {"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": "c1", "tool_name": "exec",
         "verdict": "allow", "detection": {"stuck": False}, "blocked": False, "warning": None},
        {"type": "tool_result", "run_id": "r", "session_id": "s", "tool_call_id": "c1", "tool_name": "exec",
         "verdict": "abort", "guard": {"abort": True, "count": 3, "message": "CRITICAL: aborted"},
         "source": {"path": "x.jsonl", "line": 9}},
        {"type": "tool_result", "run_id": "r", "session_id": "s", "tool_call_id": "zz", "verdict": "ignore"},
    ]
    report = build_report(records)
    run = report.sessions["s"].runs["r"]
    assert [c.status for c in run.calls] == ["abort"]
    assert run.calls[0].message == "CRITICAL: aborted"
    assert (report.totals.calls, report.totals.aborts) == (1, 1)
    assert [(r.detector, r.action, r.source["line"]) for r in report.detections] == [
        ("compaction_loop_persisted", "abort", 9)]


def test_missing_ids_and_where():
    report = build_report([{"type": "tool_call", "verdict": "allow", "tool_name": "exec"}])
    assert list(report.sessions) == ["(no session id)"]
    assert list(report.sessions["(no session id)"].runs) == ["(no run id)"]
    assert where(None) == "-"
    assert where({"path": "/a/b/c.jsonl", "line": 4}, relative_to="/a") == "b/c.jsonl:4"
    assert where({"path": "/a/b/c.jsonl", "line": 4}, relative_to="/x") == "/a/b/c.jsonl:4"
    assert where({"path": "/a/t.traj", "line": 1, "step": 12}, basename=True) == "t.traj:1 step 12"


def test_outcome_labels_put_the_verdict_first():
    from streams.report import outcome_label

    call = {"type": "tool_call", "detection": {"stuck": True, "detector": "generic_repeat", "level": "warning",
                                               "count": 10}, "blocked": False}
    assert outcome_label({**call, "verdict": "warn", "warning": {"emitted": True}}) == "warn generic_repeat/warning 10"
    assert outcome_label({**call, "verdict": "allow", "warning": {"emitted": False}}) == (
        "allow, suppressed generic_repeat/warning 10")
    assert outcome_label({"type": "tool_call", "verdict": "allow", "detection": {"stuck": False}}) == "allow"
    assert outcome_label({"type": "tool_result", "verdict": "abort", "guard": {"abort": True, "count": 3}}) == (
        "abort compaction_loop_persisted/critical 3")
    assert outcome_label({"type": "tool_result", "verdict": "ignore"}) == "ignore"


def test_worker_verdicts_show_the_event_source():
    # the worker puts the Kafka position in source and the event's own (importer) source in event_source
    record = {"type": "tool_call", "session_id": "s", "run_id": "r", "tool_name": "exec", "verdict": "block",
              "blocked": True, "detection": {"stuck": True, "detector": "generic_repeat", "level": "critical",
                                             "count": 5},
              "source": {"topic": "loopwatch.events", "partition": 2, "offset": 41},
              "event_source": {"path": "/rec/s.jsonl", "line": 7}}
    report = build_report([record])
    assert report.sessions["s"].files == ["/rec/s.jsonl"]
    assert [row.where("/rec") for row in report.detections] == ["s.jsonl:7"]
    assert build_report([{**record, "event_source": None}]).detections[0].where() == "-"
