"""A mixed fleet: every file's format sniffed, each read alone (streams/importers/inputs.py)."""

import gzip
import json
import shutil
from pathlib import Path

import pytest

from streams.importers import (FORMATS, NotASession, SessionFile, SessionFormatError, import_paths, read_files,
                               session_files)

FIX = Path(__file__).parent / "fixtures"
RUNNERS = Path(__file__).parent.parent / "fixtures" / "runners"
EXAMPLES = Path(__file__).parent.parent.parent / "examples"
OPENCLAW = Path(__file__).parent.parent / "fixtures" / "openclaw"


@pytest.fixture
def fleet(tmp_path):
    """Every runner's fixtures in one tree, with a loopwatch event file, a note, a verdict file and hidden files."""
    root = tmp_path / "fleet"
    shutil.copytree(FIX, root)
    shutil.copy(RUNNERS / "codex-compaction.jsonl", root / "codex" / "rollout-1.jsonl")
    shutil.copy(EXAMPLES / "events.jsonl", root / "events.jsonl")
    store = root / "openclaw" / "agents" / "bot9" / "agent" / "openclaw-agent.sqlite"  # OpenClaw 2026.9.x
    store.parent.mkdir(parents=True)
    store.write_bytes(gzip.decompress((OPENCLAW / "builtin-loop-2026.9.6.sqlite.gz").read_bytes()))
    bundle = root / "exports" / "openclaw-trajectory-1" / "events.jsonl"  # openclaw sessions export-trajectory
    bundle.parent.mkdir(parents=True)
    bundle.write_bytes(gzip.decompress((OPENCLAW / "export-trajectory-2026.9.6.events.jsonl.gz").read_bytes()))
    (root / "NOTES.md").write_text("# what is here\n")
    shutil.copy(RUNNERS / "codex-compaction.live-calls.jsonl", root / "verdicts.jsonl")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    return root


def test_a_folder_of_every_runner_is_read_file_by_file_each_in_its_format(fleet):
    files = session_files("auto", [fleet])
    got = [(str(f.path.relative_to(fleet)), f.format) for f in files]
    assert got == [
        ("NOTES.md", None),
        ("claude-code/cc-s1.jsonl", "claude-code"),
        ("claude-code/cc-s1/subagents/agent-a1b2c3.jsonl", "claude-code"),  # after its main log
        ("claude-code/cc-s2.jsonl", "claude-code"),
        ("codex/rollout-1.jsonl", "codex"),
        ("codex/th-1.codex_stdout.jsonl", "codex"),
        ("codex/th-2.codex_stdout.jsonl", "codex"),
        ("events.jsonl", "events"),
        ("exports/openclaw-trajectory-1/events.jsonl", "openclaw"),
        ("openclaw/agents/bot1/sessions/oc-s1.jsonl", "openclaw"),
        # the sidecar oc-s2.trajectory.jsonl is left out: read with its (archived) transcript
        ("openclaw/agents/bot2/sessions/oc-s2.jsonl.reset.2030-01-02T00-00-00.000Z", "openclaw"),
        ("openclaw/agents/bot3/sessions/oc-s3.jsonl", "openclaw"),
        ("openclaw/agents/bot9/agent/openclaw-agent.sqlite", "openclaw"),
        ("swe-agent/demo__repo-1.traj", "swe-agent"),
        ("verdicts.jsonl", None),
    ]
    assert files[0].reason == "no known format (first line is not JSON (Expecting value))"
    assert files[-1].reason == "a verdict file, not recorded sessions (give it to loopwatch report)"


def test_the_events_of_a_mixed_fleet_are_each_formats_own_with_its_runner(fleet):
    errors = []
    events = list(import_paths("auto", [fleet], on_error=errors.append))
    assert [(type(e).__name__, Path(e.path).name) for e in errors] == [("NotASession", "NOTES.md"),
                                                                         ("NotASession", "verdicts.jsonl")]
    for fmt, where in [("claude-code", ["claude-code"]), ("swe-agent", ["swe-agent"]),
                       ("openclaw", ["exports", "openclaw"])]:  # (an export bundle is named alone for --format)
        alone = list(import_paths(fmt, [fleet / w for w in where]))
        assert [e for e in events if e.get("runner") == fmt] == alone
        assert {e["runner"] for e in alone} == {fmt}
    sources = {e["source"]["path"] for e in events if e.get("runner") == "openclaw"}
    assert {Path(p).name for p in sources} >= {"openclaw-agent.sqlite", "events.jsonl", "oc-s1.jsonl"}
    codex = list(import_paths("codex", [fleet / "codex"]))
    assert [e for e in events if e.get("runner") == "codex"] == codex
    assert len({e["session_id"] for e in codex}) == 3  # the rollout and two `codex exec --json` captures
    plain = [e for e in events if "runner" not in e]  # the loopwatch event file's, passed on
    originals = [json.loads(line) for line in (EXAMPLES / "events.jsonl").read_text().splitlines() if line.strip()]
    assert [{k: v for k, v in e.items() if k != "source"} for e in plain] == originals
    assert plain[0]["source"] == {"path": str(fleet / "events.jsonl"), "line": 1}


