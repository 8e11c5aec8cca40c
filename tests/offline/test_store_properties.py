"""Property: for one session, the offline store (Spec §8.1 lookup) and the engine on one state agree.

Events of one session id arrive with its session key, with ``session_key: null``,
with ``session_key: ""`` (a key of its own, R4) and with no ``session_key`` (= the
session id) in any order: the lookup keeps them in one history (moving the state
or using it in place), which is what the stream processor does when all of them
share one record key. Results also come without ``tool_call_id`` (R8) and without
any session (R7), and blocked deferred calls are remembered by run and call id (R6).
"""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.detection import Engine, OpenClawConfig, SessionState, SessionStore

from tests.detection._support import OMIT, compaction, text_result, tool_call, tool_result

CONFIG = OpenClawConfig({"tools": {"loopDetection": {
    "enabled": True, "historySize": 8, "warningThreshold": 2, "criticalThreshold": 4,
    "globalCircuitBreakerThreshold": 6, "unknownToolThreshold": 3, "postCompactionGuard": {"windowSize": 2}}}})

KEYS = ("K", None, OMIT, "")  # the session key, null (keyless), absent (= the session id), "" (keyless, a key)
RUNS = ("r1", " r1", None, "  ")
TOOLS = ("read", "exec", "  ")
ARGS = ({"p": 1}, {"p": 2}, OMIT)
RESULTS = (text_result("same"), text_result("other"), None)
ERRORS = (None, None, "Unknown tool: nope")

row = st.tuples(st.integers(0, 6), *(st.integers(0, len(c) - 1) for c in (KEYS, RUNS, TOOLS, ARGS, RESULTS, ERRORS)),
                st.integers(0, 6))


def _materialise(rows) -> list[dict]:
    events = []
    for kind, key, run, tool, args, result, error, call in rows:
        fields = {} if KEYS[key] is OMIT else {"session_key": KEYS[key]}
        common = dict(run=RUNS[run], session="S", **fields)
        call_id = f"c{call}" if call < 6 else None  # a result without tool_call_id (R8)
        if kind <= 1:  # inline call
            events.append(tool_call(TOOLS[tool], ARGS[args], RESULTS[result], ERRORS[error], call_id=f"c{call}",
                                    **common))
        elif kind == 2:  # deferred call
            events.append(tool_call(TOOLS[tool], ARGS[args], None, None, call_id=f"c{call}", outcome_follows=True,
                                    **common))
        elif kind in (3, 6):  # a result, maybe for a pending call, maybe carrying its tool name and args
            extra = {} if tool == 0 else {"tool_name": TOOLS[tool]}
            if ARGS[args] is not OMIT:
                extra["args"] = ARGS[args]
            if kind == 6:  # with neither session id nor key (R7)
                common = dict(run=RUNS[run], session=None, session_key=None)
            events.append(tool_result(call_id, RESULTS[result], ERRORS[error], **common, **extra))
        elif kind == 4:
            events.append(compaction(**common))
        else:
            events.append(tool_call("read", {"p": 1}, RESULTS[0], call_id=f"c{call}", **common))  # repeats
    return events


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(st.lists(row, min_size=1, max_size=40).map(_materialise))
def test_store_and_single_state_engine_agree_for_one_session(events):
    engine = Engine(CONFIG)
    store, state = SessionStore(engine), SessionState()
    for index, event in enumerate(events):
        assert store.process(event, ref=index) == engine.process(event, state, ref=index), (index, event)
        assert len(store) <= 1  # one session, one state, wherever it is kept
    if len(store):
        (only,) = store.states.values()
        assert only.history == state.history and only.calls == state.calls
        assert only.warning_buckets == state.warning_buckets
    assert store.guards == state.runs
    assert store.blocked == state.blocked
