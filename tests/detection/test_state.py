"""SessionState: mutation helpers and the msgpack changelog form (round trips)."""

import msgpack
import pytest

from streams.detection import Engine, OpenClawConfig, SessionState
from streams.detection.state import (
    MAX_BLOCKED,
    MAX_RUNS,
    CallRecord,
    PendingCall,
    RunState,
    hash_key,
    remember_blocked,
)

from ._support import READ_HASH, SAME_RESULT_HASH, compaction, text_result, tool_call, tool_result

CONFIG = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5,
                                      "globalCircuitBreakerThreshold": 7, "unknownToolThreshold": 3}}}


def realistic_events() -> list[dict]:
    """Repeats up to a block, a blocked deferred call, pending calls, thrown errors with unknown tools,
    ping-pong, a compaction arming the guard of one run, several runs incl. whitespace and unscoped."""
    events: list[dict] = []
    n = 0

    def call(*args, **kwargs):
        nonlocal n
        n += 1
        kwargs.setdefault("call_id", f"c{n}")
        events.append(tool_call(*args, **kwargs))

    for _ in range(6):
        call()  # read: warnings from count 3, block at 5
    call(outcome_follows=True, call_id="blocked-1", result=None)  # blocked with a deferred outcome
    call("exec", {"command": "weather"}, None, "Unknown tool: weather_get")
    call("exec", {"command": "weather"}, None, "Unknown tool: weather_get")
    call("exec", {"command": "ls"}, None, 503)
    for i in range(6):
        call("read" if i % 2 else "list", {"p": i % 2}, text_result("pp"), run=" r2 ")
    events.append(compaction(run="r3"))
    call("process", {"action": "poll", "sessionId": "x"}, {"details": {"status": "running"}}, run="r3")
    call("message", {"action": "send", "to": "u"}, {"details": {"ok": True, "messageId": "m1"}}, run="r3")
    call("read", {"path": "deferred"}, None, outcome_follows=True, call_id="pending-1", run=None)
    call("read", {"path": "deferred-2"}, None, outcome_follows=True, call_id="pending-2", run=None)
    events.append(tool_result("pending-2", text_result("late"), run=None))
    call("read", {"path": "keyless"}, text_result("k"), session_key=None)
    return events


def build_state(events: list[dict], engine: Engine) -> tuple[SessionState, list[dict]]:
    state = SessionState()
    verdicts = [engine.process(event, state, ref=[f"e{index}", 0, index]) for index, event in enumerate(events)]
    state.last_offsets = {"loopwatch.events-0": 41, "loopwatch.events-3": 7}
    return state, verdicts


@pytest.fixture
def engine() -> Engine:
    return Engine(OpenClawConfig(CONFIG))


def test_realistic_state_exercises_every_part(engine):
    state, verdicts = build_state(realistic_events(), engine)
    decisions = [v.get("decision") for v in verdicts]
    assert "block" in decisions and "warn" not in decisions  # warnings below count 10 are not emitted
    assert list(state.calls) == ["pending-1"] and list(state.blocked) == ["r1:blocked-1"]  # R6: run and call id
    assert state.blocked["r1:blocked-1"].tool == "read" and state.blocked["r1:blocked-1"].guard == "r1"
    assert any(r.result_hash is None for r in state.history)  # pending record
    assert any((r.result_hash or "").startswith("error:") for r in state.history)
    assert {r.unknown_tool for r in state.history} >= {"weather_get"}
    assert state.runs["r3"].remaining == 1 and len(state.runs["r3"].window) == 2
    assert state.warning_buckets == {}  # counts stayed below 10
    assert {r.run_id for r in state.history} == {"r1", "r2", "r3", None}


@pytest.mark.parametrize("full_result_min_calls", [1, 2, 3], ids=["all-full", "below-smallest-warning",
                                                                   "smallest-warning"])
def test_round_trip_equality_and_same_future(engine, full_result_min_calls):
    assert engine.config.smallest_warning_threshold == 3
    events = realistic_events()
    state, _ = build_state(events, engine)
    state.warning_buckets = {"r1:generic:read:" + READ_HASH: 2, "pingpong:a|b": 1}
    data = state.to_bytes(full_result_min_calls)
    restored = SessionState.from_bytes(data)
    assert restored == state
    assert list(restored.warning_buckets) == list(state.warning_buckets)
    assert restored.calls == state.calls and restored.runs == state.runs
    assert restored.last_offsets == {"loopwatch.events-0": 41, "loopwatch.events-3": 7}
    assert restored.args_counts == state.args_counts
    assert SessionState.from_bytes(restored.to_bytes(full_result_min_calls)) == state
    # Both decide the rest of the stream identically.
    tail = events + [tool_result("pending-1", text_result("x"), run=None), compaction(run="r1")]
    for index, event in enumerate(tail):
        assert engine.process(event, restored, ref=index) == engine.process(event, state, ref=index)
    assert restored == state


def test_default_round_trip_is_byte_stable(engine):
    state, _ = build_state(realistic_events(), engine)
    data = state.to_bytes()
    assert SessionState.from_bytes(data).to_bytes() == data


