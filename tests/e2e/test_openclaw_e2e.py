"""Real OpenClaw (2026.7.35 and 2026.9.6 from the npm registry) with the loopwatch plugin, a scripted model
that repeats one failing tool call, the real broker, a worker and ``loopwatch gateway``.

For each version: the plugin installs with the commands of docs/runners/openclaw.md and tells
loopwatch its host's profile; the loop is blocked at the predicted call; after the block no
further call of the run executes (every later result in OpenClaw's own session is a block, none
is the tool's); on 2026.9.6 the terminal block ends the run for loopwatch (``run_ended`` on every
later call) and the model reads OpenClaw's texts (warning note, recovery and terminal paragraphs);
and the live verdicts equal ``loopwatch replay`` of OpenClaw's own recorded session (JSONL
transcript on 2026.7.35, the SQLite session store on 2026.9.6) with the same config, call by call:
decision, detector, count, model text, run end, and the result hash.

Marker ``e2e`` (not in the default run): ``make e2e-openclaw`` (or ``make e2e``) installs what it
needs into the cache folder and runs this file. About 4 minutes on 2 cores once installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from streams.detection import Engine, OpenClawConfig
from streams.wire.codecs import unpack_msgpack
from tests.e2e.openclaw_host import VERSIONS, OpenClawHost, install, uses_entries
from tests.e2e.openclaw_model import ScriptedModel, serve
from tests.worker_harness import consume_all, running_worker, worker_settings

pytestmark = [pytest.mark.e2e, pytest.mark.kafka]

LOOPWATCH = Path(sys.executable).with_name("loopwatch")
CALLS = 30  # the scripted model's tool calls before it answers with text
TOKEN = "e2e-gateway-token"
TOOL, ARGS = "read", {"path": "missing.txt"}
NOTE = "[System note: Tool-loop warning after 10 repeated calls. Change your approach or stop if you are not making progress.]"
RECOVERY = ("\n\nDo not repeat this exact tool action. Reassess the task. You may answer the user, ask for "
            "clarification, or continue with a different tool or different arguments.")
TERMINAL = "\n\nCritical tool-loop recovery failed because another critical loop was detected. This run is stopping now."


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _healthy(url: str, gateway: asyncio.subprocess.Process, timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        if gateway.returncode is not None:
            raise AssertionError(f"loopwatch gateway exited with {gateway.returncode}")
        try:
            status = await asyncio.to_thread(lambda: urllib.request.urlopen(f"{url}/healthz", timeout=2).status)
            if status == 200:
                return
        except OSError:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"loopwatch gateway not healthy at {url} in {timeout} s")
        await asyncio.sleep(0.2)


def _by_call(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per tool call id: what its tool_call verdict said and the result hash loopwatch recorded for it."""
    calls: dict[str, dict[str, Any]] = {}
    for record in records:
        call_id = record.get("tool_call_id")
        entry = calls.setdefault(call_id, {"hash": None})
        if record.get("type") == "tool_call":
            detection = record.get("detection") or {}
            entry.update(verdict=record.get("verdict"), decision=record.get("decision"),
                         detector=detection.get("detector"), count=detection.get("count"),
                         block_text=record.get("block_text"), run_ended=(record.get("run_ended") or {}).get("by"),
                         ids=(record.get("run_id"), record.get("session_id")))
        outcome = record.get("outcome") or {}
        if outcome.get("recorded"):
            entry["hash"] = outcome.get("result_hash")
    return calls


