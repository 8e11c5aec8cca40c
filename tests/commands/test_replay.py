"""``loopwatch replay`` and ``loopwatch conformance`` end to end with click's test runner."""

import json
from pathlib import Path

import msgpack
import pytest
from click.testing import CliRunner

from tests.shared_vectors import shared_path, skip_without
from streams.commands import loopwatch

VECTORS = shared_path("vectors.jsonl")  # not part of the project: its tests skip where absent
RESULT = {"content": [{"type": "text", "text": "same file contents"}], "details": {"ok": True}}


def read_call(event_id: str, call_id: str, **fields) -> dict:
    return {"event_id": event_id, "type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": call_id,
            "tool_name": "read", "args": {"path": "/workspace/notes.md"}, "result": RESULT, "error": None, **fields}


EVENTS = [
    {"event_id": "e1", "type": "compaction_retry", "run_id": "r1", "session_id": "s1"},
    read_call("e2", "call-1"),
    read_call("e3", "call-2"),
    read_call("e4", "call-3"),
    {"event_id": "e5", "type": "tool_result", "run_id": "r1", "session_id": "s1", "tool_call_id": "nope",
     "result": None, "error": None},
]

SUMMARY = [
    "events:     5 (1 compaction_retry, 3 tool_call, 1 tool_result); 0 bad record(s) skipped",
    "sessions:   1, runs: 1",
    "verdicts:   2 abort, 3 allow",
    "blocks:     0, aborts: 1",
    "run ended:  1 later event(s) refused; late: 0 call(s) run without a verdict",
    "detections (detector / level / action: count):",
    "  compaction_loop_persisted  critical  abort      1",
]


def write_jsonl(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                    encoding="utf-8")
    return path


def run(*args: str):
    return CliRunner().invoke(loopwatch, list(args), catch_exceptions=False)


def test_replay_jsonl_verdicts_and_summary(tmp_path):
    result = run("replay", str(write_jsonl(tmp_path / "events.jsonl", EVENTS)))
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["event_id"] for r in records] == ["e1", "e2", "e3", "e4", "e5"]
    # e5 answers no pending call: recorded as OpenClaw records it (Spec §9), here nothing since it returned nothing;
    # its run ended at e4, so it is refused
    assert [r["verdict"] for r in records] == ["allow", "allow", "allow", "abort", "abort"]
    assert records[4]["outcome"] == {"recorded": False, "result_hash": None, "unknown_tool_name": None}
    assert records[4]["run_ended"]["by"] == "compaction_loop_persisted" and "run_ended" not in records[3]
    assert all(r["key"] == "s1" and r["run_id"] == "r1" and r["session_id"] == "s1" for r in records)
    abort = records[3]
    assert abort["guard"]["detector"] == "compaction_loop_persisted" and abort["guard"]["count"] == 3
    assert abort["evidence"] == ["e2", "e3", "e4"]
    assert abort["args_hash"] == "read:d358b22b4ff6f0515ebb0f5219842ac08c57d468c8f1d6d6bec0927dafb706a2"
    assert abort["outcome"]["result_hash"] == "9bb796be58d3edcd4a7e2b8332f7ee9b41ca2ab28706a49cef2b08327a69722e"
    assert result.stderr.splitlines() == [
        "loopwatch replay: no --config: loopDetection enabled=unset (rolling detectors off, guard on), "
        "historySize=30, warningThreshold=10, criticalThreshold=20, unknownToolThreshold=10, "
        "globalCircuitBreakerThreshold=30, postCompactionGuard.windowSize=3", *SUMMARY]


