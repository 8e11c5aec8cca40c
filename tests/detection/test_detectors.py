"""Rolling detectors, precedence, messages, warning keys, dedupe and blocking (Spec §3, §5, §6, §8),
driven through the Engine one event at a time."""

import re

import pytest

from streams.detection import EventError, SessionState, digest
from streams.detection.engine import BLOCKED_RESULT_IGNORED
from streams.detection.fingerprint import args_hash
from streams.detection.state import MAX_WARNING_KEYS

from ._support import READ_ARGS, READ_HASH, SAME_RESULT, SAME_RESULT_HASH, Session, sha, text_result, tool_call

ENABLED = {"enabled": True}
NOT_STUCK = {"stuck": False}
NOT_RECORDED = {"recorded": False, "result_hash": None, "unknown_tool_name": None}


def varying(i: int) -> dict:
    return text_result(f"version {i}")


def generic_warning(tool: str, h: str, count: int) -> dict:
    return {"stuck": True, "level": "warning", "detector": "generic_repeat", "count": count,
            "message": f"WARNING: You have called {tool} {count} times with identical arguments. If this is not "
                       "making progress, stop retrying and report the task as failed.",
            "warning_key": f"generic:{tool}:{h}"}


def generic_critical(tool: str, h: str, r: str, count: int) -> dict:
    return {"stuck": True, "level": "critical", "detector": "generic_repeat", "count": count,
            "message": f"CRITICAL: Called {tool} with identical arguments and identical outcomes {count} times. "
                       "Session execution blocked to prevent runaway loops.",
            "warning_key": f"generic:{tool}:{h}:{r}"}


# ------------------------------------------------------------------ the judged call is not seen


def test_threshold_10_first_fires_on_11th_call_and_critical_on_21st():
    session = Session(ENABLED)
    verdicts = session.repeat(21)
    for v in verdicts[:10]:
        assert (v["decision"], v["detection"], v["warning"], v["blocked"]) == ("allow", NOT_STUCK, None, False)
    eleventh = verdicts[10]
    assert eleventh["detection"] == generic_warning("read", READ_HASH, 10)
    assert eleventh["warning"] == {"emitted": True, "key": f"r1:generic:read:{READ_HASH}", "bucket": 1}
    assert (eleventh["decision"], eleventh["verdict"], eleventh["recorded_call"]) == ("warn", "warn", True)
    assert [v["detection"]["count"] for v in verdicts[11:20]] == list(range(11, 20))
    assert [v["warning"]["emitted"] for v in verdicts[11:20]] == [False] * 9
    assert [v["decision"] for v in verdicts[11:20]] == ["allow"] * 9
    blocked = verdicts[20]
    detection = generic_critical("read", READ_HASH, SAME_RESULT_HASH, 20)
    assert blocked["detection"] == detection
    assert blocked["decision"] == blocked["verdict"] == "block"
    assert blocked["blocked"] is True and blocked["block_reason"] == detection["message"]
    assert blocked["warning"] is None and blocked["recorded_call"] is False and blocked["outcome"] == NOT_RECORDED


@pytest.mark.parametrize("thresholds, first_warning_call, first_block_call", [
    ((10, 20, 30), 11, 21),
    ((3, 5, 8), 4, 6),
    ((1, 2, 3), 2, 3),
    ((4, 12, 13), 5, 13),
], ids=["defaults", "3-5-8", "1-2-3", "4-12-13"])
def test_nth_call_sees_n_minus_1_records(thresholds, first_warning_call, first_block_call):
    warning, critical, breaker = thresholds
    session = Session({"enabled": True, "warningThreshold": warning, "criticalThreshold": critical,
                       "globalCircuitBreakerThreshold": breaker})
    verdicts = session.repeat(first_block_call)
    levels = [v["detection"].get("level") for v in verdicts]
    assert levels.index("warning") + 1 == first_warning_call
    assert verdicts[first_warning_call - 1]["detection"]["count"] == warning
    assert levels.index("critical") + 1 == first_block_call
    assert verdicts[-1]["detection"]["count"] == critical


# ------------------------------------------------------------------ blocking leaves no trace


def test_blocked_call_leaves_no_trace_and_block_is_sticky():
    session = Session(ENABLED)
    session.repeat(20)
    history, buckets = session.history(), dict(session.state.warning_buckets)
    runs = {key: (run.remaining, list(run.window), run.aborted) for key, run in session.state.runs.items()}
    for _ in range(4):
        verdict = session.call()
        assert verdict["blocked"] is True
        assert verdict["detection"]["count"] == 20  # frozen streak (#109435)
        assert session.history() == history
        assert session.state.warning_buckets == buckets
        assert {k: (r.remaining, list(r.window), r.aborted) for k, r in session.state.runs.items()} == runs
    # A new run starts clean; other arguments are judged on their own.
    assert session.call(run="r2")["detection"] == NOT_STUCK
    assert session.call(args={"path": "/other"})["detection"] == NOT_STUCK


