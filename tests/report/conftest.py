"""Synthetic fleet for the report tests: events as an importer would yield them (with ``source``).

Four sessions, replayed under ``SENSITIVE`` (warning 3, critical 5, unknown 5, global 8):

* ``s1`` run ``r1`` (rec/s1.jsonl lines 10, 12, ..., 20): ``exec ls`` six times, identical
  result: calls 4 and 5 suppressed generic warnings (counts 3, 4), call 6 blocked (count 5).
* ``s2`` run ``r2`` (rec/s2.jsonl lines 1-3): three different calls, nothing;
  run ``r3`` (lines 5-7): ``read a``, ``read b``, ``read a``: a suppressed ping-pong warning (count 3).
* ``s3`` run ``r4`` (rec/s3.jsonl): compaction at line 2, then ``read x`` three times with the
  same result (lines 3-5): the post-compaction guard aborts the run at line 5.
* ``s4`` run ``r5`` (rec/s4.jsonl lines 1-11): ``exec make test`` eleven times, results always
  different: suppressed generic warnings at calls 4-10 (counts 3-9), emitted at call 11 (count 10).

``worker_verdicts``: the same fleet's verdicts as the worker publishes them, read back with
``loopwatch tail verdicts --json``.
"""

import json
from pathlib import Path

import pytest

SENSITIVE = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5,
                                          "unknownToolThreshold": 5, "globalCircuitBreakerThreshold": 8}}}
DEFAULTS_ON = {"tools": {"loopDetection": {"enabled": True}}}


def _exec_result(text: str) -> dict:
    return {"content": [{"type": "text", "text": text}],
            "details": {"status": "completed", "exitCode": 0, "aggregated": text}}


def _call(session, run, path, line, tool, args, result, n=0):
    return {"type": "tool_call", "run_id": run, "session_id": session, "tool_call_id": f"{session}-{line}",
            "tool_name": tool, "args": args, "result": result, "error": None,
            "event_id": f"{session}:{line}:{n}", "source": {"path": path, "line": line}}


def fleet_events() -> list[dict]:
    ev = []
    for i in range(6):
        ev.append(_call("s1", "r1", "rec/s1.jsonl", 10 + 2 * i, "exec", {"command": "ls"}, _exec_result("a.txt")))
    for i, cmd in enumerate(["pwd", "whoami", "date"]):
        ev.append(_call("s2", "r2", "rec/s2.jsonl", 1 + i, "exec", {"command": cmd}, _exec_result(cmd)))
    for i, p in enumerate(["a", "b", "a"]):
        ev.append(_call("s2", "r3", "rec/s2.jsonl", 5 + i, "read", {"path": p}, {"content": [{"type": "text", "text": p}]}))
    ev.append({"type": "compaction_retry", "run_id": "r4", "session_id": "s3", "event_id": "s3:2:0",
               "source": {"path": "rec/s3.jsonl", "line": 2}})
    for i in range(3):
        ev.append(_call("s3", "r4", "rec/s3.jsonl", 3 + i, "read", {"path": "x"}, {"content": [{"type": "text", "text": "x"}]}))
    for i in range(11):
        ev.append(_call("s4", "r5", "rec/s4.jsonl", 1 + i, "exec", {"command": "make test"}, _exec_result(f"run {i}")))
    return ev


@pytest.fixture
def events_file(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in fleet_events()))
    return path


@pytest.fixture
def sensitive_config(tmp_path: Path) -> Path:
    path = tmp_path / "sensitive.json"
    # JSON5, as users write openclaw.json
    path.write_text("// loop detection tuned for the tests\n" + json.dumps(SENSITIVE).replace('"enabled"', "enabled") + "\n")
    return path


@pytest.fixture
def defaults_on_config(tmp_path: Path) -> Path:
    path = tmp_path / "defaults-on.json"
    path.write_text(json.dumps(DEFAULTS_ON))
    return path


@pytest.fixture
def sensitive_records() -> list[dict]:
    from streams.detection import Engine, load_config
    from streams.offline.replay import Replayer
    import tempfile, os

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(SENSITIVE, fh)
    try:
        replayer = Replayer(Engine(load_config(fh.name)))
    finally:
        os.unlink(fh.name)
    return [replayer.apply(e, e["event_id"]) for e in fleet_events()]


@pytest.fixture
def worker_verdicts(sensitive_config) -> list[dict]:
    """The fleet's verdicts as the worker publishes them (JSON codec, keyed by run, input partition
    crc32(key) % 3), each prefixed as ``tail --json`` does with the verdict's partition, offset and
    timestamp on the verdicts topic."""
    import zlib

    from streams.detection import Engine, SessionState, load_config
    from streams.worker.processor import Processor
    from streams.worker.records import Source

    processor = Processor(Engine(load_config(str(sensitive_config))), key_by="run", codec="json")
    states: dict = {}
    offsets: dict = {}
    out = []
    for event in fleet_events():
        key = processor.state_key(None, event)
        partition = zlib.crc32(key) % 3
        offset = offsets[partition] = offsets.get(partition, -1) + 1
        outcome = processor.apply(key, event, Source("loopwatch.events", partition, offset),
                                  states.setdefault(key, SessionState()))
        out.append({"partition": partition, "offset": offset, "timestamp": 1764460900000 + len(out),
                    **json.loads(outcome.verdict)})
    return out
