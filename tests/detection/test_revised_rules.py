"""The nine rules of the spec's revision of 2026-12-03 (R1-R9), one small hand-made scenario each.

Every expected value below is worked out from the spec section the test names, not taken from a
run of the engine. The scenarios go through :class:`SessionStore`, the offline store that follows
OpenClaw's session lookup (Spec §8.1) and keeps guards and blocked calls beside the sessions.
"""

from __future__ import annotations

from typing import Any

from streams.detection import Engine, OpenClawConfig, SessionStore
from streams.detection.config import ConfigError, resolve, validate

from ._support import READ_ARGS, READ_HASH, SAME_RESULT, SAME_RESULT_HASH, compaction, sha, text_result, tool_call, \
    tool_result

NOT_RECORDED = {"recorded": False, "result_hash": None, "unknown_tool_name": None}
TWO_POW_53 = 9007199254740992


def store_for(block: dict[str, Any] | None = None, **raw: Any) -> SessionStore:
    if block is not None:
        raw["tools"] = {"loopDetection": block}
    return SessionStore(Engine(OpenClawConfig(raw)))


# ------------------------------------------------------------------------------------------ R1, §2.2

def test_r1_config_integers_beyond_2_pow_53_are_doubles():
    """§2.2 step 1: 9007199254740993 is the double 9007199254740992; steps 2-3 add 1 with a double's rounding."""
    settings = resolve({"warningThreshold": 9007199254740993, "criticalThreshold": TWO_POW_53})
    # both are 2^53 as doubles: critical <= warning, so critical := 2^53 + 1, which is 2^53 again;
    # global 30 <= critical, so global := critical + 1 = 2^53 as well
    assert (settings.warning_threshold, settings.critical_threshold,
            settings.global_circuit_breaker_threshold) == (TWO_POW_53, TWO_POW_53, TWO_POW_53)
    # the guard's window counts down in doubles: 9007199254740995 is the double ...996 (ties to even),
    # and ...996 - 1 = ...995 rounds back to ...996
    store = store_for({"postCompactionGuard": {"windowSize": 9007199254740995}})
    armed = store.process(compaction())
    assert armed["guard"]["window_size"] == 9007199254740996 and armed["guard"]["remaining"] == 9007199254740996
    observed = store.process(tool_call())
    assert observed["guard"]["observed"] is True and observed["guard"]["remaining"] == 9007199254740996
    store = store_for({"postCompactionGuard": {"windowSize": 9007199254740993}})
    assert store.process(compaction())["guard"]["remaining"] == TWO_POW_53
    assert store.process(tool_call())["guard"]["remaining"] == TWO_POW_53 - 1  # exact below 2^53


def test_r1_load_time_validation_compares_doubles():
    """§2.1 with §2.2: 2^53 and 2^53 + 1 are the same double, so warning < critical fails."""
    try:
        validate({"tools": {"loopDetection": {"warningThreshold": TWO_POW_53, "criticalThreshold": TWO_POW_53 + 1}}})
    except ConfigError as exc:
        assert exc.issues == [("tools.loopDetection.criticalThreshold",
                               "tools.loopDetection.warningThreshold must be lower than criticalThreshold.")]
    else:
        raise AssertionError("2^53 < 2^53 + 1 holds for Python integers, not for JavaScript doubles")


# ------------------------------------------------------------------------------------------ R2, §2.4

def test_r2_array_entry_is_a_candidate_and_normalises_to_main():
    """§2.4: an array entry is an object in JavaScript; with no id it is ``main``, with no tools no block."""
    raw_list = [[], {"id": "main", "tools": {"loopDetection": {"enabled": False}}}]
    store = store_for({"enabled": True}, agents={"list": raw_list})
    # the array entry is the first "main": G alone applies, calls are recorded (enabled true)
    assert store.process(tool_call(agent_id="main"))["recorded_call"] is True


def test_r2_entry_without_id_and_blank_event_agent_id_mean_main():
    """§2.4: a missing, null or blank entry id normalises to ``main``; an event's ``" "`` looks up ``main``,
    an event's ``""`` or null does no lookup."""
    for entry in ({"tools": {"loopDetection": {"enabled": False}}},
                  {"id": None, "tools": {"loopDetection": {"enabled": False}}},
                  {"id": "  ", "tools": {"loopDetection": {"enabled": False}}}):
        config = OpenClawConfig({"tools": {"loopDetection": {"enabled": True}},
                                 "agents": {"list": [None, "main", 7, entry]}})
        assert config.for_agent(" ").enabled is False  # blank id: looked up as main
        assert config.for_agent("MAIN").enabled is False
        assert config.for_agent("").enabled is True  # no lookup: G
        assert config.for_agent(None).enabled is True
        assert config.for_agent("ops").enabled is True  # no entry for ops: G


# ------------------------------------------------------------------------------------------ R3, §4.4