def test_round_trip_keeps_printable_hashes(engine):
    state, _ = build_state(realistic_events(), engine)
    restored = SessionState.from_bytes(state.to_bytes())
    # the newest record of each run keeps its full args hash (ping-pong's paired signature)
    newest = {}
    for record in restored.history:
        newest[record.run_id] = record
    assert all(record.args_hash is not None and len(record.args_hash) == len(record.tool) + 65
               for record in newest.values())
    original = {r.run_id: r for r in state.history}
    assert {k: r.args_hash for k, r in newest.items()} == {k: r.args_hash for k, r in original.items()}
    # the newest resulted record of each call keeps its full result hash (the {r} of warning keys),
    # error hashes included
    def newest_results(history):
        found = {}
        for record in history:
            if record.result_key is not None:
                found[(record.run_id, record.args_key)] = record.result_hash
        return found
    assert newest_results(restored.history) == newest_results(state.history)
    assert any(h.startswith("error:") for h in newest_results(restored.history).values())


def test_empty_state_round_trip():
    empty = SessionState()
    assert SessionState.from_bytes(empty.to_bytes()) == empty
    assert msgpack.unpackb(empty.to_bytes()) == [3, [], None, [], {}, {}, {}, {}, {}, {}]


def test_hex_digests_travel_as_raw_bytes(engine):
    state = SessionState()
    engine.process(tool_call(), state)
    data = state.to_bytes()
    # 128-bit keys and, where a verdict may print them, the other halves, as raw bytes
    for digest in (SAME_RESULT_HASH, READ_HASH[5:]):
        assert bytes.fromhex(digest[:32]) in data and bytes.fromhex(digest[32:]) in data
        assert digest[:32].encode() not in data


def test_hex_looking_identifiers_round_trip():
    state = SessionState()
    hex32, hex64 = "0123456789abcdef" * 2, "0123456789abcdef" * 4
    state.append(CallRecord("read", READ_HASH, hex32, hex64, "error:" + hex64, hex32, ref=["x", 1]), 30)
    state.append(CallRecord("", ":" + hex64, "error:" + hex32, None, None, None), 30)
    state.remember_call(hex64, PendingCall("read", READ_HASH, hex32, 2, hex32))
    state.remember_call(hex32, PendingCall("read", READ_HASH, None, 2, "sess", "agent-x"))
    state.blocked[hex32 + ":" + hex64] = PendingCall("read", READ_HASH, hex32, 0, hex32 + " ", None, "openclaw-2026.7")
    state.runs[hex32] = RunState(True, 3, 2, [("read", READ_HASH, hex64, None)], False)
    restored = SessionState.from_bytes(state.to_bytes())
    assert restored == state
    assert restored.history[0].call_id == hex32 and restored.history[0].run_id == hex64
    assert restored.history[0].result_hash == "error:" + hex64
    assert restored.history[1].call_id == "error:" + hex32
    assert restored.calls[hex64].run_id == hex32
    assert (restored.calls[hex32].guard, restored.calls[hex32].agent) == ("sess", "agent-x")
    assert restored.blocked == {hex32 + ":" + hex64: state.blocked[hex32 + ":" + hex64]}


def test_format_2_states_still_load():
    # Format 2 (before tools moved into the rows): tools and the tool of each record in tables.
    args, result = "ab" * 32, "cd" * 32
    doc = [2, ["read", "exec"], ["r1"], [0, 1], [0, 0],
           [[bytes.fromhex(args[:32]), None, bytes.fromhex(result[:32]), None, ["e1", 0, 4]],
            [bytes.fromhex(args[:32]), "c2", None, None, None]],
           {1: bytes.fromhex(args[32:])}, {0: bytes.fromhex(result[32:])}, {"k": 2},
           {"r1": [1, 3, 0, 0, []]}, {"c2": ["exec", bytes.fromhex(args), "r1", 0, 0],
                                      "c3": ["exec", bytes.fromhex(args), "r1", 0, 1]}, {"in-0": 9}]
    state = SessionState.from_bytes(msgpack.packb(doc, use_bin_type=True))
    assert [(r.tool, r.args_key, r.args_hash, r.call_id, r.run_id, r.result_key, r.result_hash, r.ref)
            for r in state.history] == [
        ("read", "read:" + args[:32], None, None, "r1", result[:32], result, ["e1", 0, 4]),
        ("exec", "exec:" + args[:32], "exec:" + args, "c2", "r1", None, None, None),
    ]
    assert state.args_counts == {"read:" + args[:32]: 1, "exec:" + args[:32]: 1}
    assert state.warning_buckets == {"k": 2} and state.last_offsets == {"in-0": 9}
    assert state.runs == {"r1": RunState(True, 3)}
    assert state.calls == {"c2": PendingCall("exec", "exec:" + args, "r1", 0, "r1")}
    # a blocked call of that format: remembered by its call id
    assert state.blocked == {"c3": PendingCall("exec", "exec:" + args, "r1", 0, "r1")}
    # written again in the current format, read back the same
    assert SessionState.from_bytes(state.to_bytes()) == state
    assert msgpack.unpackb(state.to_bytes(), strict_map_key=False)[0] == 3


