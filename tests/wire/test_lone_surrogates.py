"""Lone surrogates from JSON input: JSON (and JavaScript) carry them, UTF-8 and msgpack cannot.

An agent runner that slices a string through an emoji sends half of it; the
event is valid, OpenClaw hashes it (Spec §4.1 escapes it in the canonical
text), and the worker must give its verdict and checkpoint its state rather
than fail on it at every restart.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import msgpack
import pytest
from click.testing import CliRunner

from streams.commands import loopwatch
from streams.wire.codecs import decode_event, encode_json, record_encoder
from streams.detection import Engine, OpenClawConfig, SessionState
from streams.detection.canonical import digest
from streams.worker.processor import APPLIED, DEAD_LETTER, Processor
from streams.worker.records import Source
from streams.worker.states import decode_state, encode_state

HALF = "\ud83d"  # the high half of U+1F600
CALL = {"type": "tool_call", "event_id": f"e1{HALF}", "run_id": f"run{HALF}", "session_id": "s\udc00",
        "tool_call_id": f"c1{HALF}", "tool_name": f"read{HALF}", "args": {"path": HALF}, "result": f"ok{HALF}"}


def test_a_tool_name_prefix_with_a_lone_surrogate_is_kept_in_the_hash_string():
    # Spec §4.2: OpenClaw builds `${toolName}:${hex}` in JavaScript; the prefix is text, never encoded
    canonical = '{"path":"\\ud83d"}'.encode("ascii")
    assert digest({"path": HALF}, f"read{HALF}:") == f"read{HALF}:" + hashlib.sha256(canonical).hexdigest()


@pytest.mark.parametrize("codec", ["msgpack", "json"])
def test_the_verdict_carries_the_same_ids_and_the_state_round_trips(codec):
    processor = Processor(Engine(OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}})), codec=codec)
    state = SessionState()
    key = processor.state_key(None, CALL)
    assert key == b"run\xed\xa0\xbd"  # UTF-8 with surrogatepass, as `produce` and the client key it
    for offset in range(11):  # the 11th identical call: 10 before it, a warning (Spec §5.1, §5.2)
        call = dict(CALL, event_id=f"e{offset}{HALF}", tool_call_id=f"c{offset}{HALF}")
        outcome = processor.apply(key, call, Source("t", 0, offset), state)
        assert outcome.kind == APPLIED
    verdict = decode_event(outcome.verdict)  # as the client and `tail` read it
    assert (verdict["event_id"], verdict["run_id"], verdict["tool_call_id"], verdict["tool_name"]) == (
        f"e10{HALF}", f"run{HALF}", f"c10{HALF}", f"read{HALF}")
    assert verdict["verdict"] == "warn" and verdict["detection"]["count"] == 10
    assert [decode_event(e)["detector"] for e in outcome.loop_events] == ["generic_repeat"]
    assert verdict["args_hash"].startswith(f"read{HALF}:")
    restored = decode_state(encode_state(state, processor.engine))
    assert restored == state and restored.history[0].tool == f"read{HALF}"


def test_a_dead_letter_quoting_a_lone_surrogate_reads_back_escaped():
    outcome = Processor(Engine()).apply(b"k", {"type": HALF, "run_id": "r"}, Source("t", 0, 7), SessionState(),
                                        raw=b"{}")
    assert outcome.kind == DEAD_LETTER
    letter = msgpack.unpackb(outcome.dead_letter)  # strict UTF-8, as any consumer reads it
    assert letter["reason"] == "type must be one of tool_call, tool_result, compaction_retry, got '\\ud83d'"
    assert (letter["reason_class"], letter["source"], letter["key"]) == ("schema", {"topic": "t", "partition": 0,
                                                                                    "offset": 7}, b"k")


def test_encoders_fall_back_to_ascii_json_that_reads_back_the_same():
    for encode in (encode_json, record_encoder("json"), record_encoder("msgpack")):
        data = encode(CALL)
        assert data.isascii() and json.loads(data) == CALL and decode_event(data) == CALL
    assert encode_json({"a": "é"}) == '{"a":"é"}'.encode("utf-8")  # UTF-8 as before when it can


def test_replay_and_report_take_them(tmp_path: Path):
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps(CALL) + "\n", encoding="ascii")
    runner = CliRunner()
    replayed = runner.invoke(loopwatch, ["replay", str(events)])
    assert replayed.exit_code == 0, replayed.output
    [line] = replayed.stdout_bytes.splitlines()
    assert json.loads(line)["run_id"] == f"run{HALF}" and json.loads(line)["verdict"] == "allow"
    html = tmp_path / "report.html"
    reported = runner.invoke(loopwatch, ["report", "--format", "events", "--html", str(html), str(events)])
    assert reported.exit_code == 0, reported.output
    assert f"read\\ud83d" in html.read_text(encoding="utf-8")


def test_import_writes_them_and_replay_reads_them_back(tmp_path: Path):
    # a codex capture whose command was cut through an emoji (JSON escapes carry the lone half)
    lines = [{"type": "thread.started", "thread_id": "th-1"},
             {"type": "item.completed", "item": {"id": "i1", "type": "command_execution", "command": "ls",
                                                 "aggregated_output": "a\n", "exit_code": 0, "status": "completed"}},
             {"type": "item.completed", "item": {"id": "i2", "type": "command_execution", "command": f"echo {HALF}",
                                                 "aggregated_output": "?\n", "exit_code": 0, "status": "completed"}}]
    capture = tmp_path / "th-1.codex_stdout.jsonl"
    capture.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="ascii")
    runner = CliRunner()

    jsonl = tmp_path / "events.jsonl"
    imported = runner.invoke(loopwatch, ["import", "--format", "codex", "-o", str(jsonl), str(capture)])
    assert imported.exit_code == 0, imported.output
    assert "2 event(s)" in imported.stderr and "0 error(s)" in imported.stderr
    replayed = runner.invoke(loopwatch, ["replay", str(jsonl)])
    assert replayed.exit_code == 0, replayed.output
    assert [json.loads(line)["verdict"] for line in replayed.stdout_bytes.splitlines()] == ["allow", "allow"]
    assert json.loads(jsonl.read_bytes().splitlines()[1])["args"]["command"] == f"echo {HALF}"

    # msgpack cannot carry a lone surrogate (and a JSON record in a msgpack stream would not read back):
    # that event is reported and skipped, the others written
    packed = tmp_path / "events.msgpack"
    imported = runner.invoke(loopwatch, ["import", "--format", "codex", "--msgpack", "-o", str(packed), str(capture)])
    assert imported.exit_code == 1, imported.output
    assert imported.stderr.splitlines() == [
        f"loopwatch import: {capture}:3: cannot be written as msgpack: a string holds a lone surrogate "
        "(JSON Lines output keeps it)",
        "loopwatch import: 1 file(s), 1 event(s) (1 tool_call), 1 run(s), 1 error(s)"]
    replayed = runner.invoke(loopwatch, ["replay", str(packed)])
    assert replayed.exit_code == 0, replayed.output
    assert [json.loads(line)["verdict"] for line in replayed.stdout_bytes.splitlines()] == ["allow"]
