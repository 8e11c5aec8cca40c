"""streams.importers.openclaw on synthetic transcripts (tests/importers/fixtures/openclaw)."""

from pathlib import Path

import pytest

from streams.importers import SessionFormatError, import_paths, iter_files
from streams.importers.openclaw import is_transcript, sidecar_path

FIX = Path(__file__).parent / "fixtures" / "openclaw"
S1 = FIX / "agents/bot1/sessions/oc-s1.jsonl"
S2 = FIX / "agents/bot2/sessions/oc-s2.jsonl.reset.2030-01-02T00-00-00.000Z"


def _events(path):
    return list(import_paths("openclaw", [path]))


def test_discovery_pairs_sidecar_and_never_reads_it_as_a_transcript():
    files = [p.name for p in iter_files("openclaw", [FIX])]
    assert files == ["oc-s1.jsonl", "oc-s2.jsonl.reset.2030-01-02T00-00-00.000Z"]
    assert not is_transcript(Path("x.trajectory.jsonl"))
    assert is_transcript(Path("x.jsonl.deleted.2030-01-01T00-00-00.000Z"))
    assert sidecar_path(S2).name == "oc-s2.trajectory.jsonl"


def test_calls_carry_result_as_stored_and_thrown_errors_as_text():
    calls = [e for e in _events(S1) if e["type"] == "tool_call"]
    exec_call, write_call = calls[0], calls[1]
    assert (exec_call["tool_call_id"], exec_call["tool_name"], exec_call["args"]) == ("call_1", "exec", {"command": "make"})
    # non-zero exit is a returned result, with content and details kept as-is
    assert exec_call["error"] is None
    assert exec_call["result"]["details"] == {"status": "completed", "exitCode": 2, "durationMs": 12,
                                              "aggregated": "make: *** no rule"}
    assert exec_call["result"]["content"][0]["text"].endswith("(Command exited with code 2)")
    # isError:true -> thrown Error whose message is the joined text
    assert write_call["result"] is None
    assert write_call["error"] == 'Validation failed for tool "write":\n  - content: required'
    assert exec_call["session_id"] == "oc-s1" and exec_call["agent_id"] == "bot1"
    assert "session_key" not in exec_call
    assert exec_call["source"] == {"path": str(S1), "line": 4} and exec_call["event_id"] == "oc-s1:4:0"
    assert write_call["event_id"] == "oc-s1:4:1"
    assert exec_call["ts"] == 1893456003000


def test_orphan_results_become_calls_with_null_args_and_aborted_calls_are_skipped():
    calls = [e for e in _events(S1) if e["type"] == "tool_call"]
    ghosts = [c for c in calls if c["tool_call_id"].startswith("ghost")]
    assert [(g["tool_name"], g["args"], g["error"], g["source"]["line"]) for g in ghosts] == [
        ("read_file", None, "Tool read_file not found", 11),
        ("read_file", None, "Tool read_file not found", 12),
    ]
    assert "call_3" not in {c["tool_call_id"] for c in calls}  # stopReason aborted, never executed
    unanswered = [c for c in calls if c["tool_call_id"] == "call_5"]
    assert unanswered[0]["result"] is None and unanswered[0]["error"] is None


def test_rewritten_branch_is_not_imported_twice():
    events = _events(S1)
    ids = [e.get("tool_call_id") for e in events if e["type"] == "tool_call"]
    assert ids == ["call_1", "call_2", "ghost_1", "ghost_2", "call_4", "call_5"]
    # the copy (lines 14-18) carries a truncated result; the live one is kept
    assert events[0]["result"]["content"][0]["text"].startswith("make: *** no rule")
    assert [e["source"]["line"] for e in events if e["type"] == "compaction_retry"] == [9]
    assert not any(14 <= e["source"]["line"] <= 18 for e in events)


def test_runs_without_sidecar_from_user_messages_and_run_closers():
    events = _events(S1)
    runs = [(e["source"]["line"], e["run_id"]) for e in events]
    assert runs == [
        (4, "run-build"), (4, "run-build"),  # named by the prompt-error entry that closes it
        (9, "oc-s1#L9"),  # compaction written after the run closed -> next run
        (11, "oc-s1#L9"), (12, "oc-s1#L9"),  # heartbeat run
        (20, "oc-s1#L19"), (22, "oc-s1#L19"),  # cron run after the rewritten copy
    ]


def test_runs_and_session_key_from_sidecar():
    events = _events(S2)
    assert [(e["type"], e["run_id"], e["source"]["line"]) for e in events] == [
        ("tool_call", "run-one", 4), ("compaction_retry", "run-one", 6), ("tool_call", "run-two", 9),
    ]
    assert events[0]["session_key"] == "agent:bot2:main"
    assert events[0]["agent_id"] == "bot2"
    assert events[0]["result"] == {"content": [{"type": "text", "text": "# tasks"}]}  # no details stored


def test_event_ids_are_file_line_and_index_so_reimports_match():
    # <session id>:<line of the call>:<n-th event of that line>: stable across imports and machines
    assert [e["event_id"] for e in _events(FIX)] == [
        "oc-s1:4:0", "oc-s1:4:1", "oc-s1:9:0", "oc-s1:11:0", "oc-s1:12:0", "oc-s1:20:0", "oc-s1:22:0",
        "oc-s2:4:0", "oc-s2:6:0", "oc-s2:9:0"]


def test_malformed_line_is_reported_with_path_and_line(tmp_path):
    bad = tmp_path / "agents" / "a" / "sessions" / "x.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_text(S1.read_text().splitlines()[0] + "\n{broken\n")
    with pytest.raises(SessionFormatError, match=r"x\.jsonl:2: not JSON"):
        _events(bad)
    seen = []
    assert list(import_paths("openclaw", [bad], on_error=seen.append)) == []
    assert [(e.line, e.path) for e in seen] == [(2, str(bad))]


def test_format_detection_tolerates_a_first_line_that_is_not_an_object(tmp_path):
    from streams.importers import detect_format
    odd = tmp_path / "odd.jsonl"
    odd.write_text("[1]\n")
    assert detect_format(odd) is None
