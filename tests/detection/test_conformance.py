"""Every scenario of the golden vectors (Spec §10), one pytest case each."""

from pathlib import Path

import pytest

from streams.offline.conformance import load_scenarios, run_scenario

VECTORS = Path(__file__).resolve().parents[1] / "fixtures" / "vectors.jsonl"
SCENARIOS = list(load_scenarios(VECTORS))


def test_vector_file_holds_the_documented_scenarios():
    # Spec header: 92 scenarios, 1,674 events.
    assert len(SCENARIOS) == 92
    assert sum(len(s["events"]) for s in SCENARIOS) == 1674
    assert len({s["name"] for s in SCENARIOS}) == 92


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario(scenario):
    mismatch = run_scenario(scenario)
    assert mismatch is None, str(mismatch)
