"""What the runner really did: a run that ended stays over, late calls, results of calls never judged.

docs/events-and-verdicts.md ("Run end", "Late calls", "Calls loopwatch never judged").
"""

from __future__ import annotations

import pytest

from streams.detection import Engine, EventError, OpenClawConfig, SessionState, SessionStore
from streams.detection.engine import BLOCKED_RESULT_IGNORED, UNJUDGED_RESULT_IGNORED
from streams.detection.post_compaction_guard import abort_message
from streams.detection.run_end import ending, run_ended_message
from streams.offline.conformance import spec_view

from ._support import SAME_RESULT, Session, compaction, text_result, tool_call, tool_result

GUARD_MESSAGE = abort_message("read", 3, 3)


def _aborted_session() -> Session:
    session = Session()  # OpenClaw's defaults: the guard on, window 3
    session.compact()
    verdicts = session.repeat(3, ref="ending")
    assert verdicts[-1]["verdict"] == "abort" and "run_ended" not in verdicts[-1]
    return session


def test_every_later_event_of_a_run_the_guard_aborted_is_refused_with_openclaws_fields_unchanged():
    session = _aborted_session()
    plain = Session()  # the same events without a run end in between: what OpenClaw gives
    plain.compact()
    plain.repeat(3)

    later = session.call(tool="exec", args={"command": "ls"}, result=text_result("a"))
    expected_fields = spec_view(plain.call(tool="exec", args={"command": "ls"}, result=text_result("a")))
    assert spec_view(later) == expected_fields  # decision allow, run_aborted true, ...: OpenClaw's
    assert later["decision"] == "allow" and later["run_aborted"] is True and "block_reason" not in later
    assert later["verdict"] == "abort"
    assert later["run_ended"] == {"by": "compaction_loop_persisted", "reason": GUARD_MESSAGE,
                                  "message": run_ended_message("compaction_loop_persisted", GUARD_MESSAGE)}
    assert later["run_ended"]["message"].startswith("loopwatch: this run has already ended (compaction_loop_persisted)")
    assert later["evidence"] == ["ending"]  # the event that ended the run

    deferred = session.call(outcome_follows=True)
    assert deferred["verdict"] == "abort" and deferred["run_ended"]["by"] == "compaction_loop_persisted"
    result = session.result(deferred_id := f"call-{session.calls}")
    assert deferred_id and result["verdict"] == "abort" and "run_ended" in result
    retry = session.compact()
    assert retry["verdict"] == "abort" and retry["run_ended"]["by"] == "compaction_loop_persisted"

    other_run = session.call(run="r2", result=text_result("b"))
    assert other_run["verdict"] == "allow" and "run_ended" not in other_run


def test_an_escalation_abort_ends_the_run_even_when_openclaw_would_allow_the_next_call():
    session = Session(raw={"tools": {"loopDetection": {"enabled": True}},
                           "policies": {"escalation": {"consecutiveBlocks": 2}}})
    verdicts = session.repeat(24, result=SAME_RESULT)  # generic_repeat blocks from the 21st identical call
    assert [v["verdict"] for v in verdicts[19:]] == ["allow", "block", "abort", "abort", "abort"]
    first_abort = verdicts[21]
    assert [("run_ended" in v) for v in verdicts[21:]] == [False, True, True]
    assert first_abort["policy"]["detector"] == "escalation" and "run_ended" not in first_abort
    fresh = session.call(tool="exec", args={"command": "date"}, result=text_result("now"))
    assert fresh["decision"] == "allow" and "policy" not in fresh  # OpenClaw and the policy let it through
    assert fresh["verdict"] == "abort"
    assert fresh["run_ended"]["by"] == "escalation"
    assert fresh["run_ended"]["reason"] == first_abort["policy"]["message"]


def test_a_policy_in_shadow_mode_ends_nothing():
    session = Session(raw={"tools": {"loopDetection": {"enabled": True}},
                           "policies": {"shadow": True, "escalation": {"consecutiveBlocks": 2}}})
    session.repeat(24)
    fresh = session.call(tool="exec", args={"command": "date"}, result=text_result("now"))
    assert fresh["verdict"] == "allow" and "run_ended" not in fresh


