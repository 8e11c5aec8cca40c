"""The offline store's session-state lookup (Spec §8.1) and guard identity (Spec §7)."""

from streams.detection import Engine, OpenClawConfig, SessionStore

from tests.detection._support import READ_HASH, SAME_RESULT_HASH, compaction, text_result, tool_call, tool_result

ENABLED = OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}})
RECORDED = {"recorded": True, "result_hash": SAME_RESULT_HASH, "unknown_tool_name": None}


def store() -> SessionStore:
    return SessionStore(Engine(ENABLED))


def refs(s: SessionStore, key: str) -> list:
    return [r.ref for r in s.states[key].history]


# ------------------------------------------------------------------ §8.1 lookup

def test_a_keyless_sessions_state_moves_under_the_session_key():
    s = store()
    s.process(tool_call(call_id="a", session="S", session_key=None), ref="a")
    assert list(s) == ["S"] and s.remembered_session_id("S") == "S"
    verdict = s.process(tool_call(call_id="b", session="S", session_key="K"), ref="b")
    assert list(s) == ["K"] and s.remembered_session_id("K") == "S"
    assert refs(s, "K") == ["a", "b"] and verdict["recorded_call"] is True


def test_a_keyless_event_uses_the_keyed_state_where_it_is():
    s = store()
    s.process(tool_call(call_id="a", session="S", session_key="K"), ref="a")
    verdict = s.process(tool_call(call_id="b", session="S", session_key=None), ref="b")
    assert list(s) == ["K"]  # not moved, no state under "S"
    assert verdict["recorded_call"] is False and verdict["outcome"] == RECORDED  # keyless: outcome only
    assert refs(s, "K") == ["a", "b"]


def test_a_deferred_calls_keyless_result_finds_its_pending_call():
    s = store()
    s.process(tool_call(call_id="c1", session="S", session_key="K", outcome_follows=True))
    verdict = s.process(tool_result("c1", session="S", session_key=None))
    assert (verdict["tool_name"], verdict["args_hash"], verdict["outcome"]) == ("read", READ_HASH, RECORDED)
    assert list(s) == ["K"] and not s.states["K"].calls


def test_a_found_state_is_merged_into_the_direct_one():
    s = store()
    for i in range(3):
        s.process(tool_call(call_id=f"o{i}", session="O", session_key="K"), ref=f"o{i}")
    s.process(tool_call(call_id="p", session="S", session_key=None, outcome_follows=True), ref="p")
    for i in range(2):
        s.process(tool_call(call_id=f"s{i}", session="S", session_key=None), ref=f"s{i}")
    assert list(s) == ["K", "S"]
    verdict = s.process(tool_call(call_id="k", session="S", session_key="K"), ref="k")
    assert list(s) == ["K"] and s.remembered_session_id("K") == "S"
    # direct's records first, then the found state's, then the new call
    assert refs(s, "K") == ["o0", "o1", "o2", "s0", "s1", "k"]
    assert verdict["detection"] == {"stuck": False}  # 5 earlier identical calls: below the threshold of 10
    assert "p" in s.states["K"].calls  # the found state's pending call came along
    assert s.process(tool_result("p", session="S", session_key="K"))["tool_name"] == "read"


def test_merge_keeps_the_larger_warning_bucket_per_key():
    s = store()
    for i in range(21):  # K's own warning bucket reaches 2 at count 20
        s.process(tool_call("list", {"n": 1}, text_result(f"v{i}"), call_id=f"o{i}", session="O", session_key="K"))
    for i in range(11):  # S's reaches 1 for the same key at count 10
        s.process(tool_call("list", {"n": 1}, text_result(f"v{i}"), call_id=f"s{i}", session="S", session_key="S2"))
    key = next(iter(s.states["K"].warning_buckets))
    assert s.states["K"].warning_buckets[key] == 2 and s.states["S2"].warning_buckets[key] == 1
    s.process(tool_call("other", {}, call_id="k", session="S", session_key="K"))
    assert list(s) == ["K"] and s.states["K"].warning_buckets[key] == 2


def test_a_state_remembers_the_last_session_id_only():
    s = store()
    s.process(tool_call(call_id="a", session="S1", session_key="K"), ref="a")
    s.process(tool_call(call_id="b", session="S2", session_key="K"), ref="b")
    assert s.remembered_session_id("K") == "S2"
    s.process(tool_call(call_id="c", session="S1", session_key=None), ref="c")  # S1 forgotten: a new state
    assert list(s) == ["K", "S1"] and refs(s, "S1") == ["c"]
    s.process(tool_call(call_id="d", session="S2", session_key=None), ref="d")  # S2 remembered: used in place
    assert list(s) == ["K", "S1"] and refs(s, "K") == ["a", "b", "d"]