def test_result_of_blocked_call_is_ignored():
    session = Session(ENABLED)
    session.repeat(20)
    history = session.history()
    call = session.call(outcome_follows=True, call_id="late", result=None)
    assert call["blocked"] is True and call["outcome"] == NOT_RECORDED
    result = session.result("late", SAME_RESULT)
    assert result == {"type": "tool_result", "tool_name": "tool", "args_hash": "tool:" + sha("undefined"),
                      "ignored": BLOCKED_RESULT_IGNORED, "run_aborted": False, "verdict": "ignore", "evidence": [],
                      "decided_by": None}
    assert session.history() == history
    # The blocked call is forgotten once answered: a second result has no pending call and is recorded (Spec §9).
    again = session.result("late")
    assert "ignored" not in again and again["outcome"] == {
        "recorded": True, "result_hash": SAME_RESULT_HASH, "unknown_tool_name": None}


def test_warning_call_proceeds_and_is_recorded():
    session = Session(ENABLED)
    session.repeat(10)
    verdict = session.call()
    assert verdict["decision"] == "warn" and verdict["blocked"] is False
    assert verdict["outcome"] == {"recorded": True, "result_hash": SAME_RESULT_HASH, "unknown_tool_name": None}
    assert len(session.state.history) == 11


# ------------------------------------------------------------------ ping-pong

A_ARGS, B_ARGS = {"path": "a.txt"}, {"dir": "."}
A_HASH, B_HASH = args_hash("read", A_ARGS), args_hash("list", B_ARGS)
PING_PONG_KEY = f"pingpong:{B_HASH}|{A_HASH}"  # "list:..." sorts before "read:..."


def ping_pong_call(session: Session, index: int, result_a=None, result_b=None, **kwargs) -> dict:
    """Call index (1-based) of an A, B, A, B... alternation; odd = read A, even = list B."""
    if index % 2:
        return session.call("read", A_ARGS, result_a or text_result("A"), ref=f"e{index}", **kwargs)
    return session.call("list", B_ARGS, result_b or text_result("B"), ref=f"e{index}", **kwargs)


def test_ping_pong_warning_then_block():
    session = Session(ENABLED)
    verdicts = [ping_pong_call(session, i) for i in range(1, 21)]
    assert all(v["detection"] == NOT_STUCK for v in verdicts[:9])
    tenth, eleventh, twentieth = verdicts[9], verdicts[10], verdicts[19]
    assert tenth["detection"] == {
        "stuck": True, "level": "warning", "detector": "ping_pong", "count": 10,
        "message": "WARNING: You are alternating between repeated tool-call patterns (10 consecutive calls). "
                   "This looks like a ping-pong loop; stop retrying and report the task as failed.",
        "warning_key": PING_PONG_KEY, "paired_tool_name": "read"}
    assert tenth["warning"] == {"emitted": True, "key": "r1:" + PING_PONG_KEY, "bucket": 1}
    assert tenth["evidence"] == [f"e{i}" for i in range(1, 10)]
    assert eleventh["detection"]["count"] == 11
    assert eleventh["detection"]["paired_tool_name"] == "list"
    assert eleventh["detection"]["warning_key"] == PING_PONG_KEY  # same pair key from either side
    assert eleventh["warning"]["emitted"] is False
    assert [v["detection"]["count"] for v in verdicts[9:19]] == list(range(10, 20))
    assert twentieth["detection"] == {
        "stuck": True, "level": "critical", "detector": "ping_pong", "count": 20,
        "message": "CRITICAL: You are alternating between repeated tool-call patterns (20 consecutive calls) with "
                   "no progress. This appears to be a stuck ping-pong loop. Session execution blocked to prevent "
                   "resource waste.",
        "warning_key": PING_PONG_KEY, "paired_tool_name": "read"}
    assert twentieth["blocked"] is True
    assert twentieth["evidence"] == [f"e{i}" for i in range(1, 20)]


def test_ping_pong_block_is_sticky_and_other_side_gets_generic_warning():
    session = Session(ENABLED)
    for i in range(1, 20):
        ping_pong_call(session, i)
    assert ping_pong_call(session, 20)["blocked"] is True
    again = ping_pong_call(session, 20)
    assert again["blocked"] is True and again["detection"]["count"] == 20
    other_side = ping_pong_call(session, 21)  # read A again: a repeat of the newest record
    assert other_side["detection"] == generic_warning("read", A_HASH, 10)
    assert other_side["warning"] == {"emitted": True, "key": f"r1:generic:read:{A_HASH}", "bucket": 1}


