"""Edge cases around the rules of the spec's revision of 2026-12-03 (R1-R9), written by hand.

Companion of ``test_revised_rules.py``: the corners of each rule (limits, blank and empty values,
the order in which two rules apply). Every expected value is derived from the spec section named
in the test's docstring.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams.detection import Engine, OpenClawConfig, SessionStore
from streams.detection.config import resolve
from streams.detection.fingerprint import unknown_tool_name

from ._support import READ_ARGS, READ_HASH, SAME_RESULT_HASH, compaction, text_result, tool_call, tool_result

NOT_RECORDED = {"recorded": False, "result_hash": None, "unknown_tool_name": None}
TWO_POW_53 = 2 ** 53
BLOCKING = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3, "globalCircuitBreakerThreshold": 4}


def store_for(block: dict[str, Any] | None = None, **raw: Any) -> SessionStore:
    if block is not None:
        raw["tools"] = {"loopDetection": block}
    return SessionStore(Engine(OpenClawConfig(raw)))


def blocked_deferred(store: SessionStore, call_id: str | None, run: Any = "r1", session: str = "s1") -> None:
    """Three identical outcomes, then a deferred call of the same: blocked by generic_repeat (critical 3)."""
    for i in range(3):
        store.process(tool_call(call_id=f"{call_id}-r{i}", run=run, session=session))
    verdict = store.process(tool_call(call_id=call_id, run=run, session=session, outcome_follows=True, result=None))
    assert verdict["decision"] == "block"


# ------------------------------------------------------------------------------------------ R1, §2.2

@pytest.mark.parametrize("block, expected", [
    # an integer beyond the largest double is JavaScript's Infinity: not an integer, the default
    ({"historySize": 10 ** 400}, ("history_size", 30)),
    ({"warningThreshold": -(10 ** 400)}, ("warning_threshold", 10)),
    # 1e300 is a double holding an integer: used as it is
    ({"historySize": 1e300}, ("history_size", int(1e300))),
    # 2^53 + 2 is a double; critical := 2^53 + 3, which rounds (ties to even) to 2^53 + 4, and
    # global := 2^53 + 5, which rounds to 2^53 + 4 again
    ({"warningThreshold": TWO_POW_53 + 2}, ("critical_threshold", TWO_POW_53 + 4)),
    ({"warningThreshold": TWO_POW_53 + 2}, ("global_circuit_breaker_threshold", TWO_POW_53 + 4)),
    # below 2^53 the clamps are exact
    ({"warningThreshold": TWO_POW_53 - 2}, ("global_circuit_breaker_threshold", TWO_POW_53)),
])
def test_r1_doubles_at_the_edges(block, expected):
    name, value = expected
    assert getattr(resolve(block), name) == value


def test_r1_a_window_of_2_pow_53_plus_1_counts_down_from_2_pow_53():
    store = store_for({"postCompactionGuard": {"windowSize": TWO_POW_53 + 1}})
    assert store.process(compaction())["guard"]["window_size"] == TWO_POW_53
    remaining = [store.process(tool_call(call_id=f"c{i}"))["guard"]["remaining"] for i in range(2)]
    assert remaining == [TWO_POW_53 - 1, TWO_POW_53 - 2]


# ------------------------------------------------------------------------------------------ R2, §2.4

def test_r2_an_array_entry_hides_a_later_main_but_not_other_ids():
    config = OpenClawConfig({"tools": {"loopDetection": {"enabled": True, "historySize": 9}},
                             "agents": {"list": [["x"], {"id": "main", "tools": {"loopDetection": {"historySize": 4}}},
                                                 {"id": " Ops ", "tools": {"loopDetection": {"historySize": 5}}}]}})
    assert config.for_agent("main").history_size == 9  # the array entry: G alone
    assert config.for_agent("OPS").history_size == 5  # " Ops " normalises to ops
    assert config.agents_with_blocks == [" Ops "]  # the first "main" has no block


def test_r2_agents_list_that_is_not_an_array_has_no_candidates():
    config = OpenClawConfig({"tools": {"loopDetection": {"historySize": 9}},
                             "agents": {"list": {"0": {"id": "main", "tools": {"loopDetection": {"historySize": 4}}}}}})
    assert config.for_agent("main").history_size == 9


def test_r2_an_entry_normalising_to_main_overlays_only_for_main_and_blank_ids():
    block = {"postCompactionGuard": {"windowSize": 1}}
    store = store_for({"enabled": True}, agents={"list": [{"id": "", "tools": {"loopDetection": block}}]})
    # "Main!" is no valid id: lower-cased, "!" becomes "-", the trailing "-" is stripped: "main"
    assert store.process(compaction(run="a", agent_id="Main!"))["guard"]["window_size"] == 1
    assert store.process(compaction(run="b", agent_id="\t"))["guard"]["window_size"] == 1  # blank: main
    assert store.process(compaction(run="c", agent_id=""))["guard"]["window_size"] == 3  # no lookup
    assert store.process(compaction(run="d", agent_id="main-2"))["guard"]["window_size"] == 3


# ------------------------------------------------------------------------------------------ R3, §4.4

@pytest.mark.parametrize("message, name", [
    ("unknown tool\u001c: foo", None),  # U+001C is no separator after the words
    ("unknown tool\u3000\u2028'Foo'", "foo"),  # ideographic space, line separator
    ("tool 'x' \u0085not found", None),
    ("tool\u2007x\u202fis not available", "x"),
    ("\ufeff\ufeff", None),  # trimmed to nothing
    ("\u0085", None),  # not trimmed, matches nothing
])
def test_r3_whitespace_of_both_patterns(message, name):
    assert unknown_tool_name(message) == name


# ------------------------------------------------------------------------------------------ R4, §8.1

def test_r4_an_empty_key_never_moves_a_state_found_by_session_id():
    store = store_for({"enabled": True})
    store.process(tool_call(call_id="a", session="s1"))
    verdict = store.process(tool_call(call_id="b", session="s1", session_key=""))
    assert list(store.states) == ["s1"] and len(store.states["s1"].history) == 2  # used where it is
    assert verdict["recorded_call"] is False and verdict["outcome"]["recorded"] is True


def test_r4_empty_key_guard_is_shared_by_blank_runs_of_every_session():
    """§7: a blank run id with ``session_key: ""`` is the guard ``""``, in any session."""
    store = store_for({"enabled": True})
    store.process(compaction(run=None, session="s1", session_key=""))
    verdict = store.process(tool_call(call_id="c", run="  ", session="s2", session_key=""))
    assert verdict["guard"] == {"enabled": True, "armed": True, "observed": True, "remaining": 2, "abort": False}


def test_r4_an_empty_key_without_session_id_is_no_session():
    store = store_for({"enabled": True})
    verdict = store.process(tool_result("c", session=None, session_key=""))
    assert verdict["outcome"] == NOT_RECORDED and len(store) == 0


# ------------------------------------------------------------------------------------------ R5, §9

def test_r5_the_calls_agent_config_trims_at_the_result():
    """§9 and §8.2: the outcome of a pending call is recorded with its call's config (historySize 1)."""
    store = store_for({"enabled": True}, agents={"list": [{"id": "tiny", "tools": {"loopDetection": {"historySize": 1}}}]})
    store.process(tool_call(call_id="p", agent_id="tiny", outcome_follows=True, result=None))
    for call_id in ("a", "b"):
        store.process(tool_call("exec", {"command": call_id}, text_result(call_id), call_id=call_id))
    assert len(store.states["s1"].history) == 3
    store.process(tool_result("p"))  # no agent on the result: the call's "tiny" decides
    (only,) = store.states["s1"].history
    assert only.tool == "exec" and only.call_id is None  # b: the oldest two were dropped