def test_replay_msgpack_gives_identical_verdicts(tmp_path):
    jsonl = write_jsonl(tmp_path / "events.jsonl", EVENTS)
    packed = tmp_path / "events.msgpack"
    packed.write_bytes(b"".join(msgpack.packb(event, use_bin_type=True) for event in EVENTS))
    from_json, from_msgpack = run("replay", str(jsonl)), run("replay", str(packed))
    assert from_json.exit_code == from_msgpack.exit_code == 0
    # the same verdicts; each names its own file (the msgpack file's record number as its line)
    assert from_msgpack.stdout == from_json.stdout.replace(f'{jsonl}"', f'{packed}"')
    assert [json.loads(line)["source"]["line"] for line in from_msgpack.stdout.splitlines()] == [1, 2, 3, 4, 5]
    assert len(from_msgpack.stdout.splitlines()) == 5
    assert from_msgpack.stderr.splitlines()[1:] == SUMMARY


def test_replay_reports_bad_lines_and_continues(tmp_path):
    path = write_jsonl(tmp_path / "events.jsonl", [
        EVENTS[0],
        "not json",
        EVENTS[1],
        {"event_id": "x", "type": "bogus", "run_id": "r1", "session_id": "s1"},
        "[1, 2]",
        EVENTS[2],
        {"event_id": "y", "type": "tool_call", "run_id": 7, "session_id": "s1"},
        EVENTS[3],
    ])
    result = run("replay", str(path))
    assert result.exit_code == 1  # as import: a skipped record means the verdicts are not the whole input
    assert [json.loads(line)["event_id"] for line in result.stdout.splitlines()] == ["e1", "e2", "e3", "e4"]
    assert json.loads(result.stdout.splitlines()[-1])["verdict"] == "abort"  # the run went on
    errors = result.stderr.splitlines()[1:]  # after the settings line
    assert errors[0] == f"loopwatch replay: {path}:2: skipped: invalid JSON at column 1: Expecting value"
    assert errors[1] == (f"loopwatch replay: {path}:4: skipped: invalid event: type must be one of tool_call, "
                         "tool_result, compaction_retry, got 'bogus'")
    assert errors[2] == f"loopwatch replay: {path}:5: skipped: an event must be an object, got list"
    assert errors[3] == f"loopwatch replay: {path}:7: skipped: invalid event: run_id must be a string or null, got int"
    assert errors[4] == "events:     4 (1 compaction_retry, 3 tool_call); 4 bad record(s) skipped"


def test_replay_exits_1_on_a_skipped_record_even_when_quiet(tmp_path):
    path = write_jsonl(tmp_path / "events.jsonl", [*EVENTS[:2], "[1, 2]"])
    result = run("replay", "-q", str(path))
    assert result.exit_code == 1
    assert [json.loads(line)["event_id"] for line in result.stdout.splitlines()] == ["e1", "e2"]
    assert result.stderr == f"loopwatch replay: {path}:3: skipped: an event must be an object, got list\n"


def test_replay_of_a_binary_file_lists_the_first_ten_bad_records_then_counts_the_rest(tmp_path):
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff" * 5000)  # msgpack: 5,000 integers -1, none an event
    result = run("replay", str(binary))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[1:] == [
        *(f"loopwatch replay: {binary}:{n}: skipped: an event must be a map, got int" for n in range(1, 11)),
        "loopwatch replay: 4990 more skipped record(s) not listed",
        "events:     0 (none); 5000 bad record(s) skipped",
        "sessions:   0, runs: 0",
        "verdicts:   none",
        "blocks:     0, aborts: 0",
        "detections: none",
    ]


def test_replay_counts_invalid_events_with_unreadable_ones_and_quiet_keeps_the_list(tmp_path):
    lines = ["not json"] * 6 + [EVENTS[0]] + [{"type": "bogus"}] * 6 + [EVENTS[1]]
    path = write_jsonl(tmp_path / "events.jsonl", lines)
    result = run("replay", "-q", str(path))
    assert result.exit_code == 1
    assert [json.loads(line)["event_id"] for line in result.stdout.splitlines()] == ["e1", "e2"]
    errors = result.stderr.splitlines()
    assert [line.split(": skipped: ")[0] for line in errors[:10]] == [
        f"loopwatch replay: {path}:{n}" for n in (1, 2, 3, 4, 5, 6, 8, 9, 10, 11)]
    assert errors[5].endswith("skipped: invalid JSON at column 1: Expecting value")
    assert errors[6].endswith("skipped: invalid event: type must be one of tool_call, tool_result, "
                              "compaction_retry, got 'bogus'")
    assert errors[10:] == ["loopwatch replay: 2 more skipped record(s) not listed"]


