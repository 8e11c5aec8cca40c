"""Input nested deeper than Python recurses, or not UTF-8: one bad record (or a clear error), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from streams.commands import loopwatch
from streams.wire.codecs import json_loads


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _call(i: int, args: str = "{}") -> str:
    return ('{"type":"tool_call","run_id":"r","session_id":"s","tool_call_id":"c%d","tool_name":"read",'
            '"args":%s,"result":"ok"}' % (i, args))


def test_json_too_deep_for_python_is_a_json_error():
    with pytest.raises(json.JSONDecodeError, match="nested too deeply to decode"):
        json_loads(_nested(100_000))
    assert json_loads(_nested(50)) == json.loads(_nested(50))


@pytest.mark.parametrize("command", [["replay"], ["report", "--format", "events"]])
def test_offline_commands_skip_a_line_too_deep_and_go_on(tmp_path: Path, command):
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join([_call(0), _call(1, _nested(3_000)), _call(2)]) + "\n", encoding="ascii")
    result = CliRunner().invoke(loopwatch, [*command, str(events)])
    assert result.exit_code == 1, result.output
    assert f"{events}:2: skipped: invalid JSON: nested too deeply to decode" in result.stderr
    if command == ["replay"]:
        assert [json.loads(line)["tool_call_id"] for line in result.stdout.splitlines()] == ["c0", "c2"]


def test_conformance_reports_a_line_that_is_not_utf8(tmp_path: Path):
    scenarios = tmp_path / "scenarios.jsonl"
    scenarios.write_bytes(b'x\xff\n')
    result = CliRunner().invoke(loopwatch, ["conformance", str(scenarios)])
    assert result.exit_code == 1
    assert result.output.splitlines()[0] == (f"FAIL {scenarios}:1: not JSON: 'utf-8' codec can't decode byte 0xff "
                                             "in position 1: invalid start byte")


def test_a_config_file_that_is_not_utf8_exits_2_with_the_reason(tmp_path: Path):
    config = tmp_path / "openclaw.json"
    config.write_bytes(b"\xff\xfe{}")
    result = CliRunner().invoke(loopwatch, ["replay", "--config", str(config), "examples/events.jsonl"])
    assert result.exit_code == 2
    assert f"{config}: (file): not UTF-8 text: invalid start byte at byte 0" in result.stderr
