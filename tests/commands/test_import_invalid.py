"""``loopwatch import`` leaves out, reports and counts the events ``loopwatch replay`` would skip as invalid."""

import json
from pathlib import Path

import msgpack
from click.testing import CliRunner

from streams.commands import loopwatch


def call(n: int, **fields) -> dict:
    return {"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": f"c{n}", "tool_name": "read",
            "args": {"path": "/a"}, **fields}


LINES = [
    call(1),                                                   # 1 kept
    {"type": "message", "run_id": "r1", "session_id": "s1", "text": "hi"},  # 2 unknown type
    call(2, type="tool_callz"),                                # 3 unknown type (a typo)
    {"type": "tool_result", "run_id": "r1", "tool_call_id": "c1", "result": "x"},  # 4 kept (no session: valid)
    {"type": "message", "run_id": "r1", "session_id": "s1", "text": "again"},  # 5 unknown type
    call(3, run_id=7),                                         # 6 known type, a field of the wrong type
    call(4, session_id=None),                                  # 7 a tool_call of no session
    {"run_id": "r1", "session_id": "s1"},                      # 8 no type at all
]


def write(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    return path


def invoke(*args: str):
    return CliRunner().invoke(loopwatch, list(args), catch_exceptions=False)


def skipped_lines(stderr: str, command: str, path: Path) -> list[int]:
    prefix = f"loopwatch {command}: {path}:"
    return [int(line[len(prefix):].split(":", 1)[0]) for line in stderr.splitlines() if line.startswith(prefix)]


def test_import_leaves_out_reports_and_names_events_of_unknown_type(tmp_path):
    path = write(tmp_path)
    out = tmp_path / "out.jsonl"
    result = invoke("import", "-o", str(out), str(path))
    assert result.exit_code == 1
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(e["type"], e["source"]["line"]) for e in written] == [("tool_call", 1), ("tool_result", 4)]
    lines = result.stderr.splitlines()
    assert f"loopwatch import: {path}:2: invalid event: type must be one of tool_call, tool_result, " \
           "compaction_retry, got 'message'" in lines
    assert f"loopwatch import: {path}:6: invalid event: run_id must be a string or null, got int" in lines
    assert f"loopwatch import: {path}:7: invalid event: an event needs a session_id (or a session_key)" in lines
    assert "loopwatch import: 1 file(s), 2 event(s) (1 tool_call, 1 tool_result), 2 run(s), 6 error(s)" in lines
    assert ("loopwatch import: 6 event(s) left out as invalid, as replay skips them: of no known type "
            "(tool_call, tool_result, compaction_retry): 'message' x2, 'tool_callz' x1; 3 otherwise invalid") in lines


def test_import_skips_exactly_the_lines_replay_skips_and_its_output_replays_clean(tmp_path):
    path = write(tmp_path)
    out = tmp_path / "out.jsonl"
    imported = invoke("import", "-o", str(out), str(path))
    replayed = invoke("replay", str(path))
    assert skipped_lines(imported.stderr, "import", path) == [2, 3, 5, 6, 7, 8]
    assert skipped_lines(replayed.stderr, "replay", path) == [2, 3, 5, 6, 7, 8]
    again = invoke("replay", str(out))
    assert again.exit_code == 0
    assert "events:     2 (1 tool_call, 1 tool_result); 0 bad record(s) skipped" in again.stderr.splitlines()


def test_import_to_msgpack_leaves_out_the_same_events(tmp_path):
    path = write(tmp_path)
    out = tmp_path / "out.msgpack"
    result = invoke("import", "--msgpack", "-o", str(out), str(path))
    assert result.exit_code == 1
    with out.open("rb") as fh:
        assert [e["tool_call_id"] for e in msgpack.Unpacker(fh, raw=False)] == ["c1", "c1"]


def test_import_of_valid_events_only_exits_0_without_an_invalid_line(tmp_path):
    path = tmp_path / "ok.jsonl"
    path.write_text(json.dumps(call(1)) + "\n", encoding="utf-8")
    result = invoke("import", "-o", str(tmp_path / "out.jsonl"), str(path))
    assert result.exit_code == 0
    assert "invalid" not in result.stderr
