"""OpenClaw's own sessions of a plugin run import to the verdicts the plugin got live, result hashes included.

Fixtures (tests/fixtures/openclaw/live-<version>.*, made by ``make e2e-openclaw`` with
``LOOPWATCH_E2E_FIXTURES=tests/fixtures/openclaw``): real OpenClaw 2026.7.35 (its JSONL transcript and
trajectory sidecar) and 2026.9.6 (its SQLite session store, a ``VACUUM INTO`` copy), each as it wrote
them, gzipped, from a run with the loopwatch plugin and a scripted model repeating ``read {"path":
"missing.txt"}`` 30 times; ``*.live-calls.jsonl`` are the live verdicts of that run read from the
verdicts topic, one line per call (:func:`tests.e2e.compare.calls_of`).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from streams.detection import Engine, OpenClawConfig
from streams.importers import import_paths
from streams.offline.replay import Replayer
from tests.e2e.compare import calls_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openclaw"


def _unzip(name: str, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(FIXTURES / name) as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def _layout(version: str, home: Path) -> Path:
    """The fixture session where OpenClaw keeps it under its state directory; returns ``agents/``."""
    agents = home / "agents"
    if version.startswith("2026.9"):
        _unzip(f"live-{version}.sqlite.gz", agents / "main" / "agent" / "openclaw-agent.sqlite")
    else:
        with gzip.open(FIXTURES / f"live-{version}.jsonl.gz", "rt") as fh:
            session_id = json.loads(fh.readline())["id"]
        _unzip(f"live-{version}.jsonl.gz", agents / "main" / "sessions" / f"{session_id}.jsonl")
        _unzip(f"live-{version}.trajectory.jsonl.gz", agents / "main" / "sessions" / f"{session_id}.trajectory.jsonl")
    return agents


@pytest.mark.parametrize("version,profile", [("2026.7.35", "openclaw-2026.7"), ("2026.9.6", "openclaw-2026.9.6")])
def test_replay_of_openclaws_own_session_gives_the_plugins_live_verdicts(version, profile, tmp_path):
    config = OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}, "options": {"profile": profile}})
    replayer = Replayer(Engine(config), key_by="run")
    errors: list = []
    events = list(import_paths("openclaw", [_layout(version, tmp_path)], errors.append))
    assert errors == []
    records = [replayer.apply(event, event["event_id"]) for event in events]
    live = {}
    for line in (FIXTURES / f"live-{version}.live-calls.jsonl").read_text().splitlines():
        call = json.loads(line)
        live[call.pop("tool_call_id")] = call
    assert calls_of(records) == live
    assert list(live) == [f"call_{n}" for n in range(1, 31)]
    # the tool threw (a missing file) 20 times: one error hash, the message OpenClaw's engine hashed
    hashes = {live[f"call_{n}"]["result_hash"] for n in range(1, 21)}
    assert len(hashes) == 1 and next(iter(hashes)).startswith("error:")
    expected = ["allow"] * 10 + ["warn"] + ["allow"] * 9 + (
        ["block", "abort"] + ["abort"] * 8 if profile == "openclaw-2026.9.6" else ["block"] * 10)
    assert [live[f"call_{n}"]["verdict"] for n in range(1, 31)] == expected
