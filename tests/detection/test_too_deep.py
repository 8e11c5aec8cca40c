"""An event nested too deeply to hash is rejected before the engine changes the state."""

from __future__ import annotations

import copy

import pytest

from streams.detection import Engine, EventError, OpenClawConfig, SessionState


def _deep(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def _call(call_id: str, **fields) -> dict:
    return {"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": call_id, "tool_name": "read",
            "args": {"path": "x"}, "result": "ok", **fields}


@pytest.fixture
def engine() -> Engine:
    return Engine(OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}}))


def _primed(engine: Engine) -> SessionState:
    """A state with a run, history, a dedupe bucket and a pending call: every part an event could change."""
    state = SessionState()
    for index in range(10):
        engine.process(_call(f"c{index}"), state)
    engine.process({"type": "compaction_retry", "run_id": "r", "session_id": "s"}, state)
    engine.process(_call("pending", outcome_follows=True, result=None), state)
    assert state.history and state.warning_buckets and state.calls and state.runs
    return state


@pytest.mark.parametrize("event", [
    _call("deep-args", args=_deep(5_000)),
    _call("deep-result", result={"details": _deep(5_000)}),
    _call("deep-error", result=None, error=_deep(5_000)),
    _call("new-run", run_id="another", result=[_deep(5_000)]),  # would create the run first
    {"type": "tool_result", "run_id": "r", "session_id": "s", "tool_call_id": "pending", "result": [_deep(5_000)]},
], ids=["args", "result", "error", "result of a new run", "tool_result"])
def test_too_deep_to_hash_leaves_the_state_as_it_was(engine, event):
    state = _primed(engine)
    before = copy.deepcopy(state)
    with pytest.raises(EventError, match="^args or result nested too deeply to hash$"):
        engine.process(event, state)
    assert state == before
    assert state.to_bytes() == before.to_bytes()
    assert list(state.runs) == list(before.runs) == ["r"]
    assert list(state.calls) == ["pending"]
    # the state goes on as if the event had never come
    assert engine.process(_call("next"), state) == engine.process(_call("next"), before)
