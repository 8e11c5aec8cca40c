"""The post-compaction guard (Spec §7), through the Engine and on a RunState directly."""

import pytest

from streams.detection.post_compaction_guard import (
    COMPACTION_LOOP_PERSISTED,
    abort_evidence,
    abort_message,
    arm,
    guard_status,
    observe,
)
from streams.detection.state import RunState

from ._support import READ_ARGS, READ_HASH, SAME_RESULT, SAME_RESULT_HASH, Session, sha, text_result


def message(tool: str, count: int, window: int) -> str:
    return (f"CRITICAL: tool {tool} repeated {count} times with identical arguments and identical results within "
            f"{window} attempts after auto-compaction. The compaction did not break the loop. Aborting to prevent "
            "runaway resource use.")


def observed(remaining: int) -> dict:
    return {"enabled": True, "armed": True, "observed": True, "remaining": remaining, "abort": False}


IDLE = {"enabled": True, "armed": False, "observed": False, "remaining": 0, "abort": False}
DISABLED = {"enabled": False, "armed": False, "observed": False, "remaining": 0, "abort": False}


def test_default_window_aborts_on_third_identical_outcome():
    session = Session()  # no loopDetection block: detectors off, guard on
    armed = session.compact()
    assert armed == {"type": "compaction_retry", "verdict": "allow", "evidence": [], "decided_by": None,
                     "guard": {"enabled": True, "window_size": 3, "armed": True, "remaining": 3}}
    first, second, third = (session.call(ref=f"c{i}") for i in range(1, 4))
    assert first["guard"] == observed(2) and first["run_aborted"] is False and first["verdict"] == "allow"
    assert second["guard"] == observed(1)
    assert third["guard"] == {"enabled": True, "armed": True, "observed": True, "remaining": 0, "abort": True,
                              "detector": COMPACTION_LOOP_PERSISTED, "count": 3, "tool_name": "read",
                              "message": message("read", 3, 3)}
    assert third["verdict"] == "abort" and third["run_aborted"] is True
    assert third["evidence"] == ["c1", "c2", "c3"]
    assert third["detection"] == {"stuck": False} and third["blocked"] is False  # it ran: an outcome check
    later = session.call()
    assert later["guard"] == IDLE and later["run_aborted"] is True
    assert session.call(run="r2")["run_aborted"] is False


def test_not_armed_without_compaction():
    session = Session()
    for verdict in session.repeat(5):
        assert verdict["guard"] == IDLE and verdict["verdict"] == "allow"


def test_differing_outcome_prevents_abort_and_window_expires():
    session = Session()
    session.compact()
    verdicts = [session.call(result=text_result(text)) for text in ("a", "b", "a")]
    assert [v["guard"]["remaining"] for v in verdicts] == [2, 1, 0]
    assert not any(v["guard"]["abort"] for v in verdicts)
    for verdict in session.repeat(4, result=text_result("a")):
        assert verdict["guard"] == IDLE and verdict["run_aborted"] is False


@pytest.mark.parametrize("window, calls_to_abort", [(1, 1), (2, 2), (4, 4)], ids=["1", "2", "4"])
def test_window_size(window, calls_to_abort):
    session = Session({"postCompactionGuard": {"windowSize": window}})
    assert session.compact()["guard"] == {"enabled": True, "window_size": window, "armed": True,
                                          "remaining": window}
    verdicts = session.repeat(calls_to_abort)
    assert [v["guard"]["abort"] for v in verdicts] == [False] * (calls_to_abort - 1) + [True]
    assert verdicts[-1]["guard"]["count"] == window
    assert verdicts[-1]["guard"]["message"] == message("read", window, window)


def test_window_size_1_first_observed_outcome_aborts():
    session = Session({"postCompactionGuard": {"windowSize": 1}})
    session.compact()
    verdict = session.call("exec", {"command": "make"}, text_result("anything at all"))
    assert verdict["guard"]["abort"] is True
    assert verdict["guard"]["message"] == ("CRITICAL: tool exec repeated 1 times with identical arguments and "
                                           "identical results within 1 attempts after auto-compaction. The "
                                           "compaction did not break the loop. Aborting to prevent runaway "
                                           "resource use.")


