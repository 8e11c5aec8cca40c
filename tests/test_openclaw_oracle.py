"""loopwatch against OpenClaw's own loop-detection code (bench/difffuzz.py, bench/openclaw_oracle.mjs).

Marker ``oracle``: not run by ``make test``; ``make test-oracle`` runs it. Needs an OpenClaw 2026.7.x install
(``LOOPWATCH_OPENCLAW_DIR``: its ``node_modules/openclaw``) and node 22+ (``LOOPWATCH_OPENCLAW_NODE``, else
``node`` on ``PATH``); skipped, saying why, without them. ``LOOPWATCH_OPENCLAW_9_DIR`` (an OpenClaw 2026.9.x
install) adds the 2026.9.6 profile's checks, its detectors and its embedded runner past the first block (tests
without it skip). ``LOOPWATCH_ORACLE_COUNT`` (default 400) random
scenarios per seed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bench.difffuzz import (Oracle, first_difference, generate, generate_2026_9, generate_2026_9_runner,
                           generate_2026_9_runner_wide, generate_wide, runner_differences)
from streams.offline.conformance import load_scenarios
from tests.shared_vectors import FILES_2026_9, OWN_2026_7, OWN_2026_9, shared_path, shared_scenarios, skip_without

OPENCLAW = os.environ.get("LOOPWATCH_OPENCLAW_DIR", "")
OPENCLAW_9 = os.environ.get("LOOPWATCH_OPENCLAW_9_DIR", "")
NODE = os.environ.get("LOOPWATCH_OPENCLAW_NODE") or shutil.which("node")
COUNT = int(os.environ.get("LOOPWATCH_ORACLE_COUNT", "400"))

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(not OPENCLAW or not (Path(OPENCLAW) / "dist").is_dir(),
                       reason="no OpenClaw install: set LOOPWATCH_OPENCLAW_DIR to an openclaw@2026.7.x "
                              "node_modules/openclaw (make test-oracle uses make e2e-openclaw's)"),
    pytest.mark.skipif(not NODE, reason="no node: set LOOPWATCH_OPENCLAW_NODE"),
]


@pytest.fixture(scope="module")
def oracle():
    with Oracle(OPENCLAW, NODE) as running:
        yield running


@skip_without("vectors.jsonl")
def test_the_oracle_gives_the_shared_vectors_expectations(oracle):
    # the harness's glue is checked on the 92 shared scenarios, whose expectations came from OpenClaw's full
    # code; the one it cannot reproduce models a channel plugin (options.channelSendTools), which it has not
    differing = []
    for scenario in load_scenarios(shared_path("vectors.jsonl")):
        got = oracle.expected(scenario)
        want = [{k: v for k, v in entry.items()} for entry in scenario["expected"]]
        if got != want:
            differing.append(scenario["name"])
    assert differing == ["channel-send-tool-option"]


def _agree(oracle: Oracle, make, seed: int, count: int) -> None:
    found = first_difference(oracle, make, seed, count)
    if found is not None:
        mismatch, small = found
        pytest.fail(f"{mismatch}\nminimised: {json.dumps(small, ensure_ascii=False)}")


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_loopwatch_gives_openclaws_verdicts_on_random_scenarios(oracle, seed):
    _agree(oracle, generate, seed, COUNT)


def test_the_own_2026_7_scenarios_expect_what_openclaws_code_does(oracle):
    # tests/fixtures/vectors-2026.7-own.jsonl (bench/own_vectors_2026_7.py): every scenario whose description says
    # its expectations came from OpenClaw's code still gets exactly them from it
    checked = 0
    for scenario in load_scenarios(OWN_2026_7):
        if "expected: OpenClaw 2026.7.35's code" in scenario["description"]:
            assert oracle.expected(scenario) == scenario["expected"], scenario["name"]
            checked += 1
    assert checked >= 40


def test_loopwatch_gives_openclaws_verdicts_past_its_bounds(oracle):
    # more than 256 warning keys, 1,024 blocked deferred calls, many runs with guards
    _agree(oracle, generate_wide, 7, 6)


NINE = pytest.mark.skipif(not OPENCLAW_9 or not (Path(OPENCLAW_9) / "dist").is_dir(),
                          reason="no OpenClaw 2026.9.x install: set LOOPWATCH_OPENCLAW_9_DIR")


@NINE
def test_the_2026_9_6_profile_detects_as_that_releases_module():
    with Oracle(OPENCLAW_9, NODE, detector_only=True) as nine:
        _agree(nine, generate_2026_9, 21, COUNT)


@pytest.fixture(scope="module")
def runner():
    with Oracle(OPENCLAW_9, NODE, runner=True) as running:
        yield running


@NINE
def test_the_runner_gives_the_2026_9_6_scenarios_expectations(runner):
    # the runner harness's glue (one-call turns, attempts per run, continuation after a terminal block) against the
    # scenarios produced from 2026.9.6 by other harnesses; the own file's scenarios it decides, too
    scenarios = [s for name in FILES_2026_9 for s in shared_scenarios(name)] + list(load_scenarios(OWN_2026_9))
    checked, differing = runner_differences(runner, scenarios)
    assert differing == []
    assert checked >= (150 if len(scenarios) > 100 else 5)


@NINE
@pytest.mark.parametrize("seed", [22, 23])
def test_the_2026_9_6_profile_blocks_and_recovers_as_that_releases_runner(runner, seed):
    # every tool call compared, past the recovery block, the terminal block and the calls after it
    _agree(runner, generate_2026_9_runner, seed, COUNT)


@NINE
def test_the_2026_9_6_runner_past_its_bounds(runner):
    # more than 256 warning keys in one session: which key is dropped when one is set again
    _agree(runner, generate_2026_9_runner_wide, 8, 3)