def test_r3_unknown_tool_patterns_use_javascript_whitespace():
    """§4.4: U+FEFF is whitespace, U+0085 and U+001C-U+001F are not (JavaScript's \\s, not Python's)."""
    store = store_for()
    cases = {
        "Unknown tool:\ufeffweather": "weather",
        "unknown tool:\u0085weather": None,  # ':' then U+0085, which starts no name
        "tool\u001cweather not found": None,
        "tool\u00a0weather\ufeffis not available": "weather",
        "Tool weather\u001fnot found": None,
    }
    for index, (message, name) in enumerate(cases.items()):
        verdict = store.process(tool_call("exec", {"n": index}, None, message, call_id=f"c{index}"))
        assert verdict["outcome"]["unknown_tool_name"] == name, message
        assert verdict["outcome"]["result_hash"] == "error:" + sha('"' + message.replace("\u001c", "\\u001c")
                                                                     .replace("\u001f", "\\u001f") + '"')


# ------------------------------------------------------------------------------------------ R4, §8.1

def test_r4_empty_session_key_is_a_key():
    """§8.1: ``session_key: ""`` stores the state under ``""``; the event is keyless otherwise."""
    store = store_for({"enabled": True, "warningThreshold": 3, "criticalThreshold": 8,
                       "globalCircuitBreakerThreshold": 9})
    for i in range(3):
        verdict = store.process(tool_call(call_id=f"a{i}", session="s1", session_key=""))
        assert verdict["recorded_call"] is False and verdict["detection"] == {"stuck": False}  # keyless
        assert verdict["outcome"] == {"recorded": True, "result_hash": SAME_RESULT_HASH, "unknown_tool_name": None}
    assert list(store.states) == [""]
    # a second session with session_key "": the state under "" remembers s1, so s2 finds nothing by its
    # session id and uses the state under "" (direct): one history for both
    store.process(tool_call(call_id="b0", session="s2", session_key=""))
    assert len(store.states[""].history) == 4
    # s2 with its own key: nothing under "s2"; the state remembering s2 (under "") moves there
    verdict = store.process(tool_call(call_id="b1", session="s2"))
    assert list(store.states) == ["s2"]
    assert verdict["detection"]["detector"] == "generic_repeat" and verdict["detection"]["count"] == 4


# ------------------------------------------------------------------------------------------ R5, §9

def test_r5_result_is_recorded_in_its_calls_run():
    """§9: a result answering a pending call is its call's: run id, guard (and tool, args), whatever run it carries."""
    store = store_for({"postCompactionGuard": {"windowSize": 1}})
    store.process(compaction(run="r1"))
    assert store.process(tool_call(call_id="c1", run="r1", outcome_follows=True, result=None))["outcome"] == {
        "deferred": True}
    verdict = store.process(tool_result("c1", run="r2"))
    # r1's guard observes it: windowSize 1, so the first outcome after the compaction aborts r1
    assert verdict["tool_name"] == "read" and verdict["args_hash"] == READ_HASH
    assert verdict["guard"]["abort"] is True and verdict["guard"]["detector"] == "compaction_loop_persisted"
    assert verdict["run_aborted"] is True
    (record,) = store.states["s1"].history
    assert (record.run_id, record.result_hash) == ("r1", SAME_RESULT_HASH)
    assert store.process(tool_call(call_id="c2", run="r2"))["run_aborted"] is False
    assert store.process(tool_call(call_id="c3", run="r1"))["run_aborted"] is True


# ------------------------------------------------------------------------------------------ R6, §9

BLOCKING = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3, "globalCircuitBreakerThreshold": 4}


def _blocked_deferred_call(store: SessionStore, call_id: str, run: Any = "r1", session: str = "s1") -> None:
    for i in range(3):
        store.process(tool_call(call_id=f"{call_id}-repeat{i}", run=run, session=session))
    verdict = store.process(tool_call(call_id=call_id, run=run, session=session, outcome_follows=True, result=None))
    assert verdict["decision"] == "block"


def test_r6_blocked_calls_are_remembered_by_run_and_call_id():
    """§9: key = run id as sent + call id; a result is ignored when its run and call id give that key,
    in whatever session; once; a result with another run id is a result with no pending call."""
    store = store_for(BLOCKING)
    _blocked_deferred_call(store, "c9")
    other_run = store.process(tool_result("c9", text_result("x"), run="r2", session="s1"))
    assert "ignored" not in other_run and other_run["outcome"]["recorded"] is True
    ignored = store.process(tool_result("c9", text_result("x"), run="r1", session="elsewhere"))
    assert ignored["verdict"] == "ignore" and "outcome" not in ignored
    again = store.process(tool_result("c9", text_result("x"), run="r1", session="s1"))  # the entry is used up
    assert "ignored" not in again and again["outcome"]["recorded"] is True


