"""`loopwatch demo --once` end to end: broker, worker subprocess, example fleet, verdicts.

Every example event must get the verdict the offline engine gives with the
worker's keying (`loopwatch replay --key-by run`), and every detector must fire.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from streams.wire.codecs import read_event_file
from streams.detection import Engine, load_config
from streams.offline.replay import Replayer
from tests.private_broker import free_port as _free_port

pytestmark = [pytest.mark.kafka]


async def _topics(bootstrap: str) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return list(await admin.list_topics())
    finally:
        await admin.close()

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "examples" / "events.jsonl"
CONFIG = ROOT / "examples" / "openclaw.json"




def _view(record: dict) -> tuple:
    detection = record.get("detection") or {}
    return (record["type"], record.get("tool_name"), record["verdict"], record.get("decision"),
            detection.get("detector"), detection.get("level"), detection.get("count"),
            (record.get("warning") or {}).get("emitted"), (record.get("guard") or {}).get("abort"))


def _expected() -> dict[str, tuple]:
    replayer = Replayer(Engine(load_config(CONFIG)), key_by="run")
    return {r.event["event_id"]: _view(replayer.apply(r.event, r.event["event_id"]))
            for r in read_event_file(EVENTS)}


@pytest.mark.timeout(240)
def test_demo_once_gives_the_offline_verdict_for_every_example_event(kafka_bootstrap, tmp_path):
    port = _free_port()
    out = tmp_path / "verdicts.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", "from streams.cli import main; main()", "demo", "--once", "--rate", "0",
         "--bootstrap", kafka_bootstrap, "--metrics-port", str(port), "--verdicts-out", str(out),
         "--timeout", "90"],
        cwd=ROOT, capture_output=True, text=True, timeout=220,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    got = {r["event_id"]: _view(r) for r in map(json.loads, out.read_text().splitlines())}
    expected = _expected()
    assert len(expected) == 104
    assert got == expected
    verdicts = [v[2] for v in expected.values()]
    assert (verdicts.count("block"), verdicts.count("abort"), verdicts.count("warn")) == (6, 1, 3)
    assert {v[4] for v in expected.values()} >= {
        "generic_repeat", "known_poll_no_progress", "ping_pong", "unknown_tool_repeat"}
    # one readable line per verdict, then the summary and where the metrics are
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 1 + 104  # header + one per event
    assert any("run-unknown" in l and "BLOCK" in l and "unknown_tool_repeat critical x10" in l for l in lines)
    assert any("run-compaction" in l and "ABORT" in l and "compaction_loop_persisted" in l for l in lines)
    assert "104 verdict(s) received" in proc.stderr
    assert f"http://127.0.0.1:{port}/metrics (Prometheus text; loopwatch_verdicts_total = 104)" in proc.stderr
    # events, verdicts, loop-events, dead-letters, fleet-events, rekey, fleet-signals and two changelogs
    assert "deleted 9 demo topic(s)" in proc.stderr
    app_id = proc.stderr.split("starting worker ", 1)[1].split()[0]
    left = [t for t in asyncio.run(_topics(kafka_bootstrap)) if t.startswith((f"{app_id}.", f"{app_id}-"))]
    assert left == []
    assert not (ROOT / ".work" / "demo" / app_id).exists()  # its log and data: removed after a good run
    assert ("replay --key-by run --config examples/openclaw.json examples/events.jsonl"
            in proc.stderr.split("the same verdicts offline, without Kafka: ", 1)[1].splitlines()[0])


def _workers_of(app_id: str) -> list[int]:
    """Pids of live processes whose environment names ``app_id`` as LOOPWATCH_APP_ID."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"LOOPWATCH_APP_ID={app_id}".encode() in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def _wait_for(predicate, timeout: float) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["output-closed", "sigkill"])
def test_demo_never_leaves_its_worker_behind(kafka_bootstrap, how):
    """Piped into `head` (its output closes) or killed outright, the demo's worker goes too."""
    import os
    import signal
    import uuid

    app_id = f"loopwatch-demo-test-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [sys.executable, "-c", "from streams.cli import main; main()", "demo", "--rate", "5",
         "--bootstrap", kafka_bootstrap, "--metrics-port", "0", "--app-id", app_id, "--timeout", "90"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        first = proc.stdout.readline()  # the header: the worker is running and verdicts flow
        assert first.startswith(b"[   #]"), first
        assert _workers_of(app_id), "the demo's worker should be running"
        if how == "output-closed":
            proc.stdout.close()
            proc.stderr.close()
        else:
            proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        assert _wait_for(lambda: not _workers_of(app_id), 40), f"worker still running: {_workers_of(app_id)}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _workers_of(app_id):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(120)
def test_demo_says_which_events_the_worker_refused_instead_of_waiting_for_their_verdicts(kafka_bootstrap, tmp_path):
    events = tmp_path / "events.jsonl"
    events.write_text(
        '{"type": "tool_call", "run_id": "r"}\n'
        '{"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": "c1", "tool_name": "read", '
        '"args": {}, "result": null}\n', encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-c", "from streams.cli import main; main()", "demo", "--once", "--rate", "0",
         "--bootstrap", kafka_bootstrap, "--metrics-port", "0", "--events", str(events), "--timeout", "60"],
        cwd=ROOT, capture_output=True, text=True, timeout=110,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    dead = [line for line in proc.stdout.splitlines() if line.startswith("[DEAD]")]
    assert len(dead) == 1 and dead[0].endswith("schema: an event needs a session_id (or a session_key)")
    assert "2 event(s) produced" in proc.stderr and "1 verdict(s) received, 1 refused by the worker" in proc.stderr
    assert "did not arrive" not in proc.stderr  # it did not wait out --timeout