def test_ping_pong_with_progress_only_warns():
    session = Session(ENABLED)
    verdicts = [ping_pong_call(session, i, text_result(f"A{i}"), text_result(f"B{i}")) for i in range(1, 26)]
    assert [v["detection"].get("level") for v in verdicts[9:]] == ["warning"] * 16
    assert [v["detection"]["count"] for v in verdicts[9:]] == list(range(10, 26))
    assert not any(v["blocked"] for v in verdicts)


def test_ping_pong_one_side_progress_only_warns():
    session = Session(ENABLED)
    verdicts = [ping_pong_call(session, i, text_result("A"), text_result(f"B{i}")) for i in range(1, 23)]
    assert verdicts[19]["detection"]["level"] == "warning" and verdicts[19]["detection"]["count"] == 20
    assert not any(v["blocked"] for v in verdicts)


def test_pending_record_spoils_ping_pong_evidence():
    session = Session(ENABLED)
    for i in range(1, 20):
        if i == 7:
            ping_pong_call(session, i, outcome_follows=True)  # never answered: stays pending
        else:
            ping_pong_call(session, i)
    verdict = ping_pong_call(session, 20)
    assert verdict["detection"]["level"] == "warning" and verdict["detection"]["count"] == 20
    assert verdict["blocked"] is False


LOW = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 50, "globalCircuitBreakerThreshold": 60}


def test_ping_pong_counts_third_signature_and_repeat_break_it():
    session = Session(LOW)
    counts = [ping_pong_call(session, i)["detection"].get("count") for i in range(1, 6)]
    assert counts == [None, None, 3, 4, 5]
    third = session.call("grep", {"q": "x"}, text_result("C"))
    assert third["detection"] == NOT_STUCK
    restart = ping_pong_call(session, 7)  # read A after C: tail is C, A -> count 3
    assert restart["detection"]["detector"] == "ping_pong" and restart["detection"]["count"] == 3
    assert restart["detection"]["paired_tool_name"] == "grep"


def test_repeating_last_instead_of_switching_is_not_ping_pong():
    session = Session(LOW)
    for i in range(1, 5):
        ping_pong_call(session, i)
    verdict = ping_pong_call(session, 4)  # list B again right after list B
    assert verdict["detection"] == NOT_STUCK  # B's recentCount is 2 < 3


def test_ping_pong_same_tool_different_args():
    session = Session(LOW)
    first, second = {"path": "x"}, {"path": "y"}
    for i in range(4):
        verdict = session.call("read", first if i % 2 == 0 else second, text_result("same"))
    h1, h2 = args_hash("read", first), args_hash("read", second)
    assert verdict["detection"]["detector"] == "ping_pong" and verdict["detection"]["count"] == 4
    assert verdict["detection"]["paired_tool_name"] == "read"
    assert verdict["detection"]["warning_key"] == "pingpong:" + "|".join(sorted([h1, h2]))


def test_ping_pong_detector_disabled_falls_to_generic():
    session = Session({**LOW, "detectors": {"pingPong": False}})
    verdicts = [ping_pong_call(session, i) for i in range(1, 8)]
    assert [v["detection"].get("detector") for v in verdicts] == [None] * 6 + ["generic_repeat"]
    assert verdicts[6]["detection"]["count"] == 3


# ------------------------------------------------------------------ unknown tool repeat

UNKNOWN = "Unknown tool: weather_get"


def test_unknown_tool_blocks_at_threshold_regardless_of_args():
    session = Session(ENABLED)
    for i in range(1, 11):
        verdict = session.call("exec", {"command": f"weather {i}"}, None, UNKNOWN, ref=f"u{i}")
        assert verdict["outcome"]["unknown_tool_name"] == "weather_get"
        assert verdict["detection"] == NOT_STUCK
    blocked = session.call("exec", {"command": "something else"}, None, UNKNOWN)
    assert blocked["detection"] == {
        "stuck": True, "level": "critical", "detector": "unknown_tool_repeat", "count": 10,
        "message": "CRITICAL: attempted unavailable tool weather_get 10 times. Stop retrying that missing tool and "
                   "answer without it.",
        "warning_key": "unknown-tool:exec:weather_get"}
    assert blocked["blocked"] is True
    assert blocked["evidence"] == [f"u{i}" for i in range(1, 11)]
    # Another tool is not affected.
    assert session.call("read")["detection"] == NOT_STUCK


UNKNOWN3 = {"enabled": True, "unknownToolThreshold": 3}


def unknown_call(session: Session, name: str = "foo", tool: str = "exec", **kwargs) -> dict:
    return session.call(tool, {"n": session.calls}, None, f"Unknown tool: {name}", **kwargs)