def test_r6_blank_run_id_keys_by_call_id_alone():
    """§9: for a blank run id the key is the call id alone, so "  " and null meet; " r1" and "r1" do not."""
    store = store_for(BLOCKING)
    _blocked_deferred_call(store, "c1", run="  ")
    assert store.process(tool_result("c1", run=None, session="s9"))["verdict"] == "ignore"
    _blocked_deferred_call(store, "c2", run=" r1", session="s2")
    assert store.process(tool_result("c2", run="r1", session="s2"))["verdict"] != "ignore"
    assert store.process(tool_result("c2", run=" r1", session="s2"))["verdict"] == "ignore"


# ------------------------------------------------------------------------------------------ R7, §8.1

def test_r7_result_without_session_id_or_key_has_no_effect():
    """§8.1: no state read or created, outcome not recorded, no guard observation, answered as a result."""
    store = store_for({"postCompactionGuard": {"windowSize": 1}})
    store.process(compaction(run="r1"))
    store.process(tool_call(call_id="c1", run="r1", outcome_follows=True, result=None))
    verdict = store.process(tool_result("c1", session=None, run="r1", tool_name="read", args=READ_ARGS))
    assert verdict["outcome"] == NOT_RECORDED and verdict["verdict"] == "allow"
    assert verdict["tool_name"] == "read" and verdict["args_hash"] == READ_HASH
    assert verdict["guard"] == {"enabled": True, "armed": True, "observed": False, "remaining": 1, "abort": False}
    assert list(store.states) == ["s1"] and list(store.states["s1"].calls) == ["c1"]  # still pending
    # the result that carries the session is recorded for the pending call
    assert store.process(tool_result("c1", run="r1"))["guard"]["abort"] is True


# ------------------------------------------------------------------------------------------ R8, §9

def test_r8_result_without_tool_call_id_attaches_by_run_tool_and_args():
    """§9: a null ``tool_call_id`` is valid; the outcome attaches to the newest pending record with the
    same run, tool and args hash whatever its call id, and never matches a blocked call."""
    store = store_for({"enabled": True})
    for call_id in ("c1", "c2"):
        store.process(tool_call(call_id=call_id, outcome_follows=True, result=None))
    verdict = store.process(tool_result(None, tool_name="read", args=READ_ARGS))
    assert verdict["outcome"] == {"recorded": True, "result_hash": SAME_RESULT_HASH, "unknown_tool_name": None}
    first, second = store.states["s1"].history
    assert (first.call_id, first.result_hash) == ("c1", None)  # still pending
    assert second.result_hash == SAME_RESULT_HASH  # the newest pending one
    # with no record to attach to (other args): appended with no call id
    store.process(tool_result(None, text_result("y"), tool_name="read", args={"path": "/other"}))
    assert store.states["s1"].history[-1].call_id is None and store.states["s1"].history[-1].result_hash


def test_r8_result_without_tool_call_id_is_never_ignored():
    store = store_for(BLOCKING)
    _blocked_deferred_call(store, "c1")
    assert store.process(tool_result(None, run="r1"))["outcome"]["recorded"] is True


# ------------------------------------------------------------------------------------------ R9, §8.1

def test_r9_merge_does_not_trim_the_next_record_does():
    """§8.1: a merge concatenates without trimming; detection before the next record sees the longer
    history; the next recorded call or outcome trims to ``historySize``."""
    store = store_for({"enabled": True, "historySize": 3, "warningThreshold": 2, "criticalThreshold": 4,
                       "globalCircuitBreakerThreshold": 5})
    for session, key in (("S1", "K1"), ("S2", "K2")):
        for i in range(3):
            store.process(tool_call(call_id=f"{key}-{i}", session=session, session_key=key))
    # K2's state is direct, K1's remembers S1: merged into K2, 6 records
    verdict = store.process(tool_call(call_id="m", session="S1", session_key="K2"))
    assert list(store.states) == ["K2"] and len(store.states["K2"].history) == 6
    # six identical outcomes: the global breaker (5) fires before generic_repeat (rule 2 before rule 7)
    assert verdict["detection"]["detector"] == "global_circuit_breaker" and verdict["detection"]["count"] == 6
    assert len(store.states["K2"].history) == 6  # the blocked call recorded nothing, so nothing trimmed
    store.process(tool_call("exec", {"command": "ls"}, text_result("ok"), call_id="n", session="S1", session_key="K2"))
    assert len(store.states["K2"].history) == 3


def test_r9_an_attached_outcome_trims_too():
    store = store_for({"enabled": True, "historySize": 3})
    for session, key in (("S1", "K1"), ("S2", "K2")):
        for i in range(2):
            store.process(tool_call(call_id=f"{key}-{i}", session=session, session_key=key))
    store.process(tool_call(call_id="p", session="S2", session_key="K2", outcome_follows=True, result=None))
    # K2 holds 3 (trimmed on insertion); this result's lookup merges K1 (2 records) into K2: 5
    store.process(tool_result("p", session="S1", session_key="K2", result=SAME_RESULT, run="r1"))
    history = store.states["K2"].history
    assert len(history) == 3 and all(record.result_hash == SAME_RESULT_HASH for record in history)
