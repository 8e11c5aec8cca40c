"""``loopwatch import`` end to end with click's test runner."""

import json
from pathlib import Path

import msgpack
import pytest
from click.testing import CliRunner

from streams.commands.import_ import import_

FIX = Path(__file__).parent / "fixtures"


def test_jsonl_to_stdout_with_summary():
    res = CliRunner().invoke(import_, ["--format", "openclaw", str(FIX / "openclaw")])
    assert res.exit_code == 0, res.output
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert [e["type"] for e in events].count("tool_call") == 18
    assert "3 file(s), 28 event(s) (2 compaction_retry, 18 tool_call, 8 tool_result), 7 run(s), 0 error(s)" in res.stderr
    assert "sub-agent" not in res.stderr


def test_summary_names_a_sub_agent_read_from_progress_records():
    res = CliRunner().invoke(import_, ["--format", "claude-code", str(FIX / "claude-code" / "cc-s2.jsonl")])
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines()[-1] == (
        "loopwatch import: sub-agent b7 of session cc-s2 has no side file: 2 event(s) read from its progress "
        f"records in {FIX / 'claude-code' / 'cc-s2.jsonl'}")


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


def test_an_openclaw_transcript_named_explicitly_is_read_whatever_its_name(tmp_path):
    renamed = tmp_path / "session.json"
    renamed.write_bytes((FIX / "openclaw/agents/bot1/sessions/oc-s1.jsonl").read_bytes())
    res = CliRunner().invoke(import_, ["--format", "openclaw", str(renamed)])
    assert res.exit_code == 0, res.output
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(e["type"], e.get("tool_call_id")) for e in events] == [
        ("tool_call", "call_1"), ("tool_call", "call_2"), ("tool_result", "call_1"), ("tool_result", "call_2"),
        ("compaction_retry", None), ("tool_call", "ghost_1"), ("tool_call", "ghost_2"), ("tool_call", "call_4"),
        ("tool_call", "call_5")]
    assert {e["session_id"] for e in events} == {"oc-s1"}
    assert res.stderr == ("loopwatch import: 1 file(s), 9 event(s) (1 compaction_retry, 6 tool_call, 2 tool_result), "
                          "3 run(s), 0 error(s)\n")


def test_an_explicit_file_openclaw_cannot_read_is_named_with_the_reason(tmp_path):
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe" * 100)
    sidecar = tmp_path / "s.trajectory.jsonl"
    sidecar.write_bytes((FIX / "openclaw/agents/bot2/sessions/oc-s2.trajectory.jsonl").read_bytes())
    res = CliRunner().invoke(import_, ["--format", "openclaw", str(binary), str(sidecar)])
    assert res.exit_code == 1
    assert res.stdout == ""
    assert res.stderr.splitlines() == [
        f"loopwatch import: {binary}:1: not UTF-8 text: invalid start byte at byte 0",
        f"loopwatch import: {binary}:1: missing session header",
        f"loopwatch import: {sidecar}: a trajectory sidecar, not a transcript: name its transcript "
        "(s.jsonl) instead, which is read with it",
        "loopwatch import: 2 file(s), 0 event(s) (no events), 0 run(s), 3 error(s)",
        "loopwatch import: no events in 2 file(s) read as openclaw: is --format right? "
        "(the others: claude-code, codex, swe-agent)",
    ]


def test_a_folder_without_session_files_says_so_and_exits_1(tmp_path):
    (tmp_path / "notes.txt").write_text("not a session\n")
    res = CliRunner().invoke(import_, ["--format", "swe-agent", str(tmp_path)])
    assert res.exit_code == 1
    assert res.stdout == ""
    assert res.stderr.splitlines() == [
        "loopwatch import: 0 file(s), 0 event(s) (no events), 0 run(s), 0 error(s)",
        f"loopwatch import: no swe-agent session files found in {tmp_path}: is --format right? "
        "(the others: claude-code, codex, openclaw)",
    ]


def test_no_session_files_names_every_path_searched(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (second / "notes.jsonl").write_text("{}\n")  # a file, but not a .traj
    res = CliRunner().invoke(import_, ["--format", "swe-agent", str(first), str(second)])
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-1] == (
        f"loopwatch import: no swe-agent session files found in {first}, {second}: is --format right? "
        "(the others: claude-code, codex, openclaw)")


SESSION_FILES = {
    "openclaw": FIX / "openclaw/agents/bot1/sessions/oc-s1.jsonl",
    "claude-code": FIX / "claude-code/cc-s2.jsonl",  # no side files: a copy of it is the whole session
    "codex": FIX / "codex/th-1.codex_stdout.jsonl",
}


def _calls(stdout: str) -> list[tuple]:
    """What an event says about the call, without where it was read (line numbers shift)."""
    events = [json.loads(line) for line in stdout.splitlines()]
    return [(e["type"], e.get("tool_call_id"), e.get("tool_name"), e.get("args"), e.get("result"), e.get("error"))
            for e in events]


@pytest.mark.parametrize("fmt", sorted(SESSION_FILES))
def test_a_line_that_is_not_utf8_is_one_bad_line_and_the_rest_is_read(tmp_path, fmt):
    lines = SESSION_FILES[fmt].read_bytes().splitlines(keepends=True)
    copy = tmp_path / "session.jsonl"
    copy.write_bytes(b"".join([*lines[:3], b"\xff\xfe garbage\n", *lines[3:]]))
    clean = CliRunner().invoke(import_, ["--format", fmt, str(SESSION_FILES[fmt])])
    res = CliRunner().invoke(import_, ["--format", fmt, str(copy)])
    assert clean.exit_code == 0 and len(clean.stdout.splitlines()) >= 3
    assert res.exit_code == 1
    assert _calls(res.stdout) == _calls(clean.stdout)
    errors = res.stderr.splitlines()
    assert errors[0] == f"loopwatch import: {copy}:4: not UTF-8 text: invalid start byte at byte 0"
    assert errors[1].endswith(", 1 error(s)")
    assert not any("is --format right?" in line for line in errors)
    # what else the summary says (a sub-agent read from progress records) is said of the copy too
    assert errors[2:] == [line.replace(str(SESSION_FILES[fmt]), str(copy)) for line in clean.stderr.splitlines()[1:]]


def test_a_trajectory_that_is_not_utf8_is_named_with_the_line(tmp_path):
    lines = (FIX / "swe-agent/demo__repo-1.traj").read_bytes().splitlines(keepends=True)
    bad = tmp_path / "x.traj"
    bad.write_bytes(b"".join([*lines[:4], b'  "note": "caf\xe9",\n', *lines[4:]]))
    res = CliRunner().invoke(import_, ["--format", "swe-agent", str(bad)])
    assert res.exit_code == 1
    assert res.stderr.splitlines()[0] == (
        f"loopwatch import: {bad}:5: not UTF-8 text: invalid continuation byte at byte 14")


def test_a_binary_file_lists_the_first_ten_bad_lines_then_counts_the_rest(tmp_path):
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(b"\x80\xff\n" * 50)
    res = CliRunner().invoke(import_, ["--format", "codex", str(binary)])
    assert res.exit_code == 1
    assert res.stderr.splitlines() == [
        *(f"loopwatch import: {binary}:{n}: not UTF-8 text: invalid start byte at byte 0" for n in range(1, 11)),
        "loopwatch import: 40 more skipped record(s) not listed",
        "loopwatch import: 1 file(s), 0 event(s) (no events), 0 run(s), 50 error(s)",
        "loopwatch import: no events in 1 file(s) read as codex: is --format right? "
        "(the others: claude-code, openclaw, swe-agent)",
    ]