def test_window_size_5_with_one_mismatch_does_not_abort():
    session = Session({"postCompactionGuard": {"windowSize": 5}})
    session.compact()
    results = ["same", "same", "other", "same", "same", "same"]
    verdicts = [session.call(result=text_result(r)) for r in results]
    assert [v["guard"]["remaining"] for v in verdicts[:5]] == [4, 3, 2, 1, 0]
    assert not any(v["guard"]["abort"] for v in verdicts)
    assert verdicts[5]["guard"] == IDLE


def test_rearming_restarts_the_window():
    session = Session()
    session.compact()
    session.call(), session.call()
    rearmed = session.compact()
    assert rearmed["guard"] == {"enabled": True, "window_size": 3, "armed": True, "remaining": 3}
    fourth, fifth, sixth = session.call(), session.call(), session.call()
    assert (fourth["guard"]["abort"], fifth["guard"]["abort"]) == (False, False)
    assert sixth["guard"]["abort"] is True and sixth["guard"]["count"] == 3


def test_disabled_when_enabled_false():
    session = Session({"enabled": False})
    assert session.compact()["guard"] == {"enabled": False, "window_size": 3, "armed": False, "remaining": 0}
    for verdict in session.repeat(4):
        assert verdict["guard"] == DISABLED and verdict["verdict"] == "allow"


def test_enabled_true_runs_guard_with_detectors():
    session = Session({"enabled": True, "postCompactionGuard": {"windowSize": 3}})
    session.compact()
    assert session.repeat(3)[-1]["guard"]["abort"] is True


def test_calls_without_outcome_do_not_consume_the_window():
    session = Session()
    session.compact()
    nothing = session.call(result=None)
    assert nothing["guard"] == {"enabled": True, "armed": True, "observed": False, "remaining": 3, "abort": False}
    verdicts = session.repeat(3)
    assert [v["guard"]["remaining"] for v in verdicts] == [2, 1, 0]
    assert verdicts[-1]["guard"]["abort"] is True


def test_vetoed_calls_are_not_observed():
    session = Session({"enabled": True, "warningThreshold": 2, "criticalThreshold": 3,
                       "globalCircuitBreakerThreshold": 4})
    session.repeat(3)
    session.compact()
    blocked = session.call()
    assert blocked["blocked"] is True
    assert blocked["guard"] == {"enabled": True, "armed": True, "observed": False, "remaining": 3, "abort": False}
    others = session.repeat(3, "list", {"dir": "."})
    assert [v["guard"]["remaining"] for v in others] == [2, 1, 0]
    assert others[-1]["guard"]["abort"] is True and others[-1]["guard"]["tool_name"] == "list"


def test_deferred_outcomes_are_observed_when_they_arrive():
    session = Session()
    session.compact()
    calls = [session.call(outcome_follows=True, call_id=c, ref=f"call-{c}") for c in "abc"]
    assert all(v["guard"] == {"enabled": True, "armed": True, "observed": False, "remaining": 3, "abort": False}
               for v in calls)
    results = [session.result(c, ref=f"result-{c}") for c in "abc"]
    assert [r["guard"]["remaining"] for r in results] == [2, 1, 0]
    last = results[-1]
    assert last["type"] == "tool_result" and last["verdict"] == "abort" and last["run_aborted"] is True
    assert last["guard"]["tool_name"] == "read" and last["guard"]["message"] == message("read", 3, 3)
    assert last["evidence"] == ["result-a", "result-b", "result-c"]


def test_identical_errors_abort():
    session = Session()
    session.compact()
    verdicts = session.repeat(3, "exec", {"command": "curl x"}, None, "HTTP 503 Service Unavailable")
    assert verdicts[-1]["outcome"]["result_hash"] == (
        "error:302d025c3b88dc9a19a785b3043ae59e6992047643496122aed1ddf6c942202f")
    assert verdicts[-1]["guard"]["abort"] is True and verdicts[-1]["guard"]["tool_name"] == "exec"