@pytest.mark.parametrize("verdict, expected", [
    ({"verdict": "abort", "guard": {"abort": True, "detector": "compaction_loop_persisted", "message": "m"}},
     ("compaction_loop_persisted", "m")),
    ({"verdict": "abort", "policy": {"verdict": "abort", "detector": "run_budget", "message": "p"},
      "guard": {"abort": False}}, ("run_budget", "p")),
    # a 2026.9.6 terminal block: the text the model saw, else the bare reason
    ({"verdict": "abort", "run_terminated": True, "detection": {"detector": "global_circuit_breaker"},
      "block_reason": "r", "block_text": "t"}, ("global_circuit_breaker", "t")),
    ({"verdict": "abort", "run_terminated": True, "detection": {"detector": "global_circuit_breaker"},
      "block_reason": "r"}, ("global_circuit_breaker", "r")),
    ({"verdict": "block", "run_terminated": False, "detection": {"detector": "generic_repeat"}}, None),
    ({"verdict": "block", "policy": {"verdict": "block", "detector": "run_budget"}}, None),
    ({"verdict": "allow", "guard": {"abort": False}}, None),
], ids=["guard", "policy-abort", "terminal-block-text", "terminal-block-reason", "recovery-block",
        "policy-block", "allow"])
def test_what_ends_a_run(verdict, expected):
    assert ending(verdict) == expected


def test_the_run_end_survives_the_state_codec_and_refuses_after_it():
    session = _aborted_session()
    [run] = session.state.runs.values()
    assert run.ended == ("compaction_loop_persisted", GUARD_MESSAGE, "ending") and not run.idle
    restored = SessionState.from_bytes(session.state.to_bytes())
    assert restored == session.state and restored.runs["r1"].ended == run.ended
    after = session.engine.process(tool_call(call_id="x"), restored)
    assert after["verdict"] == "abort" and after["run_ended"]["by"] == "compaction_loop_persisted"
    # a state without a run end encodes as before (five fields per run)
    fresh = Session()
    fresh.compact()
    assert SessionState.from_bytes(fresh.state.to_bytes()).runs["r1"].ended is None


def test_the_offline_store_keeps_the_run_end_with_the_guard_across_sessions():
    store = SessionStore(Engine())
    store.process(compaction(session="s1"))
    for n in range(3):
        store.process(tool_call(call_id=f"c{n}", session="s1"))
    later = store.process(tool_call(call_id="c9", session="s2", tool="exec", args={"command": "ls"}))
    assert later["verdict"] == "abort" and later["run_ended"]["by"] == "compaction_loop_persisted"
    assert store.guards["r1"].ended[0] == "compaction_loop_persisted"


def test_a_blank_run_id_ends_the_run_of_its_guard_identity():
    """Spec §7 identity: a blank run id's guard (and run end) is the session key, else the session id."""
    store = SessionStore(Engine())
    store.process(compaction(run="  ", session="s1"))
    for n in range(3):
        store.process(tool_call(call_id=f"c{n}", run="  ", session="s1"))
    assert store.process(tool_call(call_id="c8", run=None, session="s1"))["verdict"] == "abort"
    assert store.process(tool_call(call_id="c9", run=None, session="s2"))["verdict"] == "allow"


# ------------------------------------------------------------------ late calls

def _blocking_session() -> Session:
    session = Session({"enabled": True})
    verdicts = session.repeat(20)
    assert "block" not in [v["verdict"] for v in verdicts]  # generic_repeat blocks the 21st identical call
    return session


def test_a_blocked_call_the_runner_ran_without_its_verdict_is_applied_as_executed():
    session = _blocking_session()
    history_before = len(session.state.history)
    blocked = session.call(outcome_follows=True, deadline=1_000)
    assert blocked["verdict"] == "block" and blocked["recorded_call"] is False
    late = session.result(f"call-{session.calls}", ran_without_verdict=True, ref="late")
    assert late["late"] is True and late["verdict"] == "allow"
    assert "ignored" not in late
    assert late["outcome"]["recorded"] is True
    assert len(session.state.history) == history_before + 1
    record = session.state.history[-1]
    assert (record.tool, record.result_hash, record.ref) == ("read", late["outcome"]["result_hash"], "late")
    assert session.state.calls == {}

    # without the marker, OpenClaw's rule: the result of a blocked call is not applied
    plain = _blocking_session()
    plain.call(outcome_follows=True)
    ignored = plain.result(f"call-{plain.calls}")
    assert ignored["verdict"] == "ignore" and ignored["ignored"] == BLOCKED_RESULT_IGNORED and "late" not in ignored