def test_single_run_keeps_full_result_hashes_of_frequent_calls_only():
    state = SessionState()
    h = ["%02x" % n * 32 for n in range(5)]
    for args, result in ((h[0], h[1]), (h[0], h[2]), (h[3], h[4]), (h[0], None)):
        state.append(CallRecord("read", "read:" + args, None, "r1", result), 30)
    restored = SessionState.from_bytes(state.to_bytes(full_result_min_calls=3))
    # read h0 was called 3 times: the newest resulted record keeps its full hash; h3 once: key only
    assert [r.result_hash for r in restored.history] == [None, h[2], None, None]
    assert [r.result_key for r in restored.history] == [h[1][:32], h[2][:32], h[4][:32], None]
    assert [r.args_hash for r in restored.history] == [None, None, None, "read:" + h[0]]  # the run's newest
    assert msgpack.unpackb(state.to_bytes(), strict_map_key=False)[2] is None  # one run: no run index per record


@pytest.mark.parametrize("doc", [
    [4, [], [], {}, {}, {}, {}],
    [3, [], [], {}, {}, {}, {}],
    [0],
    [],
    {},
    "state",
    None,
], ids=["version-4", "version-3-short", "version-0", "empty-list", "map", "string", "nil"])
def test_unknown_format_version_raises(doc):
    with pytest.raises(ValueError, match=r"^not a loopwatch session state \(unknown format version\)$"):
        SessionState.from_bytes(msgpack.packb(doc))


@pytest.mark.parametrize("data", [b"", b"\x92\x01"], ids=["empty", "truncated"])
def test_undecodable_bytes_raise_value_error(data):
    with pytest.raises(ValueError, match="incomplete input"):
        SessionState.from_bytes(data)


# ------------------------------------------------------------------ mutation helpers


def test_hash_key_is_128_bit_prefix():
    assert hash_key(READ_HASH) == "read:d358b22b4ff6f0515ebb0f5219842ac0"
    assert hash_key("error:" + "ab" * 32) == "error:" + "ab" * 16
    record = CallRecord("read", READ_HASH, "c1", "r1", SAME_RESULT_HASH)
    assert (record.args_key, record.result_key) == (hash_key(READ_HASH), hash_key(SAME_RESULT_HASH))
    assert CallRecord("read", READ_HASH, "c1", "r1").result_key is None


def test_append_trims_and_keeps_args_counts():
    state = SessionState()
    for i in range(5):
        state.append(CallRecord("read", READ_HASH if i % 2 else "read:" + "0" * 64, None, None, ref=i), 3)
    assert [r.ref for r in state.history] == [2, 3, 4]
    assert state.args_counts == {hash_key(READ_HASH): 1, "read:" + "0" * 32: 2}
    state.trim(1)
    assert [r.ref for r in state.history] == [4] and state.args_counts == {"read:" + "0" * 32: 1}
    state.history.append(CallRecord("read", READ_HASH, None, None))
    state.reindex()
    assert state.args_counts == {"read:" + "0" * 32: 1, hash_key(READ_HASH): 1}


def test_remember_call_has_no_count_limit():
    """Pending calls stay until their result arrives (Spec §9): none is dropped for a newer one."""
    state = SessionState()
    for i in range(1000):
        state.remember_call(f"c{i}", PendingCall("read", READ_HASH, None, 0, "s1"))
    assert len(state.calls) == 1000 and list(state.calls)[0] == "c0"
    state.remember_call("c2", PendingCall("exec", READ_HASH, None, 0, "s1"))  # re-added: now newest
    assert list(state.calls)[-1] == "c2" and state.calls["c2"].tool == "exec" and len(state.calls) == 1000


def test_blocked_calls_are_capped_oldest_first():
    """OpenClaw remembers at most 1,024 blocked calls (Spec §9); a known key keeps its place."""
    blocked: dict = {}
    call = PendingCall("read", READ_HASH, "r", 0, "r")
    for i in range(MAX_BLOCKED):
        remember_blocked(blocked, f"r:c{i}", call)
    remember_blocked(blocked, "r:c0", call)
    assert len(blocked) == MAX_BLOCKED and next(iter(blocked)) == "r:c0"
    remember_blocked(blocked, "r:new", call)
    assert len(blocked) == MAX_BLOCKED and "r:c0" not in blocked and list(blocked)[-1] == "r:new"


def test_run_states_evict_idle_runs_first():
    state = SessionState()
    busy = state.run("busy", True, 3)
    busy.remaining = 2
    for i in range(MAX_RUNS - 1):
        state.run(f"idle{i}", True, 3)
    assert len(state.runs) == MAX_RUNS
    state.run("new", False, 5)
    assert "busy" in state.runs and "idle0" not in state.runs and len(state.runs) == MAX_RUNS
    assert state.run("new", True, 9) == RunState(False, 5)  # created once, config kept
