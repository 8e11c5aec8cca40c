"""Exact parity stays the default: policies absent, or present but off, change no byte of any verdict."""

from __future__ import annotations

import copy
from pathlib import Path

from hypothesis import given, settings

from tests.shared_vectors import shared_path, shared_scenarios, skip_without
from streams.detection import Engine, OpenClawConfig, SessionState
from streams.detection.config import validate
from streams.offline.conformance import load_scenarios, run_scenario
from tests.detection.test_properties import event_sequences

VECTORS = shared_path("vectors.jsonl")  # not part of the project: skipped where absent

# Every policy written out, every one switched off (or matching nothing a scenario calls).
DISABLED = {
    "perTool": [{"tool": "no-such-tool-*", "criticalThreshold": 2}],
    "escalation": {"enabled": False, "consecutiveBlocks": 1},
    "runBudget": {"enabled": False, "blockedCalls": 1, "noProgressOutcomes": 1},
    "normalizeResults": {"enabled": False},
}
CONFIG = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}},
          "agents": {"list": [{"id": "quiet", "tools": {"loopDetection": {"enabled": False}}}]}}


def test_disabled_policies_are_valid():
    validate({**CONFIG, "policies": DISABLED})


@settings(max_examples=300, deadline=None)
@given(event_sequences(40))
def test_policies_absent_or_disabled_give_byte_identical_verdicts_and_states(events):
    engines = [Engine(OpenClawConfig(CONFIG)), Engine(OpenClawConfig({**CONFIG, "policies": DISABLED})),
               Engine(OpenClawConfig({**CONFIG, "policies": {}}))]
    states = [SessionState() for _ in engines]
    for event in events:
        results = [engine.process(event, state, ref=["ref"]) for engine, state in zip(engines, states)]
        assert results[1] == results[0] and results[2] == results[0]
        assert states[1].to_bytes() == states[0].to_bytes() == states[2].to_bytes()


@skip_without("vectors.jsonl")
def test_every_conformance_scenario_passes_with_disabled_policies():
    failures = []
    for scenario in load_scenarios(VECTORS):
        scenario = copy.deepcopy(scenario)
        scenario["config"] = {**(scenario.get("config") or {}), "policies": DISABLED}
        mismatch = run_scenario(scenario)
        if mismatch is not None:
            failures.append(scenario["name"])
    assert failures == []