@pytest.mark.parametrize("interruption", ["other-tool", "success", "returned-error-text"])
def test_unknown_tool_streak_broken_by_other_records(interruption):
    session = Session(UNKNOWN3)
    unknown_call(session), unknown_call(session)
    if interruption == "other-tool":
        session.call("read")
    elif interruption == "success":
        session.call("exec", {"command": "ls"}, text_result("ok"))
    else:
        session.call("exec", {"command": "x"}, text_result("Unknown tool: foo"))
    unknown_call(session), unknown_call(session)
    assert unknown_call(session)["detection"] == NOT_STUCK  # streak 2 when judged
    assert unknown_call(session)["detection"]["count"] == 3


def test_pending_record_stops_unknown_tool_streak_until_answered():
    session = Session(UNKNOWN3)
    unknown_call(session), unknown_call(session)
    assert session.call("exec", {"n": "p1"}, None, outcome_follows=True, call_id="p1")["detection"] == NOT_STUCK
    # The newest record is pending: the streak is 0, although three unknown-tool records precede it.
    assert unknown_call(session, outcome_follows=True, call_id="p2")["detection"] == NOT_STUCK
    session.result("p1", None, "Unknown tool: foo")
    session.result("p2", None, "Unknown tool: foo")
    verdict = unknown_call(session)
    assert verdict["detection"]["detector"] == "unknown_tool_repeat" and verdict["detection"]["count"] == 4


def test_unknown_tool_streak_counts_newest_name_only():
    session = Session(UNKNOWN3)
    unknown_call(session, "foo"), unknown_call(session, "foo")
    unknown_call(session, "bar")
    assert unknown_call(session, "bar")["detection"] == NOT_STUCK  # four unknown records, leading run of "bar" 1
    assert unknown_call(session, "bar")["detection"] == NOT_STUCK  # leading run of "bar" is 2
    verdict = unknown_call(session, "bar")
    assert verdict["detection"]["count"] == 3
    assert verdict["detection"]["warning_key"] == "unknown-tool:exec:bar"
    assert verdict["detection"]["message"].startswith("CRITICAL: attempted unavailable tool bar 3 times.")


def test_unknown_tool_streak_needs_same_calling_tool():
    session = Session(UNKNOWN3)
    for _ in range(3):
        unknown_call(session, tool="exec")
    assert session.call("read", READ_ARGS, None, "Unknown tool: foo")["detection"] == NOT_STUCK
    # The newest record is now a read: exec's streak is stopped at once.
    assert unknown_call(session, tool="exec")["detection"] == NOT_STUCK


def test_unknown_tool_not_gated_by_detectors_and_scoped_by_run():
    session = Session({**UNKNOWN3, "detectors": {"genericRepeat": False, "knownPollNoProgress": False,
                                                 "pingPong": False}})
    for _ in range(3):
        unknown_call(session)
    assert unknown_call(session, run="r2")["detection"] == NOT_STUCK
    assert unknown_call(session)["detection"]["detector"] == "unknown_tool_repeat"


def test_second_pattern_name_in_message():
    session = Session(UNKNOWN3)
    for _ in range(3):
        session.call("exec", {"c": 1}, None, 'tool "Maps.Geo" is not available')
    verdict = session.call("exec", {"c": 2})
    assert verdict["detection"]["message"] == ("CRITICAL: attempted unavailable tool maps.geo 3 times. "
                                               "Stop retrying that missing tool and answer without it.")


# ------------------------------------------------------------------ known poll, global breaker


@pytest.mark.parametrize("tool, args", [
    ("process", {"action": "poll", "sessionId": "s-1"}),
    ("process", {"action": "log", "sessionId": "s-1"}),
    ("command_status", {"id": "c-1"}),
], ids=["process-poll", "process-log", "command-status"])
def test_known_poll_warning_then_block(tool, args):
    session = Session(ENABLED)
    result = {"details": {"status": "running", "pid": 1}, "content": [{"type": "text", "text": "still running"}]}
    verdicts = session.repeat(21, tool, args, result)
    h, r = args_hash(tool, args), verdicts[0]["outcome"]["result_hash"]
    assert all(v["detection"] == NOT_STUCK for v in verdicts[:10])
    assert verdicts[10]["detection"] == {
        "stuck": True, "level": "warning", "detector": "known_poll_no_progress", "count": 10,
        "message": f"WARNING: You have called {tool} 10 times with identical arguments and no progress. Stop "
                   "polling and either (1) increase wait time between checks, or (2) report the task as failed if "
                   "the process is stuck.",
        "warning_key": f"poll:{tool}:{h}:{r}"}
    assert verdicts[20]["detection"] == {
        "stuck": True, "level": "critical", "detector": "known_poll_no_progress", "count": 20,
        "message": f"CRITICAL: Called {tool} with identical arguments and no progress 20 times. This appears to be "
                   "a stuck polling loop. Session execution blocked to prevent resource waste.",
        "warning_key": f"poll:{tool}:{h}:{r}"}
    assert verdicts[20]["blocked"] is True