def test_a_file_named_alone_comes_with_its_sub_agents_side_files():
    files = session_files("auto", [FIX / "claude-code" / "cc-s1.jsonl"])
    assert [(f.path.name, f.format) for f in files] == [("cc-s1.jsonl", "claude-code"),
                                                        ("agent-a1b2c3.jsonl", "claude-code")]


def test_a_file_named_twice_or_inside_a_folder_named_too_is_read_once(fleet):
    files = session_files("auto", [fleet / "swe-agent" / "demo__repo-1.traj", fleet / "swe-agent"])
    assert [f.path.name for f in files] == ["demo__repo-1.traj"]


def test_an_explicit_format_reads_what_that_format_finds():
    files = session_files("openclaw", [FIX / "openclaw"])
    assert {f.format for f in files} == {"openclaw"} and len(files) == 3
    with pytest.raises(ValueError):
        session_files("nope", [FIX])
    with pytest.raises(FileNotFoundError):
        session_files("auto", [FIX / "missing"])


def test_an_importer_that_fails_on_a_file_costs_the_rest_of_that_file_only(monkeypatch, tmp_path):
    def broken(path, on_error=None):
        yield {"type": "compaction_retry", "run_id": "r", "session_id": "s", "source": {"path": str(path)}}
        raise KeyError("payload")

    monkeypatch.setitem(FORMATS, "swe-agent", FORMATS["swe-agent"].__class__(
        "swe-agent", FORMATS["swe-agent"].discover, broken, FORMATS["swe-agent"].looks_like))
    unreadable = tmp_path / "gone.jsonl"  # removed after it was found
    unreadable.symlink_to(tmp_path / "nowhere")
    files = [SessionFile(FIX / "swe-agent" / "demo__repo-1.traj", "swe-agent"),
             SessionFile(unreadable, "codex"),
             SessionFile(FIX / "codex" / "th-1.codex_stdout.jsonl", "codex")]
    errors: list[SessionFormatError] = []
    events = list(read_files(files, errors.append))
    assert events[0]["type"] == "compaction_retry" and events[0]["runner"] == "swe-agent"  # before the failure
    assert events[1:] == list(import_paths("codex", [FIX / "codex" / "th-1.codex_stdout.jsonl"]))
    reasons = [(Path(e.path).name, e.line, e.reason) for e in errors]
    assert reasons[0] == ("demo__repo-1.traj", None,
                          "read as swe-agent up to here, then the importer failed (KeyError: 'payload')")
    assert reasons[1:] == [("gone.jsonl", None, "cannot read: No such file or directory")]
    with pytest.raises(SessionFormatError):  # without a handler the first error is raised
        list(read_files(files))


def test_a_file_of_no_known_format_is_an_error_of_its_own_kind(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    with pytest.raises(NotASession) as caught:
        list(import_paths("auto", [tmp_path]))
    assert (caught.value.path, caught.value.line) == (str(junk), None)
    assert caught.value.reason == "no known format (first line is not JSON (Expecting value))"


def test_configuration_files_beside_the_sessions_are_left_out_of_a_folder_walk(tmp_path):
    shutil.copy(EXAMPLES / "events.jsonl", tmp_path / "events.jsonl")
    shutil.copy(EXAMPLES / "openclaw.json", tmp_path / "openclaw.json")  # JSON5, comments and all
    (tmp_path / "one-line.json").write_text(json.dumps({"tools": {"loopDetection": {"enabled": True}}}))
    (tmp_path / "other.json").write_text('{\n  "name": "not a config"\n}\n')  # no config key: still unknown
    found = {path.name: (fmt, reason, config) for path, fmt, reason, config in
             ((f.path, f.format, f.reason, f.config) for f in session_files("auto", [tmp_path]))}
    assert found["events.jsonl"][0] == "events"
    assert found["other.json"][:3:2] == (None, False) and found["other.json"][1].startswith("no known format")
    # listed as configuration files (the commands say so and go on), not as files of no known format
    assert found["openclaw.json"] == (None, "a configuration file (OpenClaw or loopwatch: agents, tools), not a "
                                            "session", True)
    assert found["one-line.json"] == (None, "a configuration file (OpenClaw or loopwatch: tools), not a session", True)
    errors: list = []
    assert list(read_files(session_files("auto", [tmp_path / "openclaw.json"]), errors.append)) == []
    assert [type(e).__name__ for e in errors] == ["ConfigFile"]
