"""Recorded sessions, imported and published through Kafka, get the verdicts of the offline replay."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import msgpack
import pytest
from click.testing import CliRunner

from streams.commands import loopwatch
from streams.offline.conformance import spec_view
from streams.detection import Engine, load_config
from streams.importers import import_paths
from streams.offline.replay import Replayer

from tests.worker_harness import consume_all, running_worker, worker_settings

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"
SENSITIVE = {"tools": {"loopDetection": {
    "enabled": True, "warningThreshold": 3, "criticalThreshold": 5,
    "unknownToolThreshold": 5, "globalCircuitBreakerThreshold": 8}}}

pytestmark = pytest.mark.kafka


def _imported_events() -> list[dict]:
    events: list[dict] = []
    for fmt in ("openclaw", "claude-code", "codex", "swe-agent"):
        events.extend(import_paths(fmt, [FIXTURES / fmt]))
    # The small fixtures hold few loops: retry one imported call the way a stuck agent would.
    call = next(e for e in events if e["type"] == "tool_call" and e.get("result") is not None)
    events.extend({**call, "event_id": f"{call['event_id']}:retry{n}", "tool_call_id": f"retry-{n}"}
                  for n in range(7))
    return events


def test_imported_sessions_through_produce_and_worker_equal_offline_replay(kafka_bootstrap: str,
                                                                           tmp_path: Path) -> None:
    events = _imported_events()
    events_file = tmp_path / "events.jsonl"
    events_file.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    config_file = tmp_path / "openclaw.json"
    config_file.write_text(json.dumps(SENSITIVE), encoding="utf-8")
    settings = worker_settings(kafka_bootstrap, tmp_path, config=config_file)

    async def through_kafka() -> list:
        async with running_worker(settings):
            result = await asyncio.to_thread(
                CliRunner().invoke, loopwatch,
                ["produce", "--bootstrap", kafka_bootstrap, "--topic", settings.input_topics[0], "-q",
                 str(events_file)],
            )
            assert result.exit_code == 0, result.output
            return await consume_all(kafka_bootstrap, settings.verdicts_topic, len(events), timeout=90)

    records = asyncio.run(through_kafka())
    online = {}
    for record in records:
        verdict = msgpack.unpackb(record.value, raw=False)
        online[verdict["event_id"]] = verdict

    replayer = Replayer(Engine(load_config(config_file)), key_by="run")
    offline = {event["event_id"]: replayer.apply(event) for event in events}

    assert len(online) == len(events)
    differing = [event_id for event_id, verdict in offline.items()
                 if {**spec_view(online[event_id]), "verdict": online[event_id]["verdict"]}
                 != {**spec_view(verdict), "verdict": verdict["verdict"]}]
    assert differing == []
    detections = sum(1 for v in offline.values() if v.get("detection", {}).get("stuck"))
    assert detections >= 3, "the fixtures should exercise the detectors"
