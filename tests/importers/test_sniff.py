"""Telling a file's format from its first bytes (streams/importers/sniff.py)."""

import json
from pathlib import Path

import msgpack
import pytest

from streams.importers.sniff import EVENTS, HEAD_BYTES, SQLITE_MAGIC, companion_of, main_file_present, sniff

FIX = Path(__file__).parent / "fixtures"
RUNNERS = Path(__file__).parent.parent / "fixtures" / "runners"
EXAMPLES = Path(__file__).parent.parent.parent / "examples"


@pytest.mark.parametrize("path, fmt", [
    (FIX / "openclaw/agents/bot1/sessions/oc-s1.jsonl", "openclaw"),
    (FIX / "openclaw/agents/bot2/sessions/oc-s2.jsonl.reset.2030-01-02T00-00-00.000Z", "openclaw"),
    (FIX / "claude-code/cc-s1.jsonl", "claude-code"),
    (FIX / "claude-code/cc-s1/subagents/agent-a1b2c3.jsonl", "claude-code"),
    (FIX / "codex/th-1.codex_stdout.jsonl", "codex"),
    (RUNNERS / "codex-compaction.jsonl", "codex"),  # a rollout file
    (FIX / "swe-agent/demo__repo-1.traj", "swe-agent"),
    (EXAMPLES / "events.jsonl", EVENTS),
])
def test_each_format_is_told_by_content(path, fmt, tmp_path):
    assert sniff(path).format == fmt
    renamed = tmp_path / "renamed.bin"  # the name plays no part
    renamed.write_bytes(path.read_bytes())
    assert sniff(renamed).format == fmt


def test_swe_agent_trajectory_on_one_line_and_pretty_printed(tmp_path):
    doc = {"environment": "x", "trajectory": [{"action": "ls", "observation": "a"}], "history": []}
    one = tmp_path / "one"
    one.write_text(json.dumps(doc))
    pretty = tmp_path / "pretty"
    pretty.write_text(json.dumps(doc, indent=2))
    assert sniff(one).format == sniff(pretty).format == "swe-agent"
    other = tmp_path / "other"
    other.write_text(json.dumps({"environment": "x", "history": []}, indent=2))
    assert sniff(other).format is None
    assert sniff(other).reason.startswith("no known format (first line is not JSON")


def test_msgpack_event_file_and_other_binaries(tmp_path):
    events = tmp_path / "events.msgpack"
    events.write_bytes(msgpack.packb({"type": "tool_call", "run_id": "r", "session_id": "s"}))
    assert sniff(events).format == EVENTS
    other = tmp_path / "blob"
    other.write_bytes(msgpack.packb({"hello": 1}))
    assert sniff(other) .reason == "no known format (binary, neither SQLite nor msgpack events)"
    png = tmp_path / "x.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    assert sniff(png).format is None


def test_sqlite_header(tmp_path):
    db = tmp_path / "store"
    db.write_bytes(SQLITE_MAGIC + bytes(84))
    assert sniff(db, sqlite_format="openclaw").format == "openclaw"
    assert sniff(db).reason == "no known format (an SQLite database this loopwatch has no importer for)"


@pytest.mark.parametrize("content, reason", [
    (b"", "no known format (empty file)"),
    (b"\n \n", "no known format (blank file)"),
    (b"# notes\n", "no known format (first line is not JSON (Expecting value))"),
    (b"[1, 2]\n", "no known format (first line is a JSON list, not a record)"),
    (b'{"a": 1, "b": 2}\n', "no known format (first record is no known session format (its keys: 'a', 'b'))"),
    (b'{"x": "\xff"}\n', "no known format (not UTF-8 text (at byte 7 of the first line))"),
    (b'{"verdict": "allow", "event_id": "e"}\n', "a verdict file, not recorded sessions (give it to loopwatch report)"),
])
def test_unknown_files_say_why(tmp_path, content, reason):
    path = tmp_path / "f.jsonl"
    path.write_bytes(content)
    found = sniff(path)
    assert (found.format, found.reason) == (None, reason)


def test_a_byte_order_mark_is_allowed(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (EXAMPLES / "events.jsonl").read_bytes())
    assert sniff(path).format == EVENTS


def test_a_first_line_longer_than_the_head_is_not_read_whole(tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_bytes(b'{"type": "session", "pad": "' + b"x" * HEAD_BYTES + b'"}\n')
    assert sniff(path).reason == (f"no known format (first line longer than {HEAD_BYTES:,} bytes and not a "
                                  "SWE-agent trajectory)")


def test_unreadable_file(tmp_path):
    path = tmp_path / "gone.jsonl"
    path.symlink_to(tmp_path / "nowhere")
    assert sniff(path).reason == "cannot read: No such file or directory"


def test_companions_name_their_main_file(tmp_path):
    sidecar = tmp_path / "s1.trajectory.jsonl"
    sidecar.write_text(json.dumps({"traceSchema": "openclaw-trajectory", "sessionId": "s1", "type": "x"}) + "\n")
    found = sniff(sidecar)
    assert found.format is None and found.companion == tmp_path / "s1.jsonl"
    assert not main_file_present(found.companion)
    (tmp_path / "s1.jsonl.reset.2030-01-01T00-00-00.000Z").write_text("{}\n")  # an archived transcript
    assert main_file_present(found.companion)
    assert companion_of(tmp_path / "openclaw-agent.sqlite-wal") == tmp_path / "openclaw-agent.sqlite"
    assert companion_of(tmp_path / "openclaw-agent.sqlite-shm") == tmp_path / "openclaw-agent.sqlite"
    assert companion_of(tmp_path / "a.jsonl") is None
    wal = tmp_path / "openclaw-agent.sqlite-wal"
    wal.write_bytes(b"\x37\x7f\x06\x82" + bytes(28))
    assert sniff(wal).companion == tmp_path / "openclaw-agent.sqlite"


def test_a_dotted_record_type_with_a_session_id_is_not_claude_code(tmp_path):
    path = tmp_path / "events.jsonl"  # an OpenClaw trajectory record whose traceSchema key was damaged
    path.write_text(json.dumps({"raceSchema": "openclaw-trajectory", "type": "session.model_change",
                                "sessionId": "s1"}) + "\n")
    assert sniff(path).format is None
    path.write_text(json.dumps({"type": "queue-operation", "sessionId": "s1"}) + "\n")
    assert sniff(path).format == "claude-code"
