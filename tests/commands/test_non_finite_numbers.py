"""Numbers JSON cannot hold (``NaN``, ``Infinity``, ``1e999``) are refused alike by every way in.

The gateway refuses such a body with 400 (tests/runners/test_gateway_doors.py); ``replay``, ``report``,
``produce`` and ``import`` refuse the line (or msgpack record) holding one, naming it, and go on with
the others: Python's ``json`` reads them by default, JavaScript's ``JSON.parse`` (every runner that
writes JSON) never writes them, and no encoder downstream could send them on as JSON.
"""

from __future__ import annotations

import asyncio
import json

import msgpack
import pytest
from click.testing import CliRunner

from streams.commands import loopwatch
from streams.wire.codecs import UnplacedJSONError, json_loads, non_finite
from tests.worker_harness import consume_all, create_topics

CALL = '{"type":"tool_call","run_id":"r1","session_id":"s1","tool_call_id":"c%d","tool_name":"read","args":{"x":%s}}'
NUMBERS = ["NaN", "1e999", "-Infinity", "1.5", "Infinity", "-1e400", "1.7e308"]
REFUSED = {1: "invalid JSON: NaN is not JSON",
           2: "invalid JSON: number 1e999 is beyond what JSON can hold (about 1.8e308)",
           3: "invalid JSON: -Infinity is not JSON",
           5: "invalid JSON: Infinity is not JSON",
           6: "invalid JSON: number -1e400 is beyond what JSON can hold (about 1.8e308)"}


def _events(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(CALL % (n, number) + "\n" for n, number in enumerate(NUMBERS, 1)))
    return path


def _skipped(stderr: str, path) -> dict[int, str]:
    found = {}
    for line in stderr.splitlines():
        if f"{path}:" in line and ": skipped: " in line:
            where, _, reason = line.partition(": skipped: ")
            found[int(where.rsplit(":", 1)[1])] = reason
    return found


def test_json_loads_refuses_what_json_cannot_hold_and_keeps_the_rest():
    for text, reason in [('{"a": NaN}', "NaN is not JSON"), ("[Infinity]", "Infinity is not JSON"),
                         ("-Infinity", "-Infinity is not JSON"),
                         ('{"a": 2e308}', "number 2e308 is beyond what JSON can hold (about 1.8e308)")]:
        with pytest.raises(UnplacedJSONError) as caught:
            json_loads(text)
        assert str(caught.value) == reason and isinstance(caught.value, json.JSONDecodeError)
    assert json_loads('{"a": [1.7976931348623157e308, -0.0, 5e-324, 10]}') == {
        "a": [1.7976931348623157e308, -0.0, 5e-324, 10]}
    assert json_loads('{"s": "NaN Infinity"}') == {"s": "NaN Infinity"}  # in a string: text
    assert non_finite({"args": {"x": [1, float("nan")]}}) == "NaN at args.x[1]"
    assert non_finite({"result": float("-inf")}) == "-Infinity at result"
    assert non_finite({"args": {"x": 1e308, "y": "inf"}}) is None


def test_replay_and_report_name_each_line_holding_one_and_go_on(tmp_path):
    path = _events(tmp_path)
    result = CliRunner().invoke(loopwatch, ["replay", str(path)])
    assert result.exit_code == 1, result.output
    assert _skipped(result.stderr, path) == REFUSED
    assert [json.loads(line)["tool_call_id"] for line in result.stdout.splitlines()] == ["c4", "c7"]
    report = CliRunner().invoke(loopwatch, ["report", "--format", "events", str(path)])
    assert _skipped(report.stderr, path) == REFUSED
    assert "1 session, 1 run, 2 calls" in report.output and "5 bad records skipped" in report.output


def test_a_msgpack_event_file_is_held_to_the_same(tmp_path):
    path = tmp_path / "events.msgpack"
    good = {"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": "c2", "tool_name": "read",
            "args": {"x": 1.5}}
    path.write_bytes(msgpack.packb({**good, "tool_call_id": "c1", "args": {"x": [0, float("nan")]}})
                     + msgpack.packb(good) + msgpack.packb({**good, "tool_call_id": "c3", "result": float("inf")}))
    result = CliRunner().invoke(loopwatch, ["replay", str(path)])
    assert result.exit_code == 1
    assert _skipped(result.stderr, path) == {1: "a number JSON cannot hold: NaN at args.x[1]",
                                             3: "a number JSON cannot hold: Infinity at result"}
    assert [json.loads(line)["tool_call_id"] for line in result.stdout.splitlines()] == ["c2"]


def test_import_names_the_session_line_holding_one(tmp_path):
    session = tmp_path / "run.jsonl"
    session.write_text(
        '{"type": "thread.started", "thread_id": "th-n"}\n{"type": "turn.started"}\n'
        '{"type": "item.completed", "item": {"id": "i1", "type": "command_execution", "command": "ls", '
        '"aggregated_output": "a", "exit_code": NaN, "status": "completed"}}\n'
        '{"type": "item.completed", "item": {"id": "i2", "type": "command_execution", "command": "ls", '
        '"aggregated_output": "a", "exit_code": 0, "status": "completed"}}\n')
    result = CliRunner().invoke(loopwatch, ["import", "--format", "codex", str(session)])
    assert result.exit_code == 1
    assert f"{session}:3: not JSON: NaN is not JSON" in result.stderr
    assert [json.loads(line)["tool_call_id"] for line in result.stdout.splitlines()] == ["i2"]


@pytest.mark.kafka
def test_produce_sends_none_of_them(kafka_bootstrap, unique_topic, tmp_path):
    asyncio.run(create_topics(kafka_bootstrap, [unique_topic], 1))
    path = _events(tmp_path)
    result = CliRunner().invoke(loopwatch, ["produce", "--bootstrap", kafka_bootstrap, "--topic", unique_topic,
                                            "--codec", "json", str(path)])
    assert result.exit_code == 1, result.output
    assert _skipped(result.stderr, path) == REFUSED
    records = asyncio.run(consume_all(kafka_bootstrap, unique_topic, 2, timeout=60))
    assert [json.loads(record.value)["tool_call_id"] for record in records] == ["c4", "c7"]
