"""streams.importers.openclaw on synthetic transcripts (tests/importers/fixtures/openclaw)."""

from pathlib import Path

import pytest

from streams.detection import Engine
from streams.detection.config import OpenClawConfig
from streams.importers import SessionFormatError, import_paths, iter_files
from streams.importers.openclaw import is_transcript, sidecar_path
from streams.offline.replay import Replayer

FIX = Path(__file__).parent / "fixtures" / "openclaw"
S1 = FIX / "agents/bot1/sessions/oc-s1.jsonl"
S2 = FIX / "agents/bot2/sessions/oc-s2.jsonl.reset.2030-01-02T00-00-00.000Z"
S3 = FIX / "agents/bot3/sessions/oc-s3.jsonl"


def _events(path):
    return list(import_paths("openclaw", [path]))


def test_discovery_pairs_sidecar_and_never_reads_it_as_a_transcript():
    files = [p.name for p in iter_files("openclaw", [FIX])]
    assert files == ["oc-s1.jsonl", "oc-s2.jsonl.reset.2030-01-02T00-00-00.000Z", "oc-s3.jsonl"]
    assert not is_transcript(Path("x.trajectory.jsonl"))
    assert is_transcript(Path("x.jsonl.deleted.2030-01-01T00-00-00.000Z"))
    assert sidecar_path(S2).name == "oc-s2.trajectory.jsonl"


def test_calls_carry_result_as_stored_and_thrown_errors_as_text():
    events = _events(S1)
    # line 4 holds two executed calls: both are checked and recorded before either has a result
    assert [(e["type"], e["tool_call_id"], e["source"]["line"], e.get("outcome_follows")) for e in events[:4]] == [
        ("tool_call", "call_1", 4, True), ("tool_call", "call_2", 4, True),
        ("tool_result", "call_1", 5, None), ("tool_result", "call_2", 6, None),
    ]
    exec_call, write_call, exec_result, write_result = events[:4]
    assert (exec_call["tool_name"], exec_call["args"]) == ("exec", {"command": "make"})
    assert exec_call["result"] is None and exec_call["error"] is None
    # the result carries its call's tool name and args (spec §9)
    assert (exec_result["tool_name"], exec_result["args"]) == ("exec", {"command": "make"})
    assert (write_result["tool_name"], write_result["args"]) == ("write", {"file": "x"})
    # non-zero exit is a returned result, with content and details kept as-is
    assert exec_result["error"] is None
    assert exec_result["result"]["details"] == {"status": "completed", "exitCode": 2, "durationMs": 12,
                                                "aggregated": "make: *** no rule"}
    assert exec_result["result"]["content"][0]["text"].endswith("(Command exited with code 2)")
    # isError:true -> thrown Error whose message is the joined text
    assert write_result["result"] is None
    assert write_result["error"] == 'Validation failed for tool "write":\n  - content: required'
    assert exec_call["session_id"] == exec_result["session_id"] == "oc-s1"
    assert exec_call["agent_id"] == exec_result["agent_id"] == "bot1"
    assert "session_key" not in exec_call and "session_key" not in exec_result
    assert exec_call["source"] == {"path": str(S1), "line": 4} and exec_call["event_id"] == "oc-s1:4:0"
    assert write_call["event_id"] == "oc-s1:4:1" and exec_result["event_id"] == "oc-s1:5:0"
    assert exec_call["ts"] == 1893456003000 and exec_result["ts"] == 1893456004000


def test_a_thrown_error_the_adapter_wrote_as_a_result_is_an_error():
    by_id = {e["tool_call_id"]: e for e in _events(S3) if e["type"] == "tool_call"}
    # {status: "error", tool, error} with isError false: the tool threw, OpenClaw's wrapper recorded that
    assert by_id["e1"]["result"] is None
    assert by_id["e1"]["error"] == "Could not find the exact text in x."
    # exec's own details with status "error" (and its other fields) are a returned result
    assert by_id["x1"]["error"] is None
    assert by_id["x1"]["result"]["details"] == {"status": "error", "exitCode": 1, "durationMs": 2, "aggregated": ""}