def test_known_poll_with_progress_never_gets_generic_results():
    session = Session(ENABLED)
    verdicts = [session.call("command_status", {"id": "c"}, varying(i)) for i in range(25)]
    assert all(v["detection"] == NOT_STUCK for v in verdicts)


def test_known_poll_detector_off_leaves_only_the_global_breaker():
    session = Session({"enabled": True, "detectors": {"knownPollNoProgress": False}})
    verdicts = session.repeat(31, "command_status", {"id": "c"}, text_result("same"))
    assert all(v["detection"] == NOT_STUCK for v in verdicts[:30])
    assert verdicts[30]["detection"]["detector"] == "global_circuit_breaker"


def test_global_breaker_when_generic_repeat_is_off():
    session = Session({"enabled": True, "detectors": {"genericRepeat": False}})
    verdicts = session.repeat(32)
    assert all(v["detection"] == NOT_STUCK for v in verdicts[:30])
    assert verdicts[30]["detection"] == {
        "stuck": True, "level": "critical", "detector": "global_circuit_breaker", "count": 30,
        "message": "CRITICAL: read has repeated identical no-progress outcomes 30 times. Session execution blocked by "
                   "global circuit breaker to prevent runaway loops.",
        "warning_key": f"global:read:{READ_HASH}:{SAME_RESULT_HASH}"}
    assert verdicts[31]["blocked"] is True and verdicts[31]["detection"]["count"] == 30


def test_global_breaker_above_history_size_is_unreachable():
    session = Session({"enabled": True, "globalCircuitBreakerThreshold": 40, "detectors": {"genericRepeat": False}})
    assert all(v["detection"] == NOT_STUCK for v in session.repeat(45))
    assert len(session.state.history) == 30


def test_identical_args_with_changing_outcomes_only_warn():
    session = Session(ENABLED)
    verdicts = [session.call(result=varying(i)) for i in range(30)]
    assert not any(v["blocked"] for v in verdicts)
    assert verdicts[29]["detection"] == generic_warning("read", READ_HASH, 29)


def test_no_outcome_calls_only_warn():
    session = Session(ENABLED)
    verdicts = session.repeat(25, result=None)
    assert all(v["outcome"] == NOT_RECORDED for v in verdicts)
    assert verdicts[24]["detection"] == generic_warning("read", READ_HASH, 24)


def test_noprogress_streak_skips_pending_and_stops_at_different_hash():
    session = Session({"enabled": True, "warningThreshold": 2, "criticalThreshold": 4,
                       "globalCircuitBreakerThreshold": 50})
    session.call(result=text_result("old"))
    session.repeat(2)
    session.call(result=None)  # pending (no outcome): skipped, not breaking
    session.repeat(2)
    verdict = session.call()  # streak R, R, (pending), R, R, then "old" stops it
    assert verdict["detection"]["level"] == "critical" and verdict["detection"]["count"] == 4
    session2 = Session({"enabled": True, "warningThreshold": 2, "criticalThreshold": 4,
                        "globalCircuitBreakerThreshold": 50})
    session2.repeat(3)
    session2.call(result=text_result("changed"))
    session2.repeat(2)
    verdict2 = session2.call()
    assert verdict2["detection"]["level"] == "warning" and verdict2["detection"]["count"] == 6
    assert verdict2["detection"]["warning_key"] == f"generic:read:{READ_HASH}"


# ------------------------------------------------------------------ warning dedupe (§6)


def test_warnings_emitted_at_10_20_30_only():
    session = Session(ENABLED)
    verdicts = [session.call(result=varying(i)) for i in range(32)]
    rows = [(v["detection"]["count"], v["warning"]["emitted"], v["warning"]["bucket"])
            for v in verdicts if v["detection"]["stuck"]]
    assert [row for row in rows if row[1]] == [(10, True, 1), (20, True, 2), (30, True, 3)]
    assert rows[-1] == (30, False, 3)  # history is capped at 30
    assert [row[0] for row in rows] == list(range(10, 31)) + [30]
    assert session.state.warning_buckets == {f"r1:generic:read:{READ_HASH}": 3}