SESSIONS = Path(__file__).resolve().parents[1] / "importers" / "fixtures" / "openclaw" / "agents"


def test_replay_of_a_session_with_a_line_not_utf8_skips_that_line_only(tmp_path):
    lines = (SESSIONS / "bot1/sessions/oc-s1.jsonl").read_bytes().splitlines(keepends=True)
    copy = tmp_path / "oc-s1.jsonl"
    copy.write_bytes(b"".join([*lines[:3], b"\xff\xfe garbage\n", *lines[3:]]))
    result = run("replay", "--format", "openclaw", str(copy))
    assert result.exit_code == 1
    assert [json.loads(line)["tool_call_id"] for line in result.stdout.splitlines()] == [
        "call_1", "call_2", "call_1", "call_2", None, "ghost_1", "ghost_2", "call_4", "call_5"]
    assert result.stderr.splitlines()[1:3] == [
        f"loopwatch replay: {copy}:4: skipped: not UTF-8 text: invalid start byte at byte 0",
        "events:     9 (1 compaction_retry, 6 tool_call, 2 tool_result); 1 bad record(s) skipped",
    ]


def test_replay_names_a_bad_session_file_once_with_its_line_or_alone(tmp_path):
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(b"\xff\xfe" * 100)
    sidecar = tmp_path / "s.trajectory.jsonl"
    sidecar.write_bytes((SESSIONS / "bot2/sessions/oc-s2.trajectory.jsonl").read_bytes())
    result = run("replay", "-q", "--format", "openclaw", str(binary), str(sidecar))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"loopwatch replay: {binary}:1: skipped: not UTF-8 text: invalid start byte at byte 0",
        f"loopwatch replay: {binary}:1: skipped: missing session header",
        f"loopwatch replay: {sidecar}: skipped: a trajectory sidecar, not a transcript: name its transcript "
        "(s.jsonl) instead, which is read with it",
        "loopwatch replay: no events in 2 file(s) read as openclaw: is --format right? "
        "(the others: claude-code, codex, swe-agent)",
    ]


def test_replay_of_a_folder_without_session_files_of_the_format_says_so_as_import_does(tmp_path):
    (tmp_path / "notes.txt").write_text("not a session\n")
    replayed = run("replay", "--format", "swe-agent", str(tmp_path))
    imported = run("import", "--format", "swe-agent", str(tmp_path))
    assert replayed.exit_code == imported.exit_code == 1
    assert replayed.stdout == ""
    hint = (f"no swe-agent session files found in {tmp_path}: is --format right? "
            "(the others: claude-code, codex, openclaw)")
    assert replayed.stderr.splitlines()[-1] == f"loopwatch replay: {hint}"
    assert imported.stderr.splitlines()[-1] == f"loopwatch import: {hint}"
    assert replayed.stderr.splitlines()[1] == "events:     0 (none); 0 bad record(s) skipped"


def test_report_of_a_folder_without_session_files_of_the_format_says_so_as_replay_does(tmp_path):
    result = run("report", "--format", "codex", str(tmp_path))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (f"loopwatch report: no codex session files found in {tmp_path}: is --format right? "
                             "(the others: claude-code, openclaw, swe-agent)\n")


NOT_CODEX = ("neither a Codex session file (its first record is no session_meta, response_item, ... record with a "
             "payload) nor `codex exec --json` output (no thread, turn or item event)")