def test_r5_the_results_own_run_guard_does_not_observe():
    store = store_for({"postCompactionGuard": {"windowSize": 2}})
    store.process(compaction(run="r2"))
    store.process(tool_call(call_id="p", run="r1", outcome_follows=True, result=None))
    verdict = store.process(tool_result("p", run="r2"))
    assert verdict["guard"] == {"enabled": True, "armed": False, "observed": False, "remaining": 0, "abort": False}
    assert store.process(tool_call(call_id="q", run="r2"))["guard"]["remaining"] == 1  # r2's window untouched
    assert store.states["s1"].history[0].run_id == "r1"


def test_r5_a_result_with_a_blank_run_id_is_its_calls():
    store = store_for({"enabled": True})
    store.process(tool_call(call_id="p", run=" r1 ", outcome_follows=True, result=None))
    verdict = store.process(tool_result("p", run=None))
    assert verdict["outcome"]["result_hash"] == SAME_RESULT_HASH
    assert store.states["s1"].history[0].run_id == "r1"  # trimmed, as the call stored it


# ------------------------------------------------------------------------------------------ R6, §9

def test_r6_an_inline_blocked_call_is_not_remembered():
    store = store_for(BLOCKING)
    for i in range(3):
        store.process(tool_call(call_id=f"r{i}"))
    assert store.process(tool_call(call_id="inline"))["decision"] == "block"
    assert store.process(tool_result("inline"))["verdict"] != "ignore"