@pytest.mark.parametrize("calls", [
    [("read", READ_ARGS), ("write", READ_ARGS), ("read", READ_ARGS)],
    [("read", READ_ARGS), ("read", {"path": "/other"}), ("read", READ_ARGS)],
], ids=["different-tool-same-args", "same-tool-different-args"])
def test_any_differing_triple_member_prevents_abort(calls):
    session = Session()
    session.compact()
    verdicts = [session.call(tool, args, SAME_RESULT) for tool, args in calls]
    assert not any(v["guard"]["abort"] for v in verdicts)


def test_guard_is_per_run():
    session = Session()
    session.compact(run="r1")
    others = session.repeat(3, run="r2")
    assert all(v["guard"] == IDLE for v in others)
    mine = session.repeat(3, run="r1")
    assert mine[-1]["guard"]["abort"] is True
    assert session.call(run="r2")["run_aborted"] is False


def test_keyless_outcomes_still_feed_the_guard():
    session = Session()
    session.compact()
    verdicts = session.repeat(3, session_key=None)
    assert all(v["recorded_call"] is False for v in verdicts)
    assert verdicts[-1]["guard"]["abort"] is True


def test_guard_config_fixed_when_run_is_created_for_its_agent():
    raw = {"tools": {"loopDetection": {"postCompactionGuard": {"windowSize": 4}}},
           "agents": {"list": [{"id": "fast", "tools": {"loopDetection": {"postCompactionGuard": {"windowSize": 2}}}},
                               {"id": "off", "tools": {"loopDetection": {"enabled": False}}}]}}
    session = Session(raw=raw)
    assert session.compact(run="r1", agent_id="fast")["guard"]["window_size"] == 2
    assert session.compact(run="r1")["guard"]["window_size"] == 2  # same run: config kept
    assert session.compact(run="r1", agent_id="off")["guard"]["enabled"] is True
    assert session.repeat(2, run="r1")[-1]["guard"]["abort"] is True
    assert session.compact(run="r2")["guard"]["window_size"] == 4
    assert session.compact(run="r3", agent_id="off")["guard"] == {"enabled": False, "window_size": 4,
                                                                  "armed": False, "remaining": 0}


# ------------------------------------------------------------------ the module on a RunState


def test_arm_observe_abort_on_run_state():
    run = RunState(guard_enabled=True, window_size=2)
    assert guard_status(run) == IDLE
    assert observe(run, "read", READ_HASH, SAME_RESULT_HASH) == IDLE  # not armed: nothing
    arm(run)
    assert (run.remaining, run.window) == (2, [])
    assert guard_status(run) == {"enabled": True, "armed": True, "observed": False, "remaining": 2, "abort": False}
    assert observe(run, "read", READ_HASH, SAME_RESULT_HASH, ref="x") == observed(1)
    status = observe(run, "read", READ_HASH, SAME_RESULT_HASH, ref=None)
    assert status["abort"] is True and status["count"] == 2 and run.aborted is True
    assert abort_evidence(run, "read", READ_HASH, SAME_RESULT_HASH) == ["x"]  # refs that are None are left out
    assert observe(run, "read", READ_HASH, SAME_RESULT_HASH) == IDLE  # window closed


def test_arm_clears_window_and_disabled_guard_stays_unarmed():
    run = RunState(guard_enabled=True, window_size=3)
    arm(run)
    observe(run, "read", READ_HASH, "h1")
    arm(run)
    assert (run.remaining, run.window) == (3, [])
    disabled = RunState(guard_enabled=False, window_size=3)
    arm(disabled)
    assert (disabled.remaining, disabled.window) == (0, [])
    assert observe(disabled, "read", READ_HASH, "h1") == DISABLED


def test_abort_evidence_only_matching_triples():
    run = RunState(True, 3, remaining=0, window=[("read", READ_HASH, "h1", 1), ("read", READ_HASH, "h2", 2),
                                                 ("read", READ_HASH, "h1", 3)])
    assert abort_evidence(run, "read", READ_HASH, "h1") == [1, 3]


def test_abort_message_verbatim():
    assert abort_message("exec", 3, 3) == (
        "CRITICAL: tool exec repeated 3 times with identical arguments and identical results within 3 attempts "
        "after auto-compaction. The compaction did not break the loop. Aborting to prevent runaway resource use.")
    assert sha(abort_message("read", 1, 1)) == sha(message("read", 1, 1))
