"""`enabled` truthiness (Spec §2.3) and ping-pong with a blank paired tool name (Spec §5.1), through the engine."""

import pytest

from ._support import READ_HASH, SAME_RESULT_HASH, Session, sha

GENERIC_WARNING_10 = ("WARNING: You have called read 10 times with identical arguments. "
                      "If this is not making progress, stop retrying and report the task as failed.")


@pytest.mark.parametrize("value", [1, "true", "false", [], {}], ids=["one", "string-true", "string-false", "array",
                                                                      "object"])
def test_a_truthy_enabled_turns_the_detectors_on(value):
    session = Session({"enabled": value})
    verdicts = session.repeat(11)
    assert [v["decision"] for v in verdicts] == ["allow"] * 10 + ["warn"]
    assert verdicts[-1]["detection"] == {
        "stuck": True, "level": "warning", "detector": "generic_repeat", "count": 10, "message": GENERIC_WARNING_10,
        "warning_key": f"generic:read:{READ_HASH}"}
    assert verdicts[-1]["warning"] == {"emitted": True, "key": f"r1:generic:read:{READ_HASH}", "bucket": 1}


@pytest.mark.parametrize("value", [0, "", float("nan"), None], ids=["zero", "empty-string", "nan", "null"])
def test_a_falsy_enabled_other_than_false_keeps_the_guard_and_recording(value):
    session = Session({"enabled": value})
    verdicts = session.repeat(25)
    assert all(v["detection"] == {"stuck": False} and v["recorded_call"] is True for v in verdicts)
    assert len(session.state.history) == 25
    assert session.compact()["guard"] == {"enabled": True, "window_size": 3, "armed": True, "remaining": 3}
    after = session.repeat(3)
    assert [v["verdict"] for v in after] == ["allow", "allow", "abort"]
    assert after[-1]["guard"]["detector"] == "compaction_loop_persisted" and after[-1]["run_aborted"] is True


def test_only_exactly_false_turns_off_guard_and_recording():
    session = Session({"enabled": False})
    verdicts = session.repeat(3)
    assert [v["recorded_call"] for v in verdicts] == [False] * 3
    assert all(v["outcome"] == {"recorded": True, "result_hash": SAME_RESULT_HASH, "unknown_tool_name": None}
               for v in verdicts)  # outcomes are still recorded: harmless
    assert session.compact()["guard"] == {"enabled": False, "window_size": 3, "armed": False, "remaining": 0}
    assert [v["verdict"] for v in session.repeat(3)] == ["allow"] * 3


def test_an_agent_block_overlays_enabled_with_its_own_truthiness():
    raw = {"tools": {"loopDetection": {"enabled": True}},
           "agents": {"list": [{"id": "quiet", "tools": {"loopDetection": {"enabled": 0}}}]}}
    session = Session(raw=raw)
    verdicts = session.repeat(11, agent_id="quiet")
    assert all(v["detection"] == {"stuck": False} for v in verdicts)  # 0 wins the overlay and is falsy
    assert session.compact(agent_id="quiet")["guard"]["enabled"] is True


# ------------------------------------------------------------------ Spec §5.1 blank paired tool name

PING_PONG = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 10}
BLANK_ARGS_HASH = ":" + sha('{"x":1}')  # a whitespace-only tool name normalises to ""
PAIR_ARGS_HASH = "read:" + sha('{"p":1}')


def _alternate(first_tool: str, calls: int) -> list[dict]:
    session = Session(PING_PONG)
    out = []
    for i in range(calls):
        if i % 2 == 0:
            out.append(session.call(first_tool, {"x": 1}, {"ok": i}))
        else:
            out.append(session.call("read", {"p": 1}, {"ok": i}))
    return out


def test_ping_pong_stops_when_the_other_side_has_a_blank_tool_name():
    verdicts = _alternate("   ", 6)
    assert [v["tool_name"] for v in verdicts[:2]] == ["", "read"]
    assert verdicts[0]["args_hash"] == BLANK_ARGS_HASH
    # The blank-named calls continue an alternation whose other side (`other`) is blank: no pattern.
    assert [verdicts[i]["detection"] for i in (0, 2, 4)] == [{"stuck": False}] * 3
    # The read calls: `last` is blank-named, which does not stop it; paired_tool_name is "".
    assert verdicts[3]["detection"] == {
        "stuck": True, "level": "warning", "detector": "ping_pong", "count": 4,
        "message": "WARNING: You are alternating between repeated tool-call patterns (4 consecutive calls). "
                   "This looks like a ping-pong loop; stop retrying and report the task as failed.",
        "warning_key": "pingpong:" + "|".join(sorted([BLANK_ARGS_HASH, PAIR_ARGS_HASH])),
        "paired_tool_name": ""}
    assert verdicts[5]["detection"]["count"] == 6


def test_ping_pong_with_named_tools_on_both_sides_for_comparison():
    verdicts = _alternate("write", 6)
    assert [v["detection"].get("count") for v in verdicts] == [None, None, 3, 4, 5, 6]
    assert verdicts[2]["detection"]["paired_tool_name"] == "read"