def test_report_of_sessions_of_another_format_says_so(tmp_path):
    result = run("report", "--format", "codex", str(SESSIONS / "bot2"))
    assert result.exit_code == 1
    assert result.stdout == ""
    sidecar = SESSIONS / "bot2" / "sessions" / "oc-s2.trajectory.jsonl"
    assert result.stderr == (f"loopwatch report: {sidecar}:1: skipped: {NOT_CODEX}\n"
                             "loopwatch report: no events in 1 file(s) read as codex: is --format right? "
                             "(the others: claude-code, openclaw, swe-agent)\n")


def test_replay_of_sessions_of_another_format_says_so_even_when_quiet(tmp_path):
    transcript = SESSIONS / "bot1/sessions/oc-s1.jsonl"
    result = run("replay", "-q", "--format", "codex", str(transcript), str(SESSIONS / "bot2"))
    assert result.exit_code == 1
    assert result.stdout == ""
    sidecar = SESSIONS / "bot2" / "sessions" / "oc-s2.trajectory.jsonl"
    assert result.stderr == (f"loopwatch replay: {transcript}:1: skipped: {NOT_CODEX}\n"
                             f"loopwatch replay: {sidecar}:1: skipped: {NOT_CODEX}\n"
                             "loopwatch replay: no events in 2 file(s) read as codex: is --format right? "
                             "(the others: claude-code, openclaw, swe-agent)\n")


def test_replay_of_event_files_without_events_still_exits_0(tmp_path):
    result = run("replay", str(write_jsonl(tmp_path / "events.jsonl", [])))
    assert result.exit_code == 0
    assert result.stderr.splitlines()[1] == "events:     0 (none); 0 bad record(s) skipped"


@pytest.mark.parametrize("command", ["replay", "report"])
def test_standard_input_with_a_session_format_is_a_usage_error(command):
    result = CliRunner().invoke(loopwatch, [command, "--format", "codex", "-"], input="{}\n")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        "Error: recorded sessions are read from files or folders, not standard input")


def test_replay_applies_config(tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text("// sensitive\n{tools: {loopDetection: {enabled: true, warningThreshold: 2,"
                      " criticalThreshold: 3, globalCircuitBreakerThreshold: 4,},},}\n", encoding="utf-8")
    events = [read_call(f"e{i}", f"call-{i}") for i in range(1, 5)]
    result = run("replay", "--config", str(config), str(write_jsonl(tmp_path / "events.jsonl", events)))
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["verdict"] for r in records] == ["allow", "allow", "allow", "block"]
    assert records[2]["detection"]["count"] == 2 and records[2]["warning"]["emitted"] is False
    assert records[3]["block_reason"] == ("CRITICAL: Called read with identical arguments and identical outcomes "
                                          "3 times. Session execution blocked to prevent runaway loops.")
    assert records[3]["evidence"] == ["e1", "e2", "e3"]
    assert "blocks:     1, aborts: 0" in result.stderr.splitlines()
    assert "  generic_repeat             critical  block      1" in result.stderr.splitlines()
    assert "  generic_repeat             warning   suppressed 1" in result.stderr.splitlines()


