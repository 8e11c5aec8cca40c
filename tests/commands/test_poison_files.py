"""`replay`, `produce` and `report` read poison records from files: counted, skipped, exit 1; `tail` shows one.

replay and produce stopped with a traceback on the 3-byte msgpack record
``81 80 c0`` (a map keyed by a map); replay also on events it decoded but could
not key or write, report on verdict records of another shape.
"""

from __future__ import annotations

import asyncio
import json

import msgpack
import pytest
from click.testing import CliRunner

from streams.commands import loopwatch
from tests.wire.record_fuzz import poison_records
from tests.worker_harness import consume_all, create_topics

GOOD = {"type": "tool_call", "run_id": "r-good", "session_id": "s1", "tool_call_id": "c1", "tool_name": "read",
        "args": {"path": "a"}, "result": "ok", "event_id": "good"}


def _msgpack_file(tmp_path):
    """The msgpack records of the corpus, then a good event: (path, [expected outcome per record])."""
    corpus = [(expect, value) for expect, value in poison_records() if value[0] >= 0x80]
    path = tmp_path / "poison.msgpack"
    path.write_bytes(b"".join(value for _, value in corpus) + msgpack.packb(GOOD))
    return path, [expect for expect, _ in corpus] + ["verdict"]


def test_replay_skips_each_poison_record_and_writes_the_other_verdicts(tmp_path):
    path, expected = _msgpack_file(tmp_path)
    result = CliRunner().invoke(loopwatch, ["replay", str(path)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    skipped = [line for line in result.stderr.splitlines() if ": skipped: " in line]
    assert [int(line.split(f"{path}:")[1].split(":")[0]) for line in skipped] == [
        n for n, expect in enumerate(expected, 1) if expect != "verdict"]
    assert sum("a map key is a map or an array" in line for line in skipped) == expected.count("decode")
    assert sum("invalid event: args, result or error hold a value that is not JSON data" in line
               for line in skipped) == expected.count("schema")
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(verdicts) == expected.count("verdict") and verdicts[-1]["event_id"] == "good"
    assert f"{expected.count('verdict')} tool_call); {len(skipped)} bad record(s) skipped" in result.stderr


def test_replay_skips_an_event_it_cannot_key(tmp_path):
    path = tmp_path / "events.jsonl"
    json_records = [value for _, value in poison_records() if value[0] < 0x80]
    path.write_bytes(b"\n".join(json_records) + b"\n" + json.dumps(GOOD).encode() + b"\n")
    result = CliRunner().invoke(loopwatch, ["replay", str(path)])
    assert result.exit_code == 1, result.output
    assert f"{path}:1: skipped: invalid event: session_id must be a string or null, got list" in result.stderr
    assert [json.loads(line)["event_id"] for line in result.stdout.splitlines()] == ["good"]


@pytest.mark.kafka
@pytest.mark.timeout(120)
def test_produce_counts_and_skips_the_undecodable_ones_and_exits_1(kafka_bootstrap, unique_topic, tmp_path):
    asyncio.run(create_topics(kafka_bootstrap, [unique_topic], 1))
    path, expected = _msgpack_file(tmp_path)
    result = CliRunner().invoke(loopwatch, ["produce", "--bootstrap", kafka_bootstrap, "--topic", unique_topic,
                                       "--no-validate", str(path)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    bad = expected.count("decode")  # with --no-validate, schema errors are the worker's to find
    assert f"{bad} bad record(s) skipped" in result.stderr
    assert sum("a map key is a map or an array" in line for line in result.stderr.splitlines()) == bad
    sent = len(expected) - bad
    assert f"produced {sent} event(s) to {unique_topic}" in result.stderr
    records = asyncio.run(consume_all(kafka_bootstrap, unique_topic, sent, timeout=60))
    assert len(records) == sent and msgpack.unpackb(records[-1].value)["event_id"] == "good"


def test_report_skips_verdict_records_it_cannot_read_and_reports_the_rest(tmp_path):
    good = {"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_name": "read", "verdict": "allow",
            "event_id": "e1", "detection": {"stuck": False}}
    path = tmp_path / "verdicts.msgpack"
    records = [
        good,
        {**good, "event_id": "e2", "detection": True},                       # a detection that is no object
        {**good, "event_id": "e3", "run_id": ["r1"]},                        # a run id that is a list
        {**good, "event_id": "e4", "source": {"path": b"\xff", "line": 1}},  # msgpack bytes where text goes
        {**good, "event_id": "e5", "source": {"topic": "t", "partition": 0, "offset": 1}, "x": b"\x00"},
    ]
    path.write_bytes(b"".join(msgpack.packb(r) for r in records) + bytes.fromhex("8180c0")
                     + msgpack.packb({**good, "event_id": "e6", "session_id": "s\ud83d"}, unicode_errors="surrogatepass"))
    surrogate = tmp_path / "verdicts.jsonl"
    surrogate.write_text(json.dumps({**good, "event_id": "e7", "tool_name": "\ud83d",
                                     "source": {"topic": "t", "partition": 0, "offset": 2}}) + "\n")
    result = CliRunner().invoke(loopwatch, ["report", str(path), str(surrogate)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    skipped = [line.split(": skipped: ", 1)[1] for line in result.stderr.splitlines() if ": skipped: " in line]
    assert skipped == [
        "not a verdict record: detection is a bool",
        "not a verdict record: run_id is a list",
        "not a verdict record: source.path is a bytes",
        "not a verdict record: TypeError: Object of type bytes is not JSON serializable",
        "invalid msgpack: a map key is a map or an array (unhashable type: 'dict')",
        "invalid msgpack: 'utf-8' codec can't decode byte 0xed in position 1: invalid continuation byte",
    ]
    assert "6 bad records skipped" in result.stdout  # the report covers e1 and e7 (a lone surrogate is text)


def test_tail_shows_a_line_for_a_record_it_cannot_format_and_goes_on():
    from types import SimpleNamespace

    from streams.commands.tail import _line, format_verdict

    message = SimpleNamespace(partition=0, offset=5, timestamp=1764460800000)
    line = _line(message, {"verdict": "warn", "detection": True}, format_verdict, False)
    assert line == "p0@5: cannot show the record (AttributeError: 'bool' object has no attribute 'get')"
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    assert _line(message, {"x": deep}, format_verdict, True).startswith("p0@5: cannot show the record (Recursion")
    assert "ALLOW" in _line(message, {"verdict": "allow", "type": "tool_call", "tool_name": "read"}, format_verdict,
                            False)
