"""A state that goes through its serialised form between every event decides
exactly as one kept in memory: what the worker's changelog relies on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.workload import generate
from streams.offline.conformance import scenario_config, spec_view
from streams.detection import Engine, OpenClawConfig, SessionState, state_key
from streams.detection.profiles import OPENCLAW_2026_9_6
from tests.shared_vectors import FILES_2026_9, OWN_2026_7, OWN_2026_9, shared_path

VECTORS = shared_path("vectors.jsonl")  # not part of the project: skipped where absent
SCENARIO_FILES = [VECTORS, OWN_2026_7, OWN_2026_9, *(shared_path(name) for name in FILES_2026_9)]

CONFIGS = {
    "defaults-enabled": {"tools": {"loopDetection": {"enabled": True}}},
    "sensitive": {"tools": {"loopDetection": {
        "enabled": True, "warningThreshold": 3, "criticalThreshold": 5, "globalCircuitBreakerThreshold": 8}}},
    "agent-with-lower-threshold": {
        "tools": {"loopDetection": {"enabled": True}},
        "agents": {"list": [{"id": "main", "tools": {"loopDetection": {"warningThreshold": 2, "criticalThreshold": 4}}}]},
    },
}


@pytest.mark.parametrize("profile", [None, OPENCLAW_2026_9_6])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_round_trip_between_every_event_keeps_every_verdict(name: str, profile: str | None) -> None:
    engine = Engine(OpenClawConfig(CONFIGS[name], profile=profile))
    keep = engine.config.smallest_warning_threshold
    in_memory: dict[str, SessionState] = {}
    serialised: dict[str, bytes] = {}
    detections = 0
    for event in generate(runs=120, seed=11):
        key = event["run_id"]
        live = in_memory.setdefault(key, SessionState())
        restored = SessionState.from_bytes(serialised[key]) if key in serialised else SessionState()
        expected = engine.process(event, live, event["event_id"])
        actual = engine.process(event, restored, event["event_id"])
        serialised[key] = restored.to_bytes(keep)
        assert actual == expected, event["event_id"]
        detections += expected.get("detection", {}).get("stuck", False)
    assert detections > 50  # the workload's loops were exercised


def test_smallest_warning_threshold_spans_agents() -> None:
    assert OpenClawConfig(CONFIGS["agent-with-lower-threshold"]).smallest_warning_threshold == 2
    assert OpenClawConfig({}).smallest_warning_threshold == 10


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=[path.name for path in SCENARIO_FILES])
def test_conformance_scenarios_with_a_round_trip_before_every_event(path: Path) -> None:
    if not path.is_file():
        pytest.skip(f"no shared conformance file at {path}")
    failures = []
    for line in path.read_text(encoding="utf-8").splitlines():
        scenario = json.loads(line)
        if not _one_state_key_per_session(scenario):
            continue  # its states are found across keys (session aliases, §8.1): the store's lookup, not per key
        engine = Engine(scenario_config(scenario))
        keep = engine.config.smallest_warning_threshold
        stored: dict[str, bytes] = {}
        for index, (event, want) in enumerate(zip(scenario["events"], scenario["expected"])):
            key = state_key(event) or ""
            state = SessionState.from_bytes(stored[key]) if key in stored else SessionState()
            got = spec_view(engine.process(event, state))
            stored[key] = state.to_bytes(keep)
            if got != {k: v for k, v in want.items() if k != "event"}:
                failures.append(f"{scenario['name']} event {index}")
                break
    assert failures == []


def test_serialised_state_drops_unprintable_full_hashes_but_keeps_keys() -> None:
    engine = Engine(OpenClawConfig(CONFIGS["defaults-enabled"]))
    state = SessionState()
    for number in range(5):  # five distinct calls, each seen once
        engine.process({"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": f"c{number}",
                        "tool_name": "read", "args": {"path": f"/f{number}"},
                        "result": {"content": [{"type": "text", "text": str(number)}]}, "error": None}, state)
    restored = SessionState.from_bytes(state.to_bytes(full_result_min_calls=10))
    assert restored == state
    assert [r.result_hash is None for r in restored.history] == [True] * 5
    # the newest record keeps its full args hash (ping-pong's paired signature)
    assert [r.args_hash is None for r in restored.history] == [True, True, True, True, False]
    assert restored.history[-1].args_hash == state.history[-1].args_hash
    assert len(state.to_bytes(full_result_min_calls=10)) < len(state.to_bytes())


def _one_state_key_per_session(scenario: dict) -> bool:
    """Whether every session id of the scenario's events is stored under one state key (no alias lookups)."""
    keys: dict[object, set] = {}
    for event in scenario["events"]:
        keys.setdefault(event.get("session_id"), set()).add(state_key(event))
    return all(len(found) == 1 for found in keys.values())