def test_r6_a_blocked_call_without_id_is_not_remembered():
    store = store_for(BLOCKING)
    blocked_deferred(store, None)
    assert store.process(tool_result(None))["outcome"]["recorded"] is True
    assert store.blocked == {}


def test_r6_a_result_without_session_is_ignored_too():
    """A result of a blocked call is ignored even without a session (its key needs none)."""
    store = store_for(BLOCKING)
    blocked_deferred(store, "c1")
    verdict = store.process(tool_result("c1", session=None))
    assert verdict["verdict"] == "ignore" and verdict["tool_name"] == "tool"  # the event's (absent) tool name


def test_r6_a_pending_call_of_the_results_session_comes_first():
    """§9: a result answers its session's pending call of that id; the blocked entry stays for the next."""
    store = store_for(BLOCKING)
    blocked_deferred(store, "c1", session="A")
    store.process(tool_call(call_id="c1", session="B", outcome_follows=True, result=None))  # nothing to detect in B
    answered = store.process(tool_result("c1", session="B"))
    assert answered["outcome"]["recorded"] is True and answered["tool_name"] == "read"
    assert list(store.blocked) == ["r1:c1"]
    assert store.process(tool_result("c1", session="B"))["verdict"] == "ignore"
    assert store.blocked == {}


def test_r6_a_blocked_deferred_call_leaves_no_pending_entry():
    store = store_for(BLOCKING)
    blocked_deferred(store, "c1")
    assert store.states["s1"].calls == {} and list(store.blocked) == ["r1:c1"]


# ------------------------------------------------------------------------------------------ R7, §8.1

def test_r7_blank_run_and_no_session_gets_a_fresh_guard():
    store = store_for({"enabled": True, "postCompactionGuard": {"windowSize": 2}})
    store.process(compaction(run=None, session="s1"))
    verdict = store.process(tool_result("c", run=None, session=None, session_key=None))
    assert verdict["guard"] == {"enabled": True, "armed": False, "observed": False, "remaining": 0, "abort": False}
    assert verdict["outcome"] == NOT_RECORDED and len(store) == 0


def test_r7_the_run_id_alone_names_the_runs_guard():
    store = store_for({"postCompactionGuard": {"windowSize": 2}})
    store.process(compaction(run="r9", session="elsewhere"))
    verdict = store.process(tool_result("c", run="r9", session=None))
    assert verdict["guard"]["armed"] is True and verdict["guard"]["remaining"] == 2 and not verdict["guard"]["observed"]


# ------------------------------------------------------------------------------------------ R8, §9

def test_r8_empty_and_absent_call_ids_are_no_call_id():
    store = store_for({"enabled": True})
    store.process(tool_call(call_id="c1", outcome_follows=True, result=None))
    event = tool_result("", tool_name="read", args=READ_ARGS)
    assert store.process(event)["outcome"]["recorded"] is True
    assert store.states["s1"].history[0].result_hash == SAME_RESULT_HASH  # attached to c1's record
    absent = {k: v for k, v in tool_result("x", text_result("z")).items() if k != "tool_call_id"}
    store.process(absent)
    assert store.states["s1"].history[-1].call_id is None  # appended as tool "tool" with no call id
    assert store.states["s1"].history[-1].tool == "tool"


def test_r8_attaches_within_its_run_only():
    store = store_for({"enabled": True})
    store.process(tool_call(call_id="a", run="r1", outcome_follows=True, result=None))
    store.process(tool_call(call_id="b", run="r2", outcome_follows=True, result=None))
    store.process(tool_result(None, run="r1", tool_name="read", args=READ_ARGS))
    first, second = store.states["s1"].history
    assert first.result_hash == SAME_RESULT_HASH and second.result_hash is None
    assert first.args_hash == READ_HASH


# ------------------------------------------------------------------------------------------ R9, §8.1

def test_r9_the_next_call_trims_with_its_own_agents_size():
    store = store_for({"enabled": True, "historySize": 4},
                      agents={"list": [{"id": "small", "tools": {"loopDetection": {"historySize": 2}}}]})
    for session, key in (("S1", "K1"), ("S2", "K2")):
        for i in range(3):
            store.process(tool_call("exec", {"n": i}, text_result("x"), call_id=f"{key}{i}", session=session,
                                    session_key=key))
    store.process(tool_result("none", text_result("y"), session="S1", session_key="K2", tool_name="ls"))
    # merged (3 + 3), then the appended outcome trims to the event's (global) 4
    assert len(store.states["K2"].history) == 4
    store.process(tool_call("exec", {"n": 9}, text_result("x"), call_id="k", session="S1", session_key="K2",
                            agent_id="small"))
    assert len(store.states["K2"].history) == 2
