"""Every scenario of the golden vectors (Spec §10), one pytest case each."""

from pathlib import Path

import pytest

from tests.shared_vectors import OWN_2026_7, shared_path, shared_scenarios, skip_without
from streams.offline.conformance import load_scenarios, run_scenario

VECTORS = shared_path("vectors.jsonl")  # not part of the project: no scenarios where absent
SCENARIOS = shared_scenarios("vectors.jsonl")
# the project's own 2026.7 scenarios (bench/own_vectors_2026_7.py): run everywhere, also without ../shared
OWN = list(load_scenarios(OWN_2026_7))


@skip_without("vectors.jsonl")
def test_vector_file_holds_the_documented_scenarios():
    # Spec header: 92 scenarios, 1,674 events.
    assert len(SCENARIOS) == 92
    assert sum(len(s["events"]) for s in SCENARIOS) == 1674
    assert len({s["name"] for s in SCENARIOS}) == 92


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario(scenario):
    mismatch = run_scenario(scenario)
    assert mismatch is None, str(mismatch)


def test_own_scenarios_cover_the_rules_and_say_where_their_expectations_come_from():
    assert len(OWN) >= 40 and len({s["name"] for s in OWN}) == len(OWN)
    assert all("profile" not in s for s in OWN)
    by_openclaw = [s for s in OWN if "expected: OpenClaw 2026.7.35's code" in s["description"]]
    by_hand = [s for s in OWN if "expected: by hand from the spec" in s["description"]]
    assert len(by_openclaw) + len(by_hand) == len(OWN) and len(by_hand) <= 2
    detectors = {x["detection"]["detector"] for s in OWN for x in s["expected"] if x.get("detection", {}).get("stuck")}
    assert detectors == {"generic_repeat", "known_poll_no_progress", "ping_pong", "unknown_tool_repeat",
                         "global_circuit_breaker"}
    assert any(x.get("guard", {}).get("abort") for s in OWN for x in s["expected"])
    assert any("ignored" in x for s in OWN for x in s["expected"])
    assert any((x.get("warning") or {}).get("emitted") is False for s in OWN for x in s["expected"])


@pytest.mark.parametrize("scenario", OWN, ids=[s["name"] for s in OWN])
def test_own_scenario(scenario):
    mismatch = run_scenario(scenario)
    assert mismatch is None, str(mismatch)