def test_replay_invalid_config_exits_2_with_openclaw_message(tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text("{tools: {loopDetection: {warningThreshold: 10, criticalThreshold: 10}}}", encoding="utf-8")
    events = write_jsonl(tmp_path / "events.jsonl", EVENTS)
    result = run("replay", "--config", str(config), str(events))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == ("loopwatch: invalid configuration:\n"
                             f"{config}: tools.loopDetection.criticalThreshold: "
                             "tools.loopDetection.warningThreshold must be lower than criticalThreshold.\n")


LENIENT_ONLY = "{tools: {loopDetection: {enabled: true, warningThreshold: 2, criticalThreshold: 2}}}"  # inverted


def test_replay_config_validate_false_loads_a_config_strict_validation_refuses(tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text(LENIENT_ONLY, encoding="utf-8")
    events = write_jsonl(tmp_path / "events.jsonl", [read_call(f"e{i}", f"call-{i}") for i in range(1, 5)])
    refused = run("replay", "--config", str(config), str(events))
    assert refused.exit_code == 2 and refused.stdout == ""
    assert refused.stderr == ("loopwatch: invalid configuration:\n"
                              f"{config}: tools.loopDetection.criticalThreshold: "
                              "tools.loopDetection.warningThreshold must be lower than criticalThreshold.\n")
    assert run("replay", "--config-validate", "true", "--config", str(config), str(events)).exit_code == 2

    lenient = run("replay", "--config-validate", "false", "--config", str(config), str(events))
    assert lenient.exit_code == 0, lenient.stderr
    records = [json.loads(line) for line in lenient.stdout.splitlines()]
    assert [r["verdict"] for r in records] == ["allow", "allow", "allow", "block"]
    assert records[3]["detection"]["count"] == 3  # criticalThreshold raised to warning + 1, as OpenClaw does at runtime
    clamped = tmp_path / "clamped.json"
    clamped.write_text(LENIENT_ONLY.replace("criticalThreshold: 2", "criticalThreshold: 3"), encoding="utf-8")
    assert lenient.stdout == run("replay", "--config", str(clamped), str(events)).stdout

    from_env = CliRunner().invoke(loopwatch, ["replay", "--config", str(config), str(events)],
                                  env={"LOOPWATCH_CONFIG_VALIDATE": "false"})
    assert from_env.exit_code == 0 and from_env.stdout == lenient.stdout


def test_replay_help_documents_config_validate_as_the_worker_does():
    text = " ".join(run("replay", "--help").stdout.split())
    assert ("--config-validate BOOLEAN Validate the config file as OpenClaw does at load time "
            "(false = runtime clamping only). [env var: LOOPWATCH_CONFIG_VALIDATE; default: True]") in text
    from streams.worker.settings import WorkerSettings

    field = WorkerSettings.model_fields["config_validate"]
    assert (field.default, field.description) == (True, "Validate the config file as OpenClaw does at load time "
                                                         "(false = runtime clamping only).")


def test_replay_unparsable_config_exits_2(tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text("{tools: {loopDetection: {enabled: true", encoding="utf-8")
    result = run("replay", "--config", str(config), str(write_jsonl(tmp_path / "events.jsonl", EVENTS)))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"loopwatch: invalid configuration:\n{config}:1:39: not valid JSON5: "
                                    "Unexpected end of input")


# ------------------------------------------------------------------ conformance


@skip_without("vectors.jsonl")
def test_conformance_passes_all_vectors():
    result = run("conformance", str(VECTORS))
    assert result.exit_code == 0
    assert result.stdout == "92 passed, 0 failed\n"


@skip_without("vectors.jsonl")
def test_conformance_verbose_lists_scenarios():
    result = run("conformance", "-v", str(VECTORS))
    lines = result.stdout.splitlines()
    assert lines[0] == "ok   enabled-unset-detectors-off-guard-on" and lines[-1] == "92 passed, 0 failed"
    assert len(lines) == 93


@skip_without("vectors.jsonl")
def test_conformance_tampered_copy_fails_naming_scenario_event_field(tmp_path):
    scenarios = [json.loads(line) for line in VECTORS.read_text(encoding="utf-8").splitlines()]
    target = next(s for s in scenarios if s["name"] == "generic-critical-boundary-default")
    assert target["expected"][20]["detection"]["count"] == 20
    target["expected"][20]["detection"]["count"] = 21
    tampered = write_jsonl(tmp_path / "tampered.jsonl", scenarios)
    result = run("conformance", str(tampered))
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "FAIL generic-critical-boundary-default: event 20: detection.count: expected 21, got 20",
        "91 passed, 1 failed",
    ]


@skip_without("vectors.jsonl")
def test_conformance_counts_a_line_that_is_not_a_scenario_as_failed(tmp_path):
    lines = VECTORS.read_text(encoding="utf-8").splitlines()[:2] + ["{broken"]
    path = write_jsonl(tmp_path / "broken.jsonl", lines)
    result = run("conformance", str(path))
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0].startswith(f"FAIL {path}:3: not JSON: ")
    assert result.stdout.splitlines()[-1] == "2 passed, 1 failed"


