"""Every scenario of the golden vectors (Spec §10), one pytest case each."""

from pathlib import Path

import pytest

from tests.shared_vectors import shared_path, shared_scenarios, skip_without
from streams.offline.conformance import load_scenarios, run_scenario

VECTORS = shared_path("vectors.jsonl")  # not part of the project: no scenarios where absent
SCENARIOS = shared_scenarios("vectors.jsonl")


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
