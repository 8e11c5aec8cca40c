"""The decision record (streams/detection/decision.py): which finding decides, and what the others are."""

from __future__ import annotations

from streams.detection.decision import decided_by, findings, set_decided_by

DETECTION = {"stuck": True, "level": "critical", "detector": "generic_repeat", "count": 20, "message": "CRITICAL: x",
             "warning_key": "k"}
ESCALATION = {"name": "escalation", "detector": "escalation", "level": "critical", "verdict": "abort", "count": 3,
              "message": "CRITICAL: escalated"}


def test_nothing_fired_is_none():
    assert decided_by({"type": "tool_call", "verdict": "allow", "detection": {"stuck": False}}) is None
    assert set_decided_by({"type": "tool_result", "verdict": "ignore"})["decided_by"] is None
    assert findings({"verdict": "allow", "decided_by": None}) == []


def test_a_policy_abort_outranks_the_detection_it_escalates():
    record = {"type": "tool_call", "verdict": "abort", "blocked": True, "detection": DETECTION, "policy": ESCALATION}
    top = decided_by(record)
    assert (top["kind"], top["action"], top["rule"], top["message"]) == (
        "escalation", "abort", "escalation", "CRITICAL: escalated")
    assert [(f["kind"], f["action"], f["detector"]) for f in top["others"]] == [
        ("detection", "block", "generic_repeat")]
    assert [f["kind"] for f in findings({**record, "decided_by": top})] == ["escalation", "detection"]


def test_an_ended_runs_refusal_is_decided_by_the_run_end_alone():
    record = {"type": "tool_call", "verdict": "abort", "blocked": True, "detection": DETECTION, "policy": ESCALATION,
              "run_ended": {"by": "escalation", "reason": "CRITICAL: escalated", "message": "loopwatch: ended"}}
    top = decided_by(record)
    assert (top["kind"], top["detector"], top["message"], "others" in top) == (
        "run_end", "escalation", "loopwatch: ended", False)


def test_shadow_only_findings_are_not_enforced_and_follow_enforced_ones():
    shadow = [{"name": "runBudget", "detector": "run_budget", "level": "critical", "verdict": "block", "count": 2,
               "message": "m"}]
    alone = decided_by({"type": "tool_call", "verdict": "allow", "detection": {"stuck": False}, "shadow": shadow,
                        "fleet": {"would_block": True, "signature": "sig", "runs": 5, "reason": "Fleet-wide loop"}})
    assert (alone["kind"], alone["action"], alone["enforced"]) == ("budget", "would_block", False)
    assert [(f["kind"], f["action"], f["rule"], f["enforced"]) for f in alone["others"]] == [
        ("fleet", "would_block", "sig", False)]
    warned = decided_by({"type": "tool_call", "verdict": "warn", "warning": {"emitted": True},
                         "detection": {**DETECTION, "level": "warning"}, "shadow": shadow})
    assert (warned["kind"], warned["action"], warned["enforced"]) == ("detection", "warn", True)
    assert warned["others"][0]["enforced"] is False


def test_a_suppressed_warning_decides_an_allow_and_a_terminal_block_an_abort():
    suppressed = decided_by({"type": "tool_call", "verdict": "allow", "warning": {"emitted": False},
                             "detection": {**DETECTION, "level": "warning"}})
    assert (suppressed["kind"], suppressed["action"]) == ("detection", "suppressed")
    terminal = decided_by({"type": "tool_call", "verdict": "abort", "blocked": True, "detection": DETECTION,
                           "tool_loop_recovery": "terminal", "late": True})
    assert (terminal["action"], terminal["recovery"], terminal["late"]) == ("abort", "terminal", True)


def test_the_fleet_breakers_block_is_its_own_kind_not_a_detection():
    record = {"type": "tool_call", "verdict": "block", "blocked": True,
              "detection": {**DETECTION, "detector": "fleet_loop", "count": 5, "message": "Fleet-wide loop: ..."},
              "fleet": {"blocked": True, "signature": "error:web_fetch:ab", "runs": 5, "reason": "Fleet-wide loop"}}
    top = decided_by(record)
    assert (top["kind"], top["detector"], top["rule"], top["message"], "others" in top) == (
        "fleet", "fleet_loop", "error:web_fetch:ab", "Fleet-wide loop: ...", False)


def test_findings_of_records_from_elsewhere():
    # a record written before decided_by existed: computed from the record
    old = {"type": "tool_result", "verdict": "abort", "guard": {"abort": True, "count": 3}}
    assert [(f["kind"], f["detector"], f["count"]) for f in findings(old)] == [
        ("guard", "compaction_loop_persisted", 3)]
    # a hand-edited one lacking keys: every key present, unknown ones marked
    edited = findings({"decided_by": {"detector": "x", "others": [{"kind": "fleet"}, "junk"]}})
    assert [(f["kind"], f["action"], f["enforced"]) for f in edited] == [
        ("unknown", "unknown", True), ("fleet", "unknown", True)]