def test_warnings_below_count_10_are_never_emitted():
    session = Session({"enabled": True, "warningThreshold": 3, "criticalThreshold": 15,
                       "globalCircuitBreakerThreshold": 16})
    verdicts = [session.call(result=varying(i)) for i in range(11)]
    for count, verdict in zip(range(3, 10), verdicts[3:10]):
        assert verdict["detection"]["count"] == count
        assert verdict["warning"] == {"emitted": False, "key": f"r1:generic:read:{READ_HASH}", "bucket": 0}
        assert verdict["decision"] == verdict["verdict"] == "allow"
    assert verdicts[10]["warning"] == {"emitted": True, "key": f"r1:generic:read:{READ_HASH}", "bucket": 1}
    assert verdicts[10]["decision"] == "warn"


@pytest.mark.parametrize("run, key_prefix", [
    ("r1", "r1:"), (" r1 ", " r1 :"), ("\tR-7\n", "\tR-7\n:"), (None, ""), ("", ""),
], ids=["plain", "untrimmed", "tab-newline", "no-run", "empty-run"])
def test_dedupe_key_uses_raw_run_id(run, key_prefix):
    session = Session(ENABLED)
    verdict = session.repeat(11, run=run)[-1]
    assert verdict["warning"] == {"emitted": True, "key": f"{key_prefix}generic:read:{READ_HASH}", "bucket": 1}


def test_trimmed_run_ids_share_history_but_not_dedupe_buckets():
    session = Session(ENABLED)
    session.repeat(10, run=" r1 ")
    plain = session.call(run="r1")
    assert plain["detection"]["count"] == 10
    assert plain["warning"] == {"emitted": True, "key": f"r1:generic:read:{READ_HASH}", "bucket": 1}
    spaced = session.call(run=" r1 ")
    assert spaced["detection"]["count"] == 11
    assert spaced["warning"] == {"emitted": True, "key": f" r1 :generic:read:{READ_HASH}", "bucket": 1}


def test_poll_key_restarts_when_stalled_output_changes():
    session = Session(ENABLED)
    args = {"action": "poll", "sessionId": "s"}
    first = [session.call("process", args, text_result("stage 1")) for _ in range(12)]
    assert first[10]["warning"]["emitted"] is True and first[11]["warning"]["emitted"] is False
    second = [session.call("process", args, text_result("stage 2")) for _ in range(11)]
    assert second[0]["warning"]["emitted"] is False  # still judged on stage-1 streak (count 12)
    assert all(v["detection"] == NOT_STUCK for v in second[1:10])
    assert second[10]["detection"]["count"] == 10
    assert second[10]["warning"]["emitted"] is True and second[10]["warning"]["bucket"] == 1
    assert second[10]["warning"]["key"] != first[10]["warning"]["key"]
    assert len(session.state.warning_buckets) == 2


# ------------------------------------------------------------------ 256-key eviction (§6)


def test_store_warning_bucket_evicts_first_inserted_key():
    state = SessionState()
    for i in range(MAX_WARNING_KEYS):
        state.store_warning_bucket(f"k{i}", 1)
    state.store_warning_bucket("k0", 2)  # update: keeps its (first) position
    assert len(state.warning_buckets) == 256 and list(state.warning_buckets)[0] == "k0"
    state.store_warning_bucket("k1", 3)  # updating an existing key when full evicts nothing
    assert len(state.warning_buckets) == 256 and state.warning_buckets["k0"] == 2
    state.store_warning_bucket("k256", 1)
    assert "k0" not in state.warning_buckets
    assert len(state.warning_buckets) == 256
    assert list(state.warning_buckets)[:2] == ["k1", "k2"] and list(state.warning_buckets)[-1] == "k256"
    state.store_warning_bucket("k257", 1)
    assert "k1" not in state.warning_buckets and "k2" in state.warning_buckets


def test_engine_evicts_first_inserted_warning_key_after_256():
    session = Session({"enabled": True, "historySize": 100})

    def warn_path(path: str, calls: int) -> dict:
        verdict = None
        for i in range(calls):
            verdict = session.call(args={"path": path}, result=varying(i))
        return verdict

    assert warn_path("p0", 11)["warning"]["emitted"] is True
    assert warn_path("p1", 11)["warning"]["emitted"] is True
    assert warn_path("p0", 10)["warning"]["bucket"] == 2  # p0 updated; position unchanged
    for n in range(2, 257):
        assert warn_path(f"p{n}", 11)["warning"]["emitted"] is True
    keys = list(session.state.warning_buckets)
    assert len(keys) == 256
    h = args_hash("read", {"path": "p0"})
    assert f"r1:generic:read:{h}" not in session.state.warning_buckets  # first inserted, evicted
    assert keys[0] == f"r1:generic:read:{args_hash('read', {'path': 'p1'})}"
    # p0's bucket is forgotten: a count of 10 is emitted again; p2 (still stored) is not.
    assert warn_path("p0", 11)["warning"] == {"emitted": True, "key": f"r1:generic:read:{h}", "bucket": 1}
    assert warn_path("p2", 11)["warning"]["emitted"] is False


