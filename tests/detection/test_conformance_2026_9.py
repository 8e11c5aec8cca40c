"""The 2026.9.6 behaviour profile against its conformance scenarios (2026.9 delta, §9/10).

The shared files (64 scenarios by rule, 92 re-expected shared ones; skipped when absent) and the
project's own hand-written scenarios, which run everywhere.
"""

from __future__ import annotations

import pytest

from streams.detection.profiles import OPENCLAW_2026_9_6
from streams.offline.conformance import load_scenarios, run_scenario
from tests.shared_vectors import FILES_2026_9, OWN_2026_9, shared_scenarios, skip_without

BY_RULE, SHARED = (shared_scenarios(name) for name in FILES_2026_9)
OWN = list(load_scenarios(OWN_2026_9))


@skip_without(FILES_2026_9[0])
@skip_without(FILES_2026_9[1])
def test_shared_files_hold_the_documented_scenarios():
    assert (len(BY_RULE), len(SHARED)) == (64, 92)
    assert {s.get("profile") for s in BY_RULE + SHARED} == {OPENCLAW_2026_9_6}


@skip_without(FILES_2026_9[0])
@pytest.mark.parametrize("scenario", BY_RULE, ids=[s["name"] for s in BY_RULE])
def test_scenario_by_rule(scenario):
    mismatch = run_scenario(scenario)
    assert mismatch is None, str(mismatch)


@skip_without(FILES_2026_9[1])
@pytest.mark.parametrize("scenario", SHARED, ids=[s["name"] for s in SHARED])
def test_shared_scenario_re_expected(scenario):
    mismatch = run_scenario(scenario)
    assert mismatch is None, str(mismatch)


@pytest.mark.parametrize("scenario", OWN, ids=[s["name"] for s in OWN])
def test_own_scenario(scenario):
    assert scenario["profile"] == OPENCLAW_2026_9_6
    mismatch = run_scenario(scenario)
    assert mismatch is None, str(mismatch)


def test_a_scenario_without_profile_is_judged_by_2026_7():
    # the same events, expected as 2026.9.6 decides them, fail under the default profile
    scenario = next(s for s in OWN if s["name"] == "own-recovery-then-terminal")
    mismatch = run_scenario({**scenario, "profile": None})
    assert mismatch is not None


def test_an_unknown_profile_is_a_mismatch_not_a_crash():
    scenario = {**OWN[0], "profile": "openclaw-2027.1"}
    mismatch = run_scenario(scenario)
    assert mismatch is not None and mismatch.field == "(profile)"
    assert "openclaw-2027.1" in str(mismatch)
