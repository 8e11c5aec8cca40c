"""import, replay and report over a mixed fleet (--format auto): per-format summary, files left out, progress."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from streams.commands import loopwatch

TESTS = Path(__file__).parent.parent
FIX = TESTS / "importers" / "fixtures"
EXAMPLES = TESTS.parent / "examples"


@pytest.fixture
def fleet(tmp_path):
    root = tmp_path / "fleet"
    shutil.copytree(FIX, root)
    shutil.copy(TESTS / "fixtures" / "runners" / "codex-compaction.jsonl", root / "codex" / "rollout-1.jsonl")
    return root


def run(*args):
    return CliRunner().invoke(loopwatch, [str(a) for a in args])


def test_import_of_a_fleet_gives_a_line_per_format(fleet):
    res = run("import", fleet)
    assert res.exit_code == 0, res.output
    events = [json.loads(line) for line in res.stdout.splitlines()]
    lines = res.stderr.splitlines()
    assert lines[0] == ("loopwatch import: 10 file(s), 74 event(s) (4 compaction_retry, 52 tool_call, "
                        "18 tool_result), 16 run(s), 0 error(s)")
    assert lines[1:6] == [
        "loopwatch import: claude-code: 3 file(s), 20 event(s), 5 run(s)",
        "loopwatch import: codex: 3 file(s), 23 event(s), 3 run(s)",
        "loopwatch import: openclaw: 3 file(s), 28 event(s), 7 run(s)",
        "loopwatch import: swe-agent: 1 file(s), 3 event(s), 1 run(s)",
        "loopwatch import: sub-agent b7 of session cc-s2 has no side file: 2 event(s) read from its progress "
        f"records in {fleet / 'claude-code' / 'cc-s2.jsonl'}",
    ]
    counts = {r: sum(e["runner"] == r for e in events) for r in ("claude-code", "codex", "openclaw", "swe-agent")}
    assert counts == {"claude-code": 20, "codex": 23, "openclaw": 28, "swe-agent": 3}
    explicit = run("import", "--format", "openclaw", fleet / "openclaw")  # an explicit --format still works
    assert explicit.exit_code == 0
    assert [json.loads(line) for line in explicit.stdout.splitlines()] == [e for e in events
                                                                          if e["runner"] == "openclaw"]


def test_files_that_are_no_sessions_are_listed_and_the_import_goes_on_with_status_0(fleet):
    (fleet / "NOTES.md").write_text("# notes\n")
    (fleet / "codex" / "broken.jsonl").write_bytes(b"\xff\xfe\n")
    shutil.copy(EXAMPLES / "openclaw.json", fleet / "openclaw.json")
    (fleet / "config.toml").write_text('model = "gpt"\napproval_policy = "never"\n')
    res = run("import", "-o", "/dev/null", fleet)
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert (f"loopwatch import: {fleet / 'NOTES.md'}: left out: no known format (first line is not JSON "
            "(Expecting value))") in lines
    assert (f"loopwatch import: {fleet / 'codex' / 'broken.jsonl'}: left out: no known format (binary, neither "
            "SQLite nor msgpack events)") in lines
    assert (f"loopwatch import: {fleet / 'openclaw.json'}: left out: a configuration file (OpenClaw or loopwatch: "
            "agents, tools), not a session") in lines
    assert (f"loopwatch import: {fleet / 'config.toml'}: left out: a configuration file (Codex: approval_policy), "
            "not a session") in lines
    assert "loopwatch import: 14 file(s), 74 event(s) (4 compaction_retry, 52 tool_call, 18 tool_result), " \
           "16 run(s), 0 error(s)" in lines
    assert ("loopwatch import: 4 file(s) left out (not sessions, or unreadable, 2 of them configuration files)"
            in lines)


def test_a_damaged_session_is_an_error_and_the_status_1(fleet):
    rollout = fleet / "codex" / "rollout-1.jsonl"
    rollout.write_bytes(rollout.read_bytes().replace(b"\n", b"\n{cut", 1))
    res = run("import", "-o", "/dev/null", fleet)
    assert res.exit_code == 1
    assert f"loopwatch import: {rollout}:2: not JSON: Expecting property name enclosed in double quotes" in \
        res.stderr.splitlines()
    summary = next(ln for ln in res.stderr.splitlines() if ln.startswith("loopwatch import: 10 file(s)"))
    assert summary.endswith(", 1 error(s)") and "left out" not in res.stderr


def test_a_path_that_does_not_exist_is_left_out_while_another_exists_and_one_line_when_none_does(fleet, tmp_path):
    gone = tmp_path / "no-such-runner"
    res = run("import", "-o", "/dev/null", fleet, gone)
    assert res.exit_code == 0, res.output
    assert f"loopwatch import: {gone}: left out: no such file or directory" in res.stderr.splitlines()
    for command in (["import"], ["replay", "--format", "auto"], ["report", "--format", "auto"]):
        res = run(*command, gone, tmp_path / "also-gone")
        assert res.exit_code == 2
        assert res.stderr.splitlines() == [
            f"loopwatch {command[0]}: no such file or directory: {gone}, {tmp_path / 'also-gone'}"]
    res = run("replay", gone)  # an event file
    assert res.exit_code == 2 and res.stderr.splitlines() == [f"loopwatch replay: no such file or directory: {gone}"]


def test_the_readmes_fleet_report_runs_as_printed(fleet, tmp_path, monkeypatch):
    """README: ``report --format auto --config examples/openclaw.json ~/.codex/sessions ~/.claude/projects
    ~/.openclaw/agents`` on a machine with Codex and OpenClaw only."""
    home = tmp_path / "home"
    shutil.copytree(fleet / "codex", home / ".codex" / "sessions")
    shutil.copytree(fleet / "openclaw" / "agents", home / ".openclaw" / "agents")
    monkeypatch.setenv("HOME", str(home))
    readme = (TESTS.parent / "README.md").read_text()
    line = next(ln for ln in readme.splitlines() if "report --format auto" in ln)
    args = line.split("#")[0].split()[1:]
    assert args[0] == "report" and "~/.claude/projects" in args
    monkeypatch.chdir(TESTS.parent)
    res = run(*[str(Path(a).expanduser()) if a.startswith("~") else a for a in args])
    assert res.exit_code == 0, res.output
    assert f"loopwatch report: {home / '.claude' / 'projects'}: left out: no such file or directory" in \
        res.stderr.splitlines()
    assert "calls" in res.stdout


def test_a_folder_without_any_session_says_so(tmp_path):
    (tmp_path / "a.txt").write_text("hello\n")
    res = run("import", tmp_path)
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-2:] == [
        f"loopwatch import: 1 file(s) left out (not sessions, or unreadable)",
        f"loopwatch import: no session or event files of a known format found in {tmp_path}"]
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run("replay", "--format", "auto", empty)
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-1] == ("loopwatch replay: no session or event files of a known format found in "
                                           f"{empty}")


def test_replay_of_a_fleet_counts_per_runner_and_verdicts_carry_the_runner(fleet):
    shutil.copy(EXAMPLES / "events.jsonl", fleet / "events.jsonl")
    res = run("replay", "--format", "auto", "--config", EXAMPLES / "openclaw.json", fleet)
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(records) == 74 + 104
    assert {r.get("runner") for r in records} == {"claude-code", "codex", "openclaw", "swe-agent", None}
    runners = [line for line in res.stderr.splitlines() if line.startswith("runners:")]
    assert runners == ["runners:    claude-code 20 event(s) 5 run(s), codex 23 event(s) 3 run(s), "
                       "openclaw 28 event(s) 7 run(s), swe-agent 3 event(s) 1 run(s)"]
    alone = run("replay", "--format", "openclaw", "--config", EXAMPLES / "openclaw.json", fleet / "openclaw")
    openclaw = [json.loads(line) for line in alone.stdout.splitlines()]
    assert [r for r in records if r.get("runner") == "openclaw"] == openclaw  # the same verdicts as alone


def test_report_of_a_fleet_reads_every_runner(fleet):
    (fleet / "NOTES.md").write_text("# notes\n")
    shutil.copytree(EXAMPLES, fleet / "examples")  # config files beside the sessions
    res = run("report", "--format", "auto", fleet)
    assert res.exit_code == 0, res.output  # NOTES.md and the config files left out: no session data lost
    lines = res.stderr.splitlines()
    assert f"loopwatch report: {fleet / 'NOTES.md'}: left out: no known format (first line is not JSON " \
           "(Expecting value))" in lines
    assert (f"loopwatch report: {fleet / 'examples' / 'policies' / 'policies.json'}: left out: a configuration file "
            "(OpenClaw or loopwatch: policies, tools), not a session") in lines
    assert "calls" in res.stdout
    examples = run("report", "--format", "auto", EXAMPLES)
    assert examples.exit_code == 0, examples.output
    assert [ln for ln in examples.stderr.splitlines() if "left out" in ln] == [
        f"loopwatch report: {EXAMPLES / 'openclaw.json'}: left out: a configuration file (OpenClaw or loopwatch: "
        "agents, tools), not a session",
        f"loopwatch report: {EXAMPLES / 'policies' / 'policies.json'}: left out: a configuration file (OpenClaw or "
        "loopwatch: policies, tools), not a session"]


def test_progress_bar_on_request_only(fleet):
    quiet = run("import", "-o", "/dev/null", fleet)
    assert "file/s" not in quiet.stderr and "10/10" not in quiet.stderr  # not a terminal
    shown = run("import", "--progress", "-o", "/dev/null", fleet)
    assert "import: 100%" in shown.stderr and "10/10" in shown.stderr
    replay = run("replay", "--format", "auto", "--progress", "-q", "-o", "/dev/null", fleet)
    assert "read: 100%" in replay.stderr and "10/10" in replay.stderr


def test_sub_agents_read_from_progress_records_are_named_ten_at_most(tmp_path):
    for n in range(12):
        shutil.copy(FIX / "claude-code" / "cc-s2.jsonl", tmp_path / f"cc-s2-{n:02d}.jsonl")
    res = run("import", "-o", "/dev/null", tmp_path)
    assert res.exit_code == 0, res.output
    named = [line for line in res.stderr.splitlines() if "has no side file" in line]
    assert len(named) == 10 and named[0].endswith(f"records in {tmp_path / 'cc-s2-00.jsonl'}")
    assert res.stderr.splitlines()[-1] == ("loopwatch import: 2 more sub-agent(s) read from progress records "
                                           "not listed")


def test_report_of_a_folder_of_unknown_files_counts_no_session_file(tmp_path):
    (tmp_path / "a.txt").write_text("hello\n")
    res = run("report", "--format", "auto", tmp_path)
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-1] == ("loopwatch report: no session or event files of a known format found "
                                           f"in {tmp_path}")


def test_standard_input_is_sniffed_too():
    capture = (FIX / "codex" / "th-1.codex_stdout.jsonl").read_bytes()
    res = CliRunner().invoke(loopwatch, ["import", "-"], input=capture)
    assert res.exit_code == 0, res.output
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert {e["runner"] for e in events} == {"codex"} and {e["session_id"] for e in events} == {"th-1"}
    assert res.stderr.splitlines()[1].startswith("loopwatch import: codex: 1 file(s), ")
