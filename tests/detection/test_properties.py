"""Property-based tests (hypothesis): canonical hashing and engine invariants."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.difffuzz import shuffled
from streams.detection import UNDEFINED, Engine, OpenClawConfig, SessionState, digest, stable_stringify
from streams.detection.canonical import _exact_text, _fast_text, canonical_bytes
from streams.detection.detectors import detect, is_known_poll
from streams.detection.events import guard_key
from streams.detection.fingerprint import args_hash, js_trim, normalize_tool_name

from ._support import OMIT, SAME_RESULT, compaction, text_result, tool_call, tool_result

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

# ------------------------------------------------------------------ JSON values

any_text = st.text(st.characters(exclude_categories=()), max_size=8)  # incl. astral and lone surrogates
keys = st.one_of(st.text(max_size=4), any_text, st.sampled_from(["a", "b", "A", "10", "2", "é", "\uffff",
                                                                 "\U0001F600", "\ud800", ""]))
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(),  # incl. NaN, infinities, -0.0, subnormals
    st.sampled_from([1e21, 1e-7, 1e-6, 0.00001, 1.5e-7, 5e-324, 1.7976931348623157e308, 2**53 + 1,
                     9007199254740993, 1e16, 10**400, -(10**400), 2.0**60]),
)
leaves = st.one_of(st.none(), st.booleans(), numbers, any_text)
json_values = st.recursive(
    leaves, lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20)


@FAST
@given(json_values, st.randoms(use_true_random=False))
def test_args_hash_ignores_key_order(value, rng):
    other = shuffled(value, rng)
    assert args_hash("read", other) == args_hash("read", value)
    assert stable_stringify(other) == stable_stringify(value)


@FAST
@given(st.integers(min_value=-(10**21) + 1, max_value=10**21 - 1))
def test_integral_floats_hash_like_their_integers(number):
    as_float = float(number)
    assert digest(as_float) == digest(int(as_float))
    assert digest({"n": [as_float]}) == digest({"n": [int(as_float)]})
    if abs(number) <= 2**53:
        assert stable_stringify(as_float) == str(number)
        assert digest(as_float) == digest(number)


@FAST
@given(json_values)
def test_fast_path_equals_exact_path(value):
    exact = _exact_text(value)
    assert stable_stringify(value) == exact
    assert canonical_bytes(value) == exact.encode("utf-8")
    fast = _fast_text(value)
    assert fast is None or fast == exact
    exact.encode("utf-8")  # lone surrogates are always escaped: the text is valid UTF-8


# ------------------------------------------------------------------ event sequences

CONFIG = OpenClawConfig({"tools": {"loopDetection": {
    "enabled": True, "warningThreshold": 2, "criticalThreshold": 3, "globalCircuitBreakerThreshold": 5,
    "unknownToolThreshold": 2, "historySize": 8, "postCompactionGuard": {"windowSize": 2}}},
    "agents": {"list": [{"id": "quiet", "tools": {"loopDetection": {"detectors": {"genericRepeat": False},
                                                                     "historySize": 5}}}]}})

TOOLS = ["read", "read", "list", "Bash", "process", "command_status", "message"]
ARGS = [{"path": "a"}, {"path": "a"}, {"path": "b"}, {"action": "poll", "sessionId": "x"},
        {"action": "send", "to": "u"}, OMIT]
RESULTS = [SAME_RESULT, SAME_RESULT, text_result("other"), None, "plain",
           {"details": {"status": "running", "tail": "x", "pid": 1}},
           {"details": {"ok": True, "messageId": "m1"}}]
ERRORS = [None, None, None, None, "Unknown tool: foo", "Unknown tool: bar", "boom", 503]
RUNS = ["r1", "r1", "r2", " r1 ", None]


FLAGS = [{}] * 6 + [{"outcome_follows": True}, {"session_key": None}, {"agent_id": "quiet"},
                    {"outcome_follows": True, "agent_id": "quiet"}]
# "repeat": the previous call again; "alternate": the call before it again (ping-pong)
KINDS = ["call"] * 4 + ["repeat"] * 4 + ["alternate"] * 3 + ["result", "compaction"]


def _materialise(rows: list[tuple]) -> list[dict]:
    events: list[dict] = []
    calls = 0
    previous: list[tuple] = []
    for kind, run, tool, args, result, error, flags, target in rows:
        if KINDS[kind] == "repeat" and previous:
            kind, run, tool, args, result, error, flags = previous[-1]
        elif KINDS[kind] == "alternate" and len(previous) > 1:
            kind, run, tool, args, result, error, flags = previous[-2]
        run = RUNS[run]
        if KINDS[kind] in ("call", "repeat", "alternate") or calls == 0:
            previous = previous[-1:] + [(0, RUNS.index(run), tool, args, result, error, flags)]
            calls += 1
            events.append(tool_call(TOOLS[tool], ARGS[args], RESULTS[result], ERRORS[error], call_id=f"c{calls}",
                                    run=run, **FLAGS[flags]))
        elif KINDS[kind] == "result":
            events.append(tool_result(f"c{target % calls + 1}", RESULTS[result], ERRORS[error], run=run))
        else:
            events.append(compaction(run=run))
    return events


def event_sequences(max_size: int = 25):
    """tool_call / tool_result / compaction_retry sequences over a few tools, args, outcomes and runs."""
    row = st.tuples(*(st.integers(0, len(choices) - 1) for choices in (KINDS, RUNS, TOOLS, ARGS, RESULTS, ERRORS,
                                                                      FLAGS)), st.integers(0, 63))
    return st.lists(row, min_size=1, max_size=max_size).map(_materialise)


def guard(run) -> tuple | None:
    if run is None:
        return None
    return run.guard_enabled, run.window_size, run.remaining, tuple(run.window), run.aborted


def snapshot(state: SessionState) -> tuple:
    history = [(r.tool, r.args_hash, r.call_id, r.run_id, r.result_hash, r.unknown_tool, r.ref)
               for r in state.history]
    return history, dict(state.warning_buckets)


@FAST
@given(event_sequences())
def test_state_round_trips_between_every_event(events):
    engine = Engine(CONFIG)
    keep = CONFIG.smallest_warning_threshold
    live, stored = SessionState(), SessionState().to_bytes(keep)
    for index, event in enumerate(events):
        restored = SessionState.from_bytes(stored)
        expected = engine.process(event, live, ref=[index])
        assert engine.process(event, restored, ref=[index]) == expected
        stored = restored.to_bytes(keep)
        assert SessionState.from_bytes(stored) == live
    full = live.to_bytes()
    assert SessionState.from_bytes(full) == live
    assert SessionState.from_bytes(full).to_bytes() == full


@FAST
@given(event_sequences())
def test_blocked_calls_leave_no_trace(events):
    engine = Engine(CONFIG)
    state = SessionState()
    blocked = 0
    for index, event in enumerate(events):
        before = snapshot(state)
        run_key = guard_key(event)
        guard_before = guard(state.runs.get(run_key))
        verdict = engine.process(event, state, ref=index)
        if verdict.get("blocked"):
            blocked += 1
            assert snapshot(state) == before
            guard_after = guard(state.runs[run_key])
            if guard_before is not None:
                assert guard_after == guard_before
            else:
                assert guard_after[2:] == (0, (), False)  # a fresh, idle run
            assert verdict["outcome"] == {"recorded": False, "result_hash": None, "unknown_tool_name": None}
            assert verdict["guard"]["observed"] is False


def reference_detect(history, run_id, tool, h, known_poll, s):
    """Spec §5.1-§5.4 written out literally, on (tool, args_hash, run_id, result_hash, unknown) tuples."""
    scoped = [r for r in history if r[2] == run_id]
    recent = sum(1 for r in scoped if r[0] == tool and r[1] == h)
    streak, latest = 0, None
    for r in reversed(scoped):
        if r[0] != tool or r[1] != h or r[3] is None:
            continue
        if latest is None:
            latest, streak = r[3], 1
        elif r[3] == latest:
            streak += 1
        else:
            break
    unknown, name = 0, None
    for r in reversed(scoped):
        if r[0] != tool or r[4] is None or (name is not None and r[4] != name):
            break
        name, unknown = r[4], unknown + 1
    pp_count, paired, paired_sig, evidence = 0, None, None, False
    if scoped:
        last = scoped[-1]
        other = next((r for r in reversed(scoped) if r[1] != last[1]), None)
        if other is not None:
            tail = 0
            for r in reversed(scoped):
                if r[1] != (last[1] if tail % 2 == 0 else other[1]):
                    break
                tail += 1
            if tail >= 2 and h == other[1]:
                pp_count, paired, paired_sig = tail + 1, last[0], last[1]
                tail_records = scoped[-tail:]
                side_a = {r[3] for r in tail_records if r[1] == last[1]}
                side_b = {r[3] for r in tail_records if r[1] == other[1]}
                evidence = (all(r[3] is not None for r in tail_records) and len(side_a) == 1 and len(side_b) == 1)
    r_key = latest if latest is not None else "none"
    pair_key = "pingpong:" + "|".join(sorted([h, paired_sig or ""], key=lambda t: t.encode("utf-16-be",
                                                                                             "surrogatepass")))
    if unknown >= s.unknown_tool_threshold:
        return ("critical", "unknown_tool_repeat", unknown, f"unknown-tool:{tool}:{name}", None)
    if streak >= s.global_circuit_breaker_threshold:
        return ("critical", "global_circuit_breaker", streak, f"global:{tool}:{h}:{r_key}", None)
    if known_poll and s.known_poll_no_progress and streak >= s.critical_threshold:
        return ("critical", "known_poll_no_progress", streak, f"poll:{tool}:{h}:{r_key}", None)
    if known_poll and s.known_poll_no_progress and streak >= s.warning_threshold:
        return ("warning", "known_poll_no_progress", streak, f"poll:{tool}:{h}:{r_key}", None)
    if s.ping_pong and pp_count >= s.critical_threshold and evidence:
        return ("critical", "ping_pong", pp_count, pair_key, paired)
    if s.ping_pong and pp_count >= s.warning_threshold:
        return ("warning", "ping_pong", pp_count, pair_key, paired)
    if not known_poll and s.generic_repeat and streak >= s.critical_threshold:
        return ("critical", "generic_repeat", streak, f"generic:{tool}:{h}:{r_key}", None)
    if not known_poll and s.generic_repeat and recent >= s.warning_threshold:
        return ("warning", "generic_repeat", recent, f"generic:{tool}:{h}", None)
    return None


@FAST
@given(event_sequences())
def test_detection_never_sees_the_call_it_judges(events):
    engine = Engine(CONFIG)
    state = SessionState()
    for event in events:
        judged = event["type"] == "tool_call" and event.get("session_key", event.get("session_id"))
        if judged:
            s = CONFIG.for_agent(event.get("agent_id"))
            tool = normalize_tool_name(event.get("tool_name"))
            args = event.get("args", UNDEFINED)
            h = args_hash(tool, args)
            run_id = js_trim(event["run_id"]) or None if event["run_id"] else None
            history = [(r.tool, r.args_hash, r.run_id, r.result_hash, r.unknown_tool) for r in state.history]
            expected = detect(state, run_id, tool, h, is_known_poll(tool, args), s)
            literal = reference_detect(history, run_id, tool, h, is_known_poll(tool, args), s)
        verdict = engine.process(event, state)
        if judged:
            got = verdict["detection"]
            assert got == (expected.as_dict() if expected is not None else {"stuck": False})
            summary = None if not got["stuck"] else (got["level"], got["detector"], got["count"],
                                                     got["warning_key"], got.get("paired_tool_name"))
            assert summary == literal


@FAST
@given(event_sequences())
def test_same_sequence_same_verdicts(events):
    first_state, second_state = SessionState(), SessionState()
    first = [Engine(CONFIG).process(event, first_state, ref=i) for i, event in enumerate(events)]
    second = [Engine(CONFIG).process(copy.deepcopy(event), second_state, ref=i) for i, event in enumerate(events)]
    assert first == second
    assert first_state.to_bytes() == second_state.to_bytes()
