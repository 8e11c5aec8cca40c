"""Recorded Claude Code and Codex sessions, replayed as the hook calls their runner would have made, get
through the gateway (real broker, running worker) the decisions and detections ``loopwatch replay --format``
gives the same sessions with the same config.

The recordings are read from ``../shared/realdata`` beside the repository or ``$LOOPWATCH_REALDATA``;
the test is skipped without them. tests/runners/recorded_hooks.py turns a recording into hook calls.
The configuration puts every detector at a low threshold, so that calls of the recordings get
detections and blocks (with OpenClaw's defaults every call of these recordings is allowed).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from streams.detection import Engine, OpenClawConfig
from streams.importers import import_paths, iter_files
from streams.offline.replay import Replayer
from streams.wire.codecs import decode_event
from tests.runners.gateway_support import gateway_on_worker
from tests.runners.recorded_hooks import claude_code_hooks, codex_hooks, decision_of, replay_decision
from tests.worker_harness import consume_all

REALDATA = Path(os.environ.get("LOOPWATCH_REALDATA") or Path(__file__).resolve().parents[3] / "shared" / "realdata")

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.realdata,
    pytest.mark.skipif(not REALDATA.is_dir(), reason=f"no recorded sessions at {REALDATA}"),
]

CONFIGS = {
    "low-thresholds": OpenClawConfig({"tools": {"loopDetection": {
        "enabled": True, "warningThreshold": 2, "criticalThreshold": 3, "globalCircuitBreakerThreshold": 4,
        "unknownToolThreshold": 2, "postCompactionGuard": {"windowSize": 2}}}}),
}
# Codex runs no hooks for these tools (its plan tool and web search): they are not part of the live sequence.
NO_HOOK_TOOLS = {"update_plan", "web_search"}


def _detection(record: dict) -> tuple:
    detection = record.get("detection") or {}
    return (record.get("run_id"), detection.get("detector"), detection.get("level"), detection.get("count"),
            record.get("blocked"))


def _expected(fmt: str, folder: Path, config: OpenClawConfig) -> dict[tuple, tuple]:
    """(file name, tool call id) -> (decision, detection) by replay of ``folder`` (``loopwatch replay --format``),
    keyed by session as replay's default."""
    replayer = Replayer(Engine(config), key_by="session")
    expected = {}
    for event in import_paths(fmt, [folder]):
        if fmt == "codex" and event.get("tool_name") in NO_HOOK_TOOLS:
            continue
        record = replayer.apply(event, event["event_id"])
        if event["type"] == "tool_call":
            key = (Path(event["source"]["path"]).name, event["tool_call_id"])
            expected[key] = (replay_decision(record["verdict"]), _detection(record))
    return expected


@pytest.mark.timeout(300)
@pytest.mark.parametrize("config_name", list(CONFIGS))
def test_recorded_sessions_through_the_gateway_hooks_match_replay(kafka_bootstrap, tmp_path, config_name):
    config = CONFIGS[config_name]
    folders = {"claude-code": REALDATA / "claude-code", "codex": REALDATA / "codex-cli"}
    # the files in the order replay reads them (a Claude Code main log before its sub-agents' logs)
    formats = {"claude-code": (list(iter_files("claude-code", [folders["claude-code"]])), claude_code_hooks),
               "codex": (list(iter_files("codex", [folders["codex"]])), codex_hooks)}

    async def main():
        got, calls, sent = {}, 0, 0
        async with gateway_on_worker(kafka_bootstrap, tmp_path, config, key_by="session") as (http, settings):
            for fmt, (files, hooks) in formats.items():
                for path in files:
                    for payload in (hooks(path, tmp_path) if fmt == "claude-code" else hooks(path)):
                        response = await http.post(f"/v1/hooks/{fmt}", json=payload)
                        assert response.status == 200, await response.text()
                        output = await response.json()
                        call_id = payload.get("tool_use_id")
                        if fmt == "codex" and call_id:
                            call_id = call_id.split("_", 2)[2]  # call_<turn>_<item id> -> the item id
                        name = payload["hook_event_name"]
                        sent += name != "UserPromptSubmit"  # every other call here sends one event
                        if name == "PreToolUse":
                            calls += 1
                            got[(path.name, call_id)] = decision_of(output)
                        elif name.startswith("PostToolUse") and decision_of(output) == "abort":
                            got[(path.name, call_id)] = "abort"
            records = [decode_event(m.value) for m in
                       await consume_all(kafka_bootstrap, settings.verdicts_topic, count=sent, timeout=60)]
            assert len(records) == sent and calls > 300
        return got, records

    got, records = asyncio.run(main())
    detections = {}
    for record in records:
        if record.get("type") == "tool_call":
            detections[record["tool_call_id"]] = _detection(record)
    for fmt, (files, _) in formats.items():
        expected = _expected(fmt, folders[fmt], config)
        assert expected, f"no {fmt} tool calls in {REALDATA}"
        mine = {key: got[key] for key in expected}
        assert mine == {key: decision for key, (decision, _) in expected.items()}, fmt
        if fmt == "claude-code":  # tool_use ids are unique across the recordings: compare run ids and detections
            # (the run ids are the importer's: read from the transcript as Claude Code writes it)
            assert {key: detections[key[1]] for key in expected} == {key: d for key, (_, d) in expected.items()}
