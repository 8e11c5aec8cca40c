"""SessionStore: state keyed by session key, else session id; re-keying and merging (Spec §8.1)."""

from streams.detection import Engine, OpenClawConfig, SessionState, SessionStore, state_key
from streams.detection.sessions import merge_states
from streams.detection.state import CallRecord, hash_key

from ._support import READ_HASH, SAME_RESULT_HASH, tool_call

ENABLED = OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}})


def test_state_key_prefers_session_key():
    assert state_key({"session_key": "k", "session_id": "s"}) == "k"
    assert state_key({"session_id": "s"}) == "s"
    assert state_key({"session_key": None, "session_id": "s"}) == "s"
    assert state_key({"session_key": "", "session_id": "s"}) == ""  # Spec §8.1 R4: only absent or null falls back
    assert state_key({"session_key": None, "session_id": None}) is None


def test_sessions_are_isolated():
    store = SessionStore(Engine(ENABLED))
    for i in range(10):
        store.process(tool_call(call_id=f"a{i}", session="s1"))
    assert store.process(tool_call(call_id="b", session="s2"))["detection"] == {"stuck": False}
    assert store.process(tool_call(call_id="a10", session="s1"))["detection"]["count"] == 10
    assert sorted(store) == ["s1", "s2"] and len(store) == 2


def test_session_id_state_rekeyed_under_session_key():
    store = SessionStore(Engine(ENABLED))
    for i in range(10):
        store.process(tool_call(call_id=f"c{i}", session="sid", session_key=None))  # keyless: recorded by id
    assert list(store) == ["sid"]
    verdict = store.process(tool_call(call_id="c10", session="sid", session_key="agent:main:1"))
    assert list(store) == ["agent:main:1"]
    assert verdict["detection"]["count"] == 10  # the id's history came along


def test_session_id_state_merged_into_existing_key_state():
    store = SessionStore(Engine(ENABLED))
    for i in range(4):
        store.process(tool_call(call_id=f"k{i}", session="other", session_key="key"))
    for i in range(6):
        store.process(tool_call(call_id=f"s{i}", session="sid", session_key=None))
    verdict = store.process(tool_call(call_id="last", session="sid", session_key="key"))
    assert list(store) == ["key"]
    assert verdict["detection"]["count"] == 10
    assert len(store.states["key"].history) == 11


def test_merge_states_concatenates_and_keeps_bucket_maxima():
    into, other = SessionState(), SessionState()
    into.append(CallRecord("read", READ_HASH, None, "r1", SAME_RESULT_HASH, ref="into"), 30)
    other.append(CallRecord("read", READ_HASH, None, "r1", None, ref="other"), 30)
    into.warning_buckets = {"a": 1, "b": 3}
    other.warning_buckets = {"a": 2, "b": 1, "c": 1}
    merge_states(into, other)
    assert [r.ref for r in into.history] == ["into", "other"]
    assert into.args_counts == {hash_key(READ_HASH): 2}
    assert into.warning_buckets == {"a": 2, "b": 3, "c": 1}


def test_a_result_finds_its_deferred_call_in_another_state_of_the_session():
    # Found by bench/difffuzz.py against OpenClaw 2026.7.35 (docs/detection-rules.md §9): OpenClaw's wrapper keeps
    # a deferred call, not its session. Here the call's state (key k1) goes on to remember session s2, so the
    # result (no session key, session s1) looks up a new state of its own; it is still c1's result: grep, run
    # r1's config and guard (armed by the compaction), recorded in the state the result looks up.
    store = SessionStore(Engine(OpenClawConfig({})))
    grep = {"pattern": "TODO"}
    store.process({"type": "tool_call", "run_id": "r1", "session_id": "s1", "session_key": "k1", "tool_call_id": "c1",
                   "tool_name": "grep", "args": grep, "result": None, "error": None, "outcome_follows": True})
    store.process({"type": "tool_call", "run_id": "r2", "session_id": "s2", "session_key": "k1", "tool_call_id": "c2",
                   "tool_name": "ls", "args": {"dir": "/"}, "result": {"content": [{"type": "text", "text": "a b"}],
                                                                        "details": {}}, "error": None})
    store.process({"type": "compaction_retry", "run_id": "r1", "session_id": "s1"})
    verdict = store.process({"type": "tool_result", "run_id": "r1", "session_id": "s1", "session_key": None,
                             "tool_call_id": "c1", "result": {"content": [{"type": "text", "text": "3 hits"}],
                                                              "details": {}}, "error": None})
    assert verdict["tool_name"] == "grep"
    assert verdict["args_hash"] == "grep:481b1b87d58b795f6c6e7e9246b3154e07016959b5e7b675c56419b35c9cd56c"
    assert verdict["outcome"] == {"recorded": True, "unknown_tool_name": None,
                                  "result_hash": "038fb793de97ce9cf01020d95862511f933e769cc4dd588fc91e8e242e9dab1c"}
    assert verdict["guard"] == {"enabled": True, "armed": True, "observed": True, "remaining": 2, "abort": False}
    assert list(store) == ["k1", "s1"] and "c1" not in store.states["k1"].calls
    assert [record.tool for record in store.states["s1"].history] == ["grep"]
