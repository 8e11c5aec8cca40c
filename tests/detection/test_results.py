"""tool_result events (Spec §9): pending, blocked and unmatched results, through the engine."""

from streams.detection.engine import BLOCKED_RESULT_IGNORED

from ._support import READ_ARGS, READ_HASH, SAME_RESULT, SAME_RESULT_HASH, Session, sha, text_result

ENABLED = {"enabled": True}
RECORDED = {"recorded": True, "result_hash": SAME_RESULT_HASH, "unknown_tool_name": None}
UNDEFINED_HASH = "tool:" + sha("undefined")
LS_HASH = "exec:" + sha('{"command":"ls"}')


def test_a_pending_call_is_answered_with_the_calls_tool_and_args_not_the_results():
    session = Session(ENABLED)
    session.call(outcome_follows=True, call_id="c1")
    verdict = session.result("c1", tool_name="exec", args={"command": "ls"})
    assert (verdict["tool_name"], verdict["args_hash"], verdict["outcome"]) == ("read", READ_HASH, RECORDED)
    assert [(r.tool, r.args_hash, r.result_hash) for r in session.state.history] == [
        ("read", READ_HASH, SAME_RESULT_HASH)]


def test_a_blocked_calls_result_reports_the_events_own_tool_and_args():
    session = Session(ENABLED)
    session.repeat(20)
    assert session.call(outcome_follows=True, call_id="late")["blocked"] is True
    history = session.history()
    verdict = session.result("late", tool_name=" Bash ", args={"command": "ls"})
    assert verdict == {"type": "tool_result", "tool_name": "exec", "args_hash": LS_HASH,
                       "ignored": BLOCKED_RESULT_IGNORED, "run_aborted": False, "verdict": "ignore", "evidence": [],
                       "decided_by": None}
    assert session.history() == history


def test_a_blocked_calls_result_without_tool_name_or_args_reports_tool_and_undefined():
    session = Session(ENABLED)
    session.repeat(20)
    session.call(outcome_follows=True, call_id="late")
    verdict = session.result("late")
    assert (verdict["tool_name"], verdict["args_hash"], verdict["ignored"]) == (
        "tool", UNDEFINED_HASH, BLOCKED_RESULT_IGNORED)


def test_an_unmatched_result_is_appended_with_the_events_tool_args_and_call_id():
    session = Session(ENABLED)
    verdict = session.result("never-seen", tool_name="READ", args=READ_ARGS, run=" r1 ")
    assert (verdict["tool_name"], verdict["args_hash"], verdict["outcome"], verdict["verdict"]) == (
        "read", READ_HASH, RECORDED, "allow")
    assert "ignored" not in verdict
    record = session.state.history[-1]
    # run id trimmed as every record's (Spec §8.2), the event's call id kept
    assert (record.tool, record.args_hash, record.call_id, record.run_id, record.result_hash) == (
        "read", READ_HASH, "never-seen", "r1", SAME_RESULT_HASH)


def test_an_unmatched_result_attaches_to_the_newest_matching_pending_record():
    session = Session(ENABLED)
    session.call(call_id="c1", result=None)  # returned nothing: its record stays pending
    session.call(call_id="c2", result=None)
    assert [r.result_hash for r in session.state.history] == [None, None]
    verdict = session.result("c1", tool_name="read", args=READ_ARGS)
    assert verdict["outcome"] == RECORDED
    assert [(r.call_id, r.result_hash) for r in session.state.history] == [(None, SAME_RESULT_HASH), ("c2", None)]
    # another tool or args does not match the pending record: a new complete record
    session.result("c2", tool_name="read", args={"path": "/other"})
    assert [(r.args_hash == READ_HASH, r.call_id, r.result_hash) for r in session.state.history] == [
        (True, None, SAME_RESULT_HASH), (True, "c2", None), (False, "c2", SAME_RESULT_HASH)]


def test_unmatched_results_feed_the_guard_and_can_abort_the_run():
    session = Session(ENABLED)
    session.compact()
    verdicts = [session.result(f"x{i}", tool_name="read", args=READ_ARGS) for i in range(3)]
    assert [v["guard"]["remaining"] for v in verdicts] == [2, 1, 0]
    assert [v["verdict"] for v in verdicts] == ["allow", "allow", "abort"]
    assert verdicts[-1]["guard"]["tool_name"] == "read" and verdicts[-1]["run_aborted"] is True


def test_unmatched_results_count_in_later_streaks():
    session = Session(ENABLED)
    for i in range(20):
        session.result(f"x{i}", tool_name="read", args=READ_ARGS)
    verdict = session.call(call_id="next")
    assert verdict["blocked"] is True
    assert (verdict["detection"]["detector"], verdict["detection"]["count"]) == ("generic_repeat", 20)


def test_an_unmatched_results_outcome_rule_comes_from_the_events_tool_and_args():
    session = Session(ENABLED)
    hashes = [session.result(f"x{pid}", text_result("done", status="completed", exitCode=0, pid=pid,
                                                    aggregated="ok"), tool_name="exec", args={"command": "ls"},
                             )["outcome"]["result_hash"] for pid in (11, 12)]
    assert hashes[0] == hashes[1]  # exec completed: pid ignored (Spec §4.3 rule 5)
    assert hashes[0] == sha('{"exitCode":0,"output":"ok","status":"completed","timedOut":false}')


def test_pending_calls_are_not_dropped_by_count():
    session = Session(ENABLED)
    for i in range(500):
        session.call("write", {"n": i}, call_id=f"w{i}", outcome_follows=True)
    verdict = session.result("w0", SAME_RESULT)
    assert (verdict["tool_name"], verdict["args_hash"]) == ("write", "write:" + sha('{"n":0}'))
    assert len(session.state.calls) == 499


def test_a_result_with_nothing_returned_and_no_pending_call_records_nothing():
    session = Session(ENABLED)
    verdict = session.result("x", None)
    assert verdict["outcome"] == {"recorded": False, "result_hash": None, "unknown_tool_name": None}
    assert verdict["verdict"] == "allow" and session.state.history == []


def test_same_result_twice_second_is_unmatched_and_recorded():
    session = Session(ENABLED)
    session.call(outcome_follows=True, call_id="c1")
    first = session.result("c1")
    second = session.result("c1", SAME_RESULT)
    assert first["args_hash"] == READ_HASH and second["args_hash"] == UNDEFINED_HASH
    assert [r.tool for r in session.state.history] == ["read", "tool"]