def _stored_result_text(state_dir: Path, call_id: str) -> str:
    """The text OpenClaw 2026.9 stored for ``call_id``'s tool result (read-only, as the importer opens it)."""
    database = next(state_dir.glob("agents/*/agent/openclaw-agent.sqlite"))
    with contextlib.closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as db:
        for (text,) in db.execute("SELECT event_json FROM transcript_events WHERE event_json IS NOT NULL ORDER BY seq"):
            message = json.loads(text).get("message") or {}
            if message.get("role") == "toolResult" and message.get("toolCallId") == call_id:
                return "\n".join(part.get("text", "") for part in message.get("content", []))
    raise AssertionError(f"no stored result for {call_id}")


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("version", VERSIONS)
def test_openclaw_loop_is_blocked_ends_and_replays_as_it_ran(version, kafka_bootstrap, tmp_path):
    node_bin, executable = install(version)
    nine = uses_entries(version)
    profile = "openclaw-2026.9.6" if nine else "openclaw-2026.7"
    lw_config = {"tools": {"loopDetection": {"enabled": True}}, "options": {"profile": profile}}
    config_file = tmp_path / "loopwatch.json"
    config_file.write_text(json.dumps(lw_config))

    model = ScriptedModel(TOOL, ARGS, CALLS, tmp_path / "model.jsonl")
    server = serve(model)
    host = OpenClawHost(version, tmp_path / "openclaw", node_bin, executable)
    host.write_config(f"http://127.0.0.1:{server.server_address[1]}/v1")
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2)

    async def run() -> tuple[subprocess.CompletedProcess[str], list[str], list[dict[str, Any]]]:
        async with running_worker(settings, Engine(OpenClawConfig(lw_config))):
            port = _free_port()
            gateway = await asyncio.create_subprocess_exec(
                str(LOOPWATCH), "gateway", "--bootstrap", kafka_bootstrap, "--port", str(port),
                "--events-topic", settings.input_topics[0], "--verdicts-topic", settings.verdicts_topic,
                "--key-by", "session", "--timeout", "10",
                env={**os.environ, "LOOPWATCH_GATEWAY_TOKEN": TOKEN},
                stdout=asyncio.subprocess.DEVNULL, stderr=(tmp_path / "gateway.log").open("wb"))
            try:
                url = f"http://127.0.0.1:{port}"
                await _healthy(url, gateway)
                commands = await asyncio.to_thread(host.install_plugin, {"gatewayUrl": url, "token": TOKEN, "timeoutMs": 12000})
                turn = await asyncio.to_thread(host.agent_turn, "Read missing.txt")
                records = await consume_all(kafka_bootstrap, settings.verdicts_topic, 10**6, timeout=15)
            finally:
                gateway.terminate()
                await gateway.wait()
        return turn, commands, [unpack_msgpack(record.value) for record in records]

    try:
        turn, commands, live = asyncio.run(run())
    finally:
        server.shutdown()
    (tmp_path / "openclaw.out").write_text(turn.stdout + "\n----\n" + turn.stderr)
    assert turn.returncode == 0, turn.stderr[-3000:]
    assert f"OpenClaw {version}, profile {profile}" in turn.stderr, "the plugin named its host's version and profile"

    # what OpenClaw recorded: the session as loopwatch's importer reads it (JSONL up to 2026.7.x, SQLite from 2026.9)
    sessions = host.state_dir / "agents"  # agents/<id>/sessions/*.jsonl (2026.7), agents/<id>/agent/*.sqlite (2026.9)
    imported = subprocess.run([str(LOOPWATCH), "import", "--format", "openclaw", str(sessions)],
                              capture_output=True, text=True, check=True).stdout
    events = [json.loads(line) for line in imported.splitlines()]
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [c["tool_call_id"] for c in calls] == [f"call_{n}" for n in range(1, CALLS + 1)]
    stores = sorted({Path(e["source"]["path"]).name.endswith(".sqlite") for e in events})
    assert stores == [nine], "2026.9 keeps sessions in SQLite, 2026.7 in JSONL"

    # executed: calls 1-20 (the tool's own error); blocked before running: 21 on, none executes again
    outcome_of = {c["tool_call_id"]: c for c in calls}
    for e in events:
        if e["type"] == "tool_result":
            outcome_of[e["tool_call_id"]] = e
    ran = [n for n in range(1, CALLS + 1) if str(outcome_of[f"call_{n}"]["error"]).startswith("File not found")]
    assert ran == list(range(1, 21)), f"calls that executed: {ran}"

    # live verdicts equal the replay of OpenClaw's own session, call by call, result hashes included
    replayed = subprocess.run([str(LOOPWATCH), "replay", "--format", "openclaw", "--config", str(config_file),
                               str(sessions)], capture_output=True, text=True, check=True).stdout
    replay = _by_call([json.loads(line) for line in replayed.splitlines()])
    live_calls = _by_call(live)
    assert sorted(live_calls, key=lambda c: int(c.split("_")[1])) == [f"call_{n}" for n in range(1, CALLS + 1)]
    assert live_calls == replay
    assert {c["hash"] for n, c in live_calls.items() if int(n.split("_")[1]) <= 20} != {None}
    assert all(r.get("profile", profile) == profile for r in live)

    by_n = {int(n.split("_")[1]): c for n, c in live_calls.items()}
    assert [by_n[n]["verdict"] for n in range(1, 21)] == ["allow"] * 10 + ["warn"] + ["allow"] * 9
    assert (by_n[21]["verdict"], by_n[21]["detector"], by_n[21]["count"]) == ("block", "generic_repeat", 20)

    # what the model read after each call (the request that followed it)
    told = {}
    for line in (tmp_path / "model.jsonl").read_text().splitlines():
        request = json.loads(line)
        last = request["last_tool"]
        if last:
            text = last["content"] if isinstance(last["content"], str) else "\n".join(
                part.get("text", "") for part in last["content"])
            told[f"call_{last['tool_call_id'].removeprefix('call').lstrip('_')}"] = text  # sent as call21
    if nine:
        # the warning's note: in OpenClaw's session, on call 11's result; the model reads it from the
        # session's next run on (tool_result_persist rewrites the stored result, not the live one)
        assert _stored_result_text(host.state_dir, "call_11").endswith("\n" + NOTE)
        assert NOTE not in told["call_11"]
        assert by_n[21]["block_text"].endswith(RECOVERY) and told["call_21"] == by_n[21]["block_text"]
        assert (by_n[22]["verdict"], by_n[22]["count"]) == ("abort", 21)
        assert told["call_22"] == by_n[22]["block_text"] and told["call_22"].endswith(TERMINAL)
        assert all(by_n[n]["verdict"] == "abort" and by_n[n]["run_ended"] == "generic_repeat" for n in range(23, CALLS + 1))
        assert all(told[f"call_{n}"] == told["call_23"] for n in range(23, CALLS + 1))
        assert "ended" in told["call_23"]
    else:
        assert told["call_21"].startswith("CRITICAL: Called read with identical arguments and identical outcomes 20 times.")
        assert all(by_n[n]["verdict"] == "block" for n in range(21, CALLS + 1))
    print(f"\nOpenClaw {version}: installed with {commands}; {len(live)} live verdicts = replay; "
          f"calls executed 1-20, blocked 21-{CALLS}; told after call 11: {told.get('call_11', '')[-140:]!r}")
