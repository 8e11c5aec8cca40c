"""Truncated and corrupted session files, for every importer: clear errors, nothing else lost.

Each case damages one small session file (cut it short, overwrite, insert or delete a few bytes at a
place hypothesis picks) and reads it in a folder beside an intact file of another runner, once with
``--format auto`` (each file sniffed) and once as its own format. What must hold:

* nothing raises: every problem is a :class:`SessionFormatError` naming the damaged file, with a reason;
* the intact file's events are all there, exactly as when it is read alone;
* in a JSON Lines format, every call recorded on a line before the first damaged byte is still
  imported (a one-document format, a SWE-agent trajectory or an SQLite database, may lose the file);
* a record cut short or broken is said (an error for the damaged file), and so is a compressed
  file (gzip, Zstandard) cut short.

The files cover every importer and what reaches it: Claude Code, Codex rollouts (a sub-agent's
too) and ``codex exec --json``, OpenClaw transcripts, export-trajectory bundles and 2026.9.6
databases (one holding a deleted session's archive; that archive's published ``.zst`` file alone),
SWE-agent trajectories, loopwatch event files, and gzip / Zstandard files damaged in their
compressed bytes (a rollout, a Claude Code log, a database, a trajectory).

The examples are bounded and derandomised so CI runs the same ones fast;
``LOOPWATCH_FUZZ_EXAMPLES=2000`` runs that many fresh random ones per case.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.importers import SessionFile, SessionFormatError, read_files, session_files

TESTS = Path(__file__).parent.parent
FIX = TESTS / "importers" / "fixtures"
RUNNERS = TESTS / "fixtures" / "runners"
OPENCLAW = TESTS / "fixtures" / "openclaw"
EXAMPLES = TESTS.parent / "examples"

_EXAMPLES = int(os.environ.get("LOOPWATCH_FUZZ_EXAMPLES", "0") or 0)
FUZZ = settings(max_examples=_EXAMPLES or 25, deadline=None, derandomize=not _EXAMPLES, database=None,
                suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Case:
    fmt: str  # the format the file is read as
    name: str  # the file's name in the folder (some formats are found by name)
    data_path: Path
    lines: bool  # a JSON Lines format: the lines before the damage must still import
    gz: bool = False  # the fixture is stored gzipped: decompressed first
    pack: str | None = None  # the file is damaged compressed: "gzip" or "zstd" (read through its decompression)

    def data(self) -> bytes:
        raw = self.data_path.read_bytes()
        raw = gzip.decompress(raw) if self.gz else raw
        if self.pack == "gzip":
            return gzip.compress(raw, mtime=0)
        if self.pack == "zstd":
            return zstandard.ZstdCompressor(write_checksum=True).compress(raw)
        return raw


CASES = {
    "claude-code": Case("claude-code", "cc.jsonl", FIX / "claude-code" / "cc-s1.jsonl", True),
    "codex-rollout": Case("codex", "rollout.jsonl", RUNNERS / "codex-compaction.jsonl", True),
    "codex-exec": Case("codex", "exec.jsonl", FIX / "codex" / "th-1.codex_stdout.jsonl", True),
    "openclaw": Case("openclaw", "oc.jsonl", FIX / "openclaw" / "agents" / "bot1" / "sessions" / "oc-s1.jsonl", True),
    "openclaw-export": Case("openclaw", "events.jsonl", OPENCLAW / "export-trajectory-2026.9.6.events.jsonl.gz",
                            True, gz=True),
    "openclaw-sqlite": Case("openclaw", "openclaw-agent.sqlite", OPENCLAW / "builtin-loop-2026.9.6.sqlite.gz",
                            False, gz=True),
    "swe-agent": Case("swe-agent", "t.traj", FIX / "swe-agent" / "demo__repo-1.traj", False),
    "events": Case("events", "events.jsonl", EXAMPLES / "events.jsonl", True),
    # a Codex sub-agent's rollout (its session is its parent's)
    "codex-subagent": Case("codex", "rollout-child.jsonl", next(RUNNERS.glob("codex-subagent/rollout-*636a*.jsonl")),
                           True),
    # an OpenClaw 2026.9.6 database holding a deleted session's archive, and that archive's published .zst copy
    "openclaw-sqlite-archive": Case("openclaw", "openclaw-agent.sqlite", OPENCLAW / "deleted-session-2026.9.6.sqlite.gz",
                                    False, gz=True),
    "openclaw-archive-zst": Case("openclaw", "s.jsonl.deleted.2026-12-03T10-33-49.154Z.g.zst",
                                 next(OPENCLAW.glob("*.jsonl.deleted.*.zst")), False),
    # compressed files damaged in their compressed bytes
    "codex-rollout-gz": Case("codex", "rollout.jsonl.gz", RUNNERS / "codex-compaction.jsonl", False, pack="gzip"),
    "claude-code-zst": Case("claude-code", "cc.jsonl.zst", FIX / "claude-code" / "cc-s1.jsonl", False, pack="zstd"),
    "openclaw-sqlite-gz": Case("openclaw", "openclaw-agent.sqlite.gz", OPENCLAW / "builtin-loop-2026.9.6.sqlite.gz",
                               False, gz=True, pack="gzip"),
    "swe-agent-gz": Case("swe-agent", "t.traj.gz", FIX / "swe-agent" / "demo__repo-1.traj", False, pack="gzip"),
}
# the intact neighbour: another runner's file (Claude Code's beside a Claude Code case would share the folder's
# sub-agent look-ups, so a case never has its own format as neighbour)
WITNESS = {"swe-agent": "codex-exec"}


@cache
def intact_events(case: str) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / CASES[case].name
        path.write_bytes(CASES[case].data())
        errors: list = []
        events = list(read_files([SessionFile(path, CASES[case].fmt)], errors.append))
        assert errors == [], errors
        for event in events:  # the path differs from one temporary folder to the next
            event["source"] = {**event["source"], "path": CASES[case].name}
        return events


@st.composite
def damage(draw, size: int) -> tuple[str, int, bytes, int]:
    """``(kind, offset, junk, length)``: cut at ``offset``, or overwrite, insert or delete there (small, to read
    in a failure report; :func:`apply` makes the damaged bytes)."""
    kind = draw(st.sampled_from(["truncate", "overwrite", "insert", "delete"]))
    at = draw(st.integers(0, size))
    if kind == "truncate":
        return kind, at, b"", 0
    if kind == "delete":
        return kind, at, b"", draw(st.integers(1, 64))
    junk = draw(st.binary(min_size=1, max_size=16) | st.sampled_from([b"\n", b"\x00", b"{", b'"', b"\xff", b"}\n{"]))
    return kind, at, junk, len(junk)


def apply(data: bytes, kind: str, at: int, junk: bytes, length: int) -> bytes:
    if kind == "truncate":
        return data[:at]
    if kind == "overwrite":
        return data[:at] + junk + data[at + length:]
    if kind == "insert":
        return data[:at] + junk + data[at:]
    return data[:at] + data[at + length:]


def _line_of(data: bytes, offset: int) -> int:
    """1-based line holding byte ``offset`` (the line a cut at ``offset`` ends)."""
    return data.count(b"\n", 0, offset) + 1


def _unreadable_tail(case: Case, damaged: bytes) -> bool:
    """Whether the damage left bytes a reader cannot take for a record: a JSON Lines file whose last line is
    not JSON, a trajectory that is not JSON, a compressed file cut short."""
    if case.pack or case.data_path.name.endswith(".zst"):
        whole = case.data()
        return 0 < len(damaged) < len(whole) and whole.startswith(damaged)
    if case.fmt == "swe-agent":
        try:
            json.loads(damaged)
        except ValueError:
            return True
        return False
    if not case.lines:  # a database: checked by what it gives (_check)
        return False
    last = damaged.rsplit(b"\n", 1)[-1]
    if not last.strip():
        return False
    try:
        json.loads(last)
    except ValueError:
        return True
    return False


def _check(case_name: str, damaged: bytes, at: int) -> None:
    case = CASES[case_name]
    witness_name = WITNESS.get(case_name, "swe-agent")
    witness = CASES[witness_name]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / case.name
        path.write_bytes(damaged)
        other = folder / "witness" / witness.name
        other.parent.mkdir()
        other.write_bytes(witness.data())

        for files in (session_files("auto", [folder]),
                      [SessionFile(path, case.fmt), SessionFile(other, witness.fmt)]):
            errors: list = []
            events = list(read_files(files, errors.append))  # nothing may raise
            for err in errors:
                assert isinstance(err, SessionFormatError)
                assert err.path == str(path), err  # only the damaged file has problems
                assert isinstance(err.reason, str) and err.reason.strip()
                assert err.line is None or (isinstance(err.line, int) and err.line >= 1)
            kept = [e for e in events if e["source"]["path"] == str(other)]
            assert [{**e, "source": {**e["source"], "path": witness.name}} for e in kept] == intact_events(witness_name)
            own = [e for e in events if e["source"]["path"] == str(path)]
            if case.lines and damaged[:at].count(b"\n") and files[0].format is not None:
                first_bad = _line_of(damaged, at)
                before = {e["tool_call_id"] for e in intact_events(case_name)
                          if e["type"] == "tool_call" and e["source"]["line"] < first_bad}
                got = {e.get("tool_call_id") for e in own if isinstance(e.get("tool_call_id"), str)}
                assert before <= got, (sorted(before - got), first_bad)
            if _unreadable_tail(case, damaged):  # a record cut short or broken must be said
                assert errors, "a damaged file said nothing"
            if case.data_path.name.endswith((".sqlite", ".sqlite.gz")) and not case.pack:
                # a database cut or changed where no session row lives reads whole; any loss must be said
                same = [{**e, "source": {**e["source"], "path": case.name}} for e in own] == intact_events(case_name)
                assert same or errors, "a damaged database lost events without a word"


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_a_damaged_session_file_costs_only_itself(case_name):
    data = CASES[case_name].data()
    intact_events(case_name)

    @FUZZ
    @given(damage(len(data)))
    def run(how):
        _check(case_name, apply(data, *how), how[1])

    run()


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_every_cut_of_the_first_lines(case_name):
    """Cut short every 23 bytes through the first 1 KB (a header cut in half, a record cut mid-string)."""
    data = CASES[case_name].data()
    for at in range(0, min(len(data), 1024), 23):
        _check(case_name, data[:at], at)