# ------------------------------------------------------------------ evidence refs


def test_evidence_lists_refs_of_records_behind_the_detection():
    session = Session(ENABLED)
    for i in range(1, 21):
        verdict = session.call(ref=f"e{i}" if i != 5 else None)
        if i <= 10:
            assert verdict["evidence"] == []
    assert verdict["evidence"] == [f"e{i}" for i in range(1, 20) if i != 5]  # warning: recent records
    blocked = session.call(ref="e21")
    assert blocked["evidence"] == [f"e{i}" for i in range(1, 21) if i != 5]  # critical: streak records


def test_evidence_of_deferred_outcomes():
    session = Session({"enabled": True, "warningThreshold": 2, "criticalThreshold": 3,
                       "globalCircuitBreakerThreshold": 4})
    session.call(ref=["call", 1], outcome_follows=True, call_id="a")
    session.result("a", ref=["result", 1])  # the call's ref stays on the record
    session.call(outcome_follows=True, call_id="b")
    session.result("b", ref=["result", 2])  # a record without ref takes the result's
    verdict = session.call(ref=["call", 3])
    assert verdict["detection"]["count"] == 2
    assert verdict["evidence"] == [["call", 1], ["result", 2]]


def test_evidence_is_independent_of_whether_warning_emitted():
    session = Session({"enabled": True, "warningThreshold": 2, "criticalThreshold": 9,
                       "globalCircuitBreakerThreshold": 10})
    session.call(ref=1, result=varying(1)), session.call(ref=2, result=varying(2))
    verdict = session.call(ref=3, result=varying(3))
    assert verdict["warning"]["emitted"] is False
    assert verdict["evidence"] == [1, 2]


# ------------------------------------------------------------------ scoping and enabled (§2.3, §8)


def test_detection_scoped_by_run():
    session = Session(ENABLED)
    session.repeat(10, run="r1")
    assert session.call(run="r2")["detection"] == NOT_STUCK
    assert session.call(run=None)["detection"] == NOT_STUCK
    assert session.call(run="r1")["detection"]["count"] == 10


def test_unscoped_calls_share_one_bucket():
    session = Session(ENABLED)
    session.repeat(5, run=None)
    session.repeat(5, run="")
    session.repeat(5, run="  ")
    verdict = session.call(run=None)
    assert verdict["detection"]["count"] == 15
    assert verdict["warning"]["key"] == f"generic:read:{READ_HASH}"


def test_history_cap_is_per_session_across_runs():
    session = Session({"enabled": True, "historySize": 10, "warningThreshold": 6, "criticalThreshold": 9,
                       "globalCircuitBreakerThreshold": 12})
    session.repeat(6, run="r1")
    session.repeat(5, run="r2", args={"path": "other"})
    assert len(session.state.history) == 10
    assert session.call(run="r1")["detection"] == NOT_STUCK  # r1 has only 5 records left


def test_keyless_call_skips_detection_but_feeds_history():
    session = Session(ENABLED)
    verdicts = session.repeat(15, session_key=None)
    assert all(v["detection"] == NOT_STUCK and v["recorded_call"] is False for v in verdicts)
    assert all(v["outcome"]["recorded"] is True for v in verdicts)
    assert [r.result_hash for r in session.state.history] == [SAME_RESULT_HASH] * 15
    assert session.call()["detection"]["count"] == 15  # a keyed call sees them


def test_call_without_session_key_or_id_is_rejected():
    # OpenClaw would record nothing for it; on a stream it is a producer bug (dead-lettered)
    session = Session(ENABLED)
    with pytest.raises(EventError, match=r"^an event needs a session_id \(or a session_key\)$"):
        session.call(session=None, session_key=None)
    assert session.state.history == []


@pytest.mark.parametrize("block, recorded_call", [({}, True), ({"enabled": False}, False)],
                         ids=["enabled-absent", "enabled-false"])
def test_detectors_off_unless_enabled_true(block, recorded_call):
    session = Session({**block, "warningThreshold": 2})
    verdicts = session.repeat(25)
    assert all(v["detection"] == NOT_STUCK and v["decision"] == "allow" for v in verdicts)
    assert all(v["recorded_call"] is recorded_call for v in verdicts)
    assert all(v["outcome"]["recorded"] is True for v in verdicts)  # outcomes still recorded
    assert [r.result_hash for r in session.state.history] == [SAME_RESULT_HASH] * 25


def test_history_trimmed_to_history_size():
    session = Session({"enabled": True, "historySize": 5})
    for i in range(8):
        session.call(ref=i)
    assert [r.ref for r in session.state.history] == [3, 4, 5, 6, 7]