def test_an_absent_session_key_is_the_session_id_and_moves_the_state():
    s = store()
    s.process(tool_call(call_id="a", session="S", session_key="K"), ref="a")
    verdict = s.process(tool_call(call_id="b", session="S"), ref="b")  # session_key defaults to "S"
    assert list(s) == ["S"] and refs(s, "S") == ["a", "b"] and verdict["recorded_call"] is True


def test_compaction_retry_touches_no_session_state():
    s = store()
    s.process(compaction(session="S", session_key=None))
    s.process(compaction(session="S", session_key="K", run=None))
    assert len(s) == 0 and set(s.guards) == {"r1", "K"}
    s.process(tool_call(call_id="a", session="S", session_key=None))
    s.process(compaction(session="S", session_key="K2"))  # would have moved the state; does not
    assert list(s) == ["S"]


# ------------------------------------------------------------------ §7 guard identity

def _three_calls(s: SessionStore, **fields) -> list[str]:
    return [s.process(tool_call(call_id=f"g{i}", **fields))["verdict"] for i in range(3)]


def test_the_readme_shape_keyless_compaction_then_keyed_calls_aborts():
    s = store()
    s.process(compaction(run="r1", session="S"))  # no session_key: the README's compaction_retry
    assert _three_calls(s, run="r1", session="S", session_key="agent:main:S") == ["allow", "allow", "abort"]


def test_one_guard_per_run_id_across_sessions():
    s = store()
    s.process(compaction(run="r1", session="A"))
    assert _three_calls(s, run="r1", session="B") == ["allow", "allow", "abort"]
    # run_aborted follows the guard, in any session; other runs are unaffected
    assert s.process(tool_call(call_id="z", run="r1", session="C"))["run_aborted"] is True
    assert s.process(tool_call(call_id="y", run="r2", session="B"))["run_aborted"] is False


def test_run_ids_identify_guards_untrimmed():
    s = store()
    s.process(compaction(run="r1", session="S"))
    assert _three_calls(s, run=" r1", session="S") == ["allow"] * 3  # another guard, never armed
    # ... although history scoping trims them to one run
    assert [r.run_id for r in s.states["S"].history] == ["r1"] * 3
    assert set(s.guards) == {"r1", " r1"}


def test_blank_run_ids_use_the_session_key_else_the_session_id():
    s = store()
    s.process(compaction(run="  ", session="S"))  # arms guard "S"
    assert _three_calls(s, run=None, session="S", session_key="K") == ["allow"] * 3  # guard "K"
    assert _three_calls(s, run="", session="S", session_key=None) == ["allow", "allow", "abort"]  # guard "S"
    assert set(s.guards) == {"S", "K"}


def test_an_empty_session_key_is_a_guard_identity_of_its_own():
    s = store()
    s.process(compaction(run=None, session="A", session_key=""))
    # another session, same identity "": the same guard
    assert _three_calls(s, run=None, session="B", session_key="") == ["allow", "allow", "abort"]
    assert s.process(tool_call(call_id="x", run=None, session="B", session_key=None))["run_aborted"] is False


def test_guards_do_not_move_with_session_state():
    s = store()
    s.process(compaction(run=None, session="S", session_key=None))  # guard "S"
    s.process(tool_call(call_id="a", run=None, session="S", session_key=None))  # state "S", guard "S"
    s.process(tool_call(call_id="b", run=None, session="S", session_key="K"))  # state moved to "K"; guard "K"
    assert list(s) == ["K"] and s.guards["S"].remaining == 2 and s.guards["K"].remaining == 0
    verdict = s.process(tool_call(call_id="c", run=None, session="S", session_key=None))
    assert verdict["guard"]["remaining"] == 1  # guard "S" again, though the state is "K"'s


def test_the_guard_config_is_the_agent_of_the_event_that_creates_it():
    raw = {"tools": {"loopDetection": {"enabled": True}},
           "agents": {"list": [{"id": "w1", "tools": {"loopDetection": {"postCompactionGuard": {"windowSize": 1}}}}]}}
    s = SessionStore(Engine(OpenClawConfig(raw)))
    assert s.process(compaction(run="r1", session="A", agent_id="w1"))["guard"]["window_size"] == 1
    assert s.process(tool_call(call_id="a", run="r1", session="B"))["verdict"] == "abort"