def test_a_late_result_feeds_the_guard():
    """Calls that ran after a compaction count for the guard even though loopwatch had blocked them."""
    session = Session({"enabled": True, "criticalThreshold": 3, "warningThreshold": 2})
    session.compact()
    verdicts = []
    for _ in range(3):
        call = session.call(outcome_follows=True)
        verdicts.append(call["verdict"])
        verdicts.append(session.result(f"call-{session.calls}", ran_without_verdict=True)["verdict"])
    assert verdicts[-1] == "abort"  # third identical outcome after the compaction
    assert session.state.runs["r1"].aborted is True


def test_a_late_result_of_an_allowed_call_only_gains_late():
    late, plain = Session(), Session()
    for session in (late, plain):
        session.call(outcome_follows=True)
    a = late.result("call-1", ran_without_verdict=True)
    b = plain.result("call-1")
    assert a.pop("late") is True and a == b
    assert late.history() == plain.history()


def test_the_deadline_changes_no_verdict():
    with_deadline, without = Session({"enabled": True}), Session({"enabled": True})
    for n in range(25):
        a = with_deadline.call(deadline=n)  # long past, by any clock
        b = without.call()
        assert a == b


# ------------------------------------------------- calls loopwatch never judged

def test_a_result_of_a_call_loopwatch_never_judged_is_not_applied():
    session = Session()
    session.compact()
    before = session.history()
    verdict = session.result("other-plugin-blocked", judged=False, blocked_by="openclaw:loop-detection",
                             tool_name="read", args={"path": "/x"})
    assert verdict == {"type": "tool_result", "tool_name": "read", "args_hash": verdict["args_hash"],
                       "ignored": UNJUDGED_RESULT_IGNORED + " (blocked by openclaw:loop-detection)",
                       "run_aborted": False, "verdict": "ignore", "evidence": [], "decided_by": None}
    assert session.history() == before
    assert session.state.runs["r1"].remaining == 3  # the guard did not observe it
    # a result with no pending call that OpenClaw records (Spec §9) stays recorded
    recorded = session.result("no-pending", tool_name="read", args={"path": "/x"})
    assert recorded["outcome"]["recorded"] is True and recorded["guard"]["observed"] is True


@pytest.mark.parametrize("fields, match", [
    ({"deadline": "soon"}, "deadline must be epoch milliseconds"),
    ({"deadline": True}, "deadline must be epoch milliseconds"),
    ({"ran_without_verdict": 1}, "ran_without_verdict must be true or false"),
    ({"judged": "no"}, "judged must be true or false"),
    ({"blocked_by": 3}, "blocked_by must be a string"),
    ({"judged": False, "ran_without_verdict": True}, "contradicts"),
])
def test_bad_fields_are_schema_errors(fields, match):
    with pytest.raises(EventError, match=match):
        Engine(OpenClawConfig({})).process(tool_result("c", **fields), SessionState())


def test_a_terminal_block_of_the_2026_9_6_profile_ends_the_run():
    session = Session({"enabled": True})
    verdicts = session.repeat(22, profile="openclaw-2026.9.6")
    recovery, terminal = verdicts[20], verdicts[21]
    assert (recovery["tool_loop_recovery"], recovery["verdict"]) == ("recovery", "block")
    assert (terminal["tool_loop_recovery"], terminal["verdict"], terminal["run_terminated"]) == \
        ("terminal", "abort", True)
    assert "run_ended" not in terminal
    other = session.call(tool="exec", args={"command": "date"}, result=text_result("now"),
                         profile="openclaw-2026.9.6")
    assert other["decision"] == "allow" and other["run_terminated"] is True  # OpenClaw's view
    assert other["verdict"] == "abort"
    assert other["run_ended"]["by"] == "generic_repeat"
    assert other["run_ended"]["reason"] == terminal["block_text"]


def test_under_2026_9_6_a_vetoed_call_that_ran_late_is_one_executed_record():
    profile = "openclaw-2026.9.6"
    session = Session({"enabled": True})
    session.repeat(20, profile=profile)
    size = len(session.state.history)
    vetoed = session.call(profile=profile, outcome_follows=True)
    assert (vetoed["verdict"], vetoed["veto_recorded"]) == ("block", True)
    assert len(session.state.history) == size + 1 and session.state.history[-1].kind  # the veto record
    late = session.result(f"call-{session.calls}", ran_without_verdict=True, profile=profile)
    assert late["late"] is True and late["outcome"]["recorded"] is True
    assert len(session.state.history) == size + 1  # the veto record became the call's record, not a second one
    record = session.state.history[-1]
    assert (record.kind, record.result_hash) == (0, late["outcome"]["result_hash"])
