"""``loopwatch import`` end to end with click's test runner."""

import json
from pathlib import Path

import msgpack
from click.testing import CliRunner

from streams.commands.import_ import import_

FIX = Path(__file__).parent / "fixtures"


def test_jsonl_to_stdout_with_summary():
    res = CliRunner().invoke(import_, ["--format", "openclaw", str(FIX / "openclaw")])
    assert res.exit_code == 0, res.output
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert [e["type"] for e in events].count("tool_call") == 8
    assert "2 file(s), 10 event(s) (2 compaction_retry, 8 tool_call), 5 run(s), 0 error(s)" in res.stderr


def test_msgpack_file(tmp_path):
    out = tmp_path / "events.msgpack"
    res = CliRunner().invoke(import_, ["--format", "swe-agent", "--msgpack", "-o", str(out), str(FIX / "swe-agent")])
    assert res.exit_code == 0, res.output
    events = list(msgpack.Unpacker(out.open("rb")))
    assert [e["tool_name"] for e in events] == ["open", "edit", "submit"]


def test_malformed_line_reported_counted_and_skipped(tmp_path):
    bad = tmp_path / "run.jsonl"
    bad.write_text('{"type":"thread.started","thread_id":"t"}\nnot json\n{"type":"turn.started"}\n')
    res = CliRunner().invoke(import_, ["--format", "codex", str(bad)])
    assert res.exit_code == 1
    assert f"{bad}:2: not JSON" in res.stderr
    assert "1 error(s)" in res.stderr