# ------------------------------------------------------------------ deferred outcomes (§8.3)


def test_deferred_outcomes_attach_to_their_pending_records():
    session = Session(ENABLED)
    first = session.call(outcome_follows=True, call_id="a")
    second = session.call(outcome_follows=True, call_id="b")
    assert first["outcome"] == second["outcome"] == {"deferred": True}
    assert [r.result_hash for r in session.state.history] == [None, None]
    result_b = session.result("b", text_result("B"))
    assert result_b["verdict"] == "allow" and result_b["tool_name"] == "read" and result_b["args_hash"] == READ_HASH
    assert result_b["outcome"] == {"recorded": True, "result_hash": sha('{"details":{},"text":"B"}'),
                                   "unknown_tool_name": None}
    assert [r.result_hash for r in session.state.history] == [None, sha('{"details":{},"text":"B"}')]
    session.result("a", text_result("A"))
    assert [r.result_hash for r in session.state.history] == [sha('{"details":{},"text":"A"}'),
                                                              sha('{"details":{},"text":"B"}')]
    assert len(session.state.history) == 2


def test_deferred_outcome_with_evicted_record_is_appended():
    session = Session({"enabled": True, "historySize": 2})
    session.call(outcome_follows=True, call_id="early")
    session.call("list", {}, call_id="x"), session.call("list", {"d": 1}, call_id="y")
    session.result("early")
    assert [(r.tool, r.call_id, r.result_hash) for r in session.state.history] == [
        ("list", None, SAME_RESULT_HASH), ("read", None, SAME_RESULT_HASH)]


def test_result_for_unknown_call_is_recorded():
    """Spec §9: no pending call -> recorded as OpenClaw records it, as tool ``tool`` with undefined args."""
    session = Session(ENABLED)
    assert session.result("never-seen") == {
        "type": "tool_result", "tool_name": "tool", "args_hash": "tool:" + sha("undefined"),
        "outcome": {"recorded": True, "result_hash": SAME_RESULT_HASH, "unknown_tool_name": None},
        "guard": {"enabled": True, "armed": False, "observed": False, "remaining": 0, "abort": False},
        "run_aborted": False, "verdict": "allow", "evidence": [], "decided_by": None}
    assert [(r.tool, r.args_hash, r.call_id, r.result_hash) for r in session.state.history] == [
        ("tool", "tool:" + sha("undefined"), "never-seen", SAME_RESULT_HASH)]


# ------------------------------------------------------------------ malformed events


@pytest.mark.parametrize("event, message", [
    ([1, 2], "an event must be an object, got list"),
    ({"type": "tool_use"}, "type must be one of tool_call, tool_result, compaction_retry, got 'tool_use'"),
    ({}, "type must be one of tool_call, tool_result, compaction_retry, got None"),
    (tool_call(run=5), "run_id must be a string or null, got int"),
    (tool_call(call_id=["x"]), "tool_call_id must be a string or null, got list"),
    (tool_call(agent_id=7), "agent_id must be a string or null, got int"),
    ({"type": "tool_result", "run_id": "r1", "session_id": "s1", "tool_call_id": 3},
     "tool_call_id must be a string or null, got int"),
    ({"type": "compaction_retry", "run_id": "r1", "session_key": ""}, "an event needs a session_id (or a session_key)"),
    ({"type": "compaction_retry", "run_id": 1.5, "session_id": "s1"}, "run_id must be a string or null, got float"),
    ({"type": "tool_call"}, "an event needs a session_id (or a session_key)"),
    (tool_call(tool=42), "tool_name must be a string or null, got int"),
    ({**tool_call(), "outcome_follows": "yes"}, "outcome_follows must be true or false, got str"),
    ({**tool_call(), "ts": "yesterday"}, "ts must be epoch milliseconds (a number), got str"),
    ({**tool_call(), "event_id": 5}, "event_id must be a string or null, got int"),
], ids=["not-mapping", "unknown-type", "no-type", "run-id-int", "call-id-list", "agent-id-int",
        "result-call-id-int", "compaction-without-session", "compaction-run-id-float", "no-session",
        "tool-name-int", "outcome-follows-str", "ts-str", "event-id-int"])
def test_malformed_events_raise_and_leave_state_unchanged(event, message):
    session = Session(ENABLED)
    session.repeat(3)
    before = session.state.to_bytes()
    with pytest.raises(EventError, match="^" + re.escape(message) + "$"):
        session.engine.process(event, session.state)
    assert session.state.to_bytes() == before


def test_event_error_is_a_value_error():
    assert issubclass(EventError, ValueError)


def test_digest_of_varying_results_are_distinct():
    assert len({digest({"details": {}, "text": f"version {i}"}) for i in range(32)}) == 32