def test_parallel_calls_of_one_message_warn_where_inlined_outcomes_would_block():
    events = _events(S3)
    batch = [e for e in events if e["tool_call_id"].startswith("p")]
    assert [(e["type"], e["source"]["line"]) for e in batch] == (
        [("tool_call", 3)] * 6 + [("tool_result", line) for line in range(4, 10)])
    assert all(e["outcome_follows"] for e in batch[:6])
    assert [e["tool_call_id"] for e in batch[6:]] == ["p1", "p2", "p3", "p4", "p5", "p6"]
    sensitive = OpenClawConfig({"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3,
                                                            "criticalThreshold": 5}}})
    replayer = Replayer(Engine(sensitive))
    found = [replayer.apply(e, e["event_id"])["detection"] for e in batch[:6]]
    # each call sees the earlier ones pending: identical args only warn (count 3, 4, 5)
    assert [(d.get("level"), d.get("count")) for d in found] == [
        (None, None), (None, None), (None, None), ("warning", 3), ("warning", 4), ("warning", 5)]
    inlined = Replayer(Engine(sensitive))
    outcomes = {e["tool_call_id"]: e for e in batch[6:]}
    folded = [{**c, "result": outcomes[c["tool_call_id"]]["result"], "outcome_follows": False} for c in batch[:6]]
    # had each outcome been recorded before the next call, the 6th would see 5 identical outcomes
    assert [inlined.apply(e, e["event_id"])["decision"] for e in folded][-1] == "block"


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
    assert events[2]["result"]["content"][0]["text"].startswith("make: *** no rule")
    assert [e["source"]["line"] for e in events if e["type"] == "compaction_retry"] == [9]
    assert not any(14 <= e["source"]["line"] <= 18 for e in events)


def test_runs_without_sidecar_from_user_messages_and_run_closers():
    events = _events(S1)
    runs = [(e["source"]["line"], e["run_id"]) for e in events]
    assert runs == [
        (4, "run-build"), (4, "run-build"), (5, "run-build"), (6, "run-build"),  # named by its closer
        (9, "oc-s1#L9"),  # compaction written after the run closed -> next run
        (11, "oc-s1#L9"), (12, "oc-s1#L9"),  # heartbeat run
        (20, "oc-s1#L19"), (22, "oc-s1#L19"),  # cron run after the rewritten copy
    ]


def test_a_model_fallback_retry_goes_on_with_the_same_run():
    runs = [(e["source"]["line"], e["run_id"]) for e in _events(S3)]
    # prompt-error (14), the fallback model's snapshot 2 s later (15), the same prompt again (16):
    # the retry's call (17) is in the run the marker names
    assert (17, "run-q") in runs and (18, "run-q") not in runs  # 18 is folded into 17
    assert {run for line, run in runs if line <= 17} == {"run-q"}
    # the same prompt again 10 minutes after a failure (22-23) is the next run, not a fallback
    assert runs[-1] == (24, "oc-s3#L22")


def test_runs_and_session_key_from_sidecar():
    events = _events(S2)
    assert [(e["type"], e["run_id"], e["source"]["line"]) for e in events] == [
        ("tool_call", "run-one", 4), ("compaction_retry", "run-one", 6), ("tool_call", "run-two", 9),
    ]
    # every event of the session carries its session key: the compaction arms the guard its calls see
    assert [e["session_key"] for e in events] == ["agent:bot2:main"] * 3
    assert events[0]["agent_id"] == events[1]["agent_id"] == "bot2"
    assert events[0]["result"] == {"content": [{"type": "text", "text": "# tasks"}]}  # no details stored


def test_event_ids_are_file_line_and_index_so_reimports_match():
    # <session id>:<line of the event>:<n-th event of that line>: stable across imports and machines
    ids = [e["event_id"] for e in _events(FIX)]
    assert ids[:12] == [
        "oc-s1:4:0", "oc-s1:4:1", "oc-s1:5:0", "oc-s1:6:0", "oc-s1:9:0", "oc-s1:11:0", "oc-s1:12:0",
        "oc-s1:20:0", "oc-s1:22:0", "oc-s2:4:0", "oc-s2:6:0", "oc-s2:9:0"]
    assert ids[12:20] == [f"oc-s3:3:{n}" for n in range(6)] + ["oc-s3:4:0", "oc-s3:5:0"]
    assert len(set(ids)) == len(ids) and ids == [e["event_id"] for e in _events(FIX)]


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