def test_conformance_on_a_file_without_scenarios_fails(tmp_path):
    path = write_jsonl(tmp_path / "empty.jsonl", [])
    result = run("conformance", str(path))
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == "0 passed, 0 failed"


@pytest.mark.parametrize("args, kind", [
    (["replay"], "event"),
    (["report"], "verdict"),
    (["report", "--format", "events"], "event"),
], ids=["replay", "report", "report-events"])
def test_a_folder_as_a_file_says_to_use_a_session_format(tmp_path, args, kind):
    from click.testing import CliRunner

    from streams.commands import loopwatch
    result = CliRunner().invoke(loopwatch, [*args, str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert f"is a folder: {kind} files are read one by one" in result.output
    assert "--format auto, or openclaw" in result.output


def test_produce_refuses_a_folder_before_connecting(tmp_path):
    result = CliRunner().invoke(loopwatch, ["produce", "--bootstrap", "127.0.0.1:1", str(tmp_path)])
    assert result.exit_code == 2
    assert "is a directory" in result.output


def test_report_on_event_files_without_format_says_which_format(tmp_path):
    from click.testing import CliRunner

    from streams.commands import loopwatch
    events = tmp_path / "events.jsonl"
    events.write_text('{"type": "tool_call", "run_id": "r", "session_id": "s", "tool_name": "read"}\n')
    result = CliRunner().invoke(loopwatch, ["report", str(events)])
    assert result.exit_code == 2
    assert "give --format events" in result.output


@skip_without("vectors.jsonl")
def test_replay_profile_option_and_conformance_files_of_both_profiles(tmp_path):
    events = tmp_path / "loop.jsonl"
    events.write_text("".join(json.dumps(read_call(f"e{n}", f"call-{n}")) + "\n" for n in range(22)))
    config = tmp_path / "on.json"
    config.write_text('{"tools": {"loopDetection": {"enabled": true}}}')
    runner = CliRunner()
    old = runner.invoke(loopwatch, ["replay", "-q", "--config", str(config), str(events)])
    new = runner.invoke(loopwatch, ["replay", "--config", str(config), "--profile", "openclaw-2026.9.6", str(events)])
    assert old.exit_code == new.exit_code == 0, old.output + new.output
    old_v = [json.loads(line) for line in old.stdout.splitlines()]
    new_v = [json.loads(line) for line in new.stdout.splitlines()]
    assert [v["verdict"] for v in old_v[20:]] == ["block", "block"]
    assert [v["verdict"] for v in new_v[20:]] == ["block", "abort"]
    assert [v.get("tool_loop_recovery") for v in new_v[20:]] == ["recovery", "terminal"]
    assert "profile openclaw-2026.9.6 (thresholds fixed by that release; only enabled is read)" in new.stderr
    own = Path(__file__).resolve().parents[1] / "fixtures" / "vectors-2026.9-own.jsonl"
    both = runner.invoke(loopwatch, ["conformance", str(VECTORS), str(own)])
    assert both.exit_code == 0 and both.stdout.splitlines()[-1] == "111 passed, 0 failed"


def test_replay_help_says_why_it_keys_by_session_and_the_worker_by_run():
    shown = " ".join(CliRunner().invoke(loopwatch, ["replay", "--help"]).output.split())
    assert "'session' (the default) is OpenClaw's own" in shown and "the conformance vectors check it" in shown
    assert "as the worker keys its records by default" in shown
    assert "to compare with a worker's verdicts, use 'run'" in shown
    worker = " ".join(CliRunner().invoke(loopwatch, ["worker", "--help"]).output.split())
    assert "[default: run]" in worker and "docs/keying.md" in worker
