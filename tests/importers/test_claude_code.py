"""streams.importers.claude_code on synthetic sessions: one with a sub-agent side file, one whose
sub-agent left only progress records (tests/importers/fixtures/claude-code)."""

from pathlib import Path

import pytest

from streams.detection import Engine
from streams.detection.config import OpenClawConfig
from streams.importers import SessionFormatError, import_paths, iter_files
from streams.offline.replay import Replayer

FIX = Path(__file__).parent / "fixtures" / "claude-code"
S2 = FIX / "cc-s2.jsonl"


def test_main_log_before_sub_agent_log():
    assert [p.name for p in iter_files("claude-code", [FIX])] == ["cc-s1.jsonl", "agent-a1b2c3.jsonl", "cc-s2.jsonl"]


def test_a_main_log_named_alone_brings_its_sub_agent_logs():
    assert [p.name for p in iter_files("claude-code", [FIX / "cc-s1.jsonl"])] == ["cc-s1.jsonl", "agent-a1b2c3.jsonl"]


def test_tool_calls_results_errors_runs_and_compaction():
    events = list(import_paths("claude-code", [FIX / "cc-s1.jsonl"]))
    summary = [(e["type"], e.get("tool_call_id"), e.get("tool_name"), e["run_id"], e["agent_id"], e["source"]["line"])
               for e in events]
    assert summary == [
        # two blocks of one response (m1) written before either result: checked together
        ("tool_call", "toolu_A", "Bash", "cc-s1:u1", "main", 3),
        ("tool_call", "toolu_B", "Read", "cc-s1:u1", "main", 4),
        ("tool_result", "toolu_A", "Bash", "cc-s1:u1", "main", 6),
        ("tool_result", "toolu_B", "Read", "cc-s1:u1", "main", 7),
        ("compaction_retry", None, None, "cc-s1:u1", "main", 9),  # summary record does not start a run
        ("tool_call", "toolu_C", "Bash", "cc-s1:u1", "main", 11),
        ("tool_call", "toolu_D", "Glob", "cc-s1:u11", "main", 14),
        ("tool_call", "toolu_S", "WebSearch", "cc-s1:a1b2c3", "a1b2c3", 2),
    ]
    a, b, a_out, b_out, _, c, d, s = events
    assert a["outcome_follows"] is True and b["outcome_follows"] is True
    assert (a_out["args"], b_out["args"]) == ({"command": "pytest -q"}, {"file_path": "/x.py"})
    assert (a_out["result"], a_out["error"]) == (None, "1 failed")  # is_error -> thrown
    assert b_out["result"] == {"content": [{"type": "text", "text": "line1"}, {"type": "text", "text": "line2"}],
                               "details": {}}
    assert c["result"] == {"content": [{"type": "text", "text": "ok"}], "details": {}} and "outcome_follows" not in c
    assert (d["result"], d["error"]) == (None, None)  # no result recorded
    assert s["session_id"] == "cc-s1" and s["event_id"] == "cc-s1/a1b2c3:2:0"
    assert a["ts"] == 1893456002000 and a_out["event_id"] == "cc-s1:6:0"


def _s2():
    return list(import_paths("claude-code", [S2]))


def test_blocks_written_before_any_result_are_one_batch_later_blocks_follow_the_log():
    seq = [(e["type"], e["tool_call_id"], e["source"]["line"], e.get("outcome_follows", False))
           for e in _s2() if e["agent_id"] == "main"]
    assert seq[:6] == [("tool_call", "toolu_Ra", 2, True), ("tool_call", "toolu_Rb", 3, True),
                       ("tool_call", "toolu_Rc", 4, True), ("tool_result", "toolu_Rb", 5, False),
                       ("tool_result", "toolu_Ra", 6, False), ("tool_result", "toolu_Rc", 7, False)]
    # m2's second block was written after the first block's result: it was checked after it
    assert seq[6:8] == [("tool_call", "toolu_E1", 8, False), ("tool_call", "toolu_E2", 10, False)]


def test_three_identical_reads_of_one_response_see_each_other_pending():
    config = OpenClawConfig({"tools": {"loopDetection": {"enabled": True, "warningThreshold": 2,
                                                         "criticalThreshold": 3}}})
    replayer = Replayer(Engine(config))
    verdicts = [replayer.apply(e, e["event_id"]) for e in _s2()[:6]]
    # the third call sees two identical calls, neither with an outcome yet: a warning, not a block
    assert [(v.get("detection") or {}).get("level") for v in verdicts[:3]] == [None, None, "warning"]
    assert verdicts[2]["decision"] != "block"


def test_a_sub_agent_without_side_file_is_read_from_progress_records():
    events = _s2()
    sub = [e for e in events if e["agent_id"] == "b7"]
    assert [(e["type"], e["tool_call_id"], e["tool_name"], e["source"]["line"]) for e in sub] == [
        ("tool_call", "toolu_W1", "WebSearch", 14), ("tool_call", "toolu_W2", "WebFetch", 16)]
    assert sub[0]["args"] == {"query": "q"}
    assert sub[0]["result"] == {"content": [{"type": "text", "text": "hits"}], "details": {}}
    assert (sub[1]["result"], sub[1]["error"]) == (None, "page")
    assert {e["run_id"] for e in sub} == {"cc-s2:b7"} and sub[0]["event_id"] == "cc-s2/b7:14:0"
    assert all(e["source"] == {"path": str(S2), "line": e["source"]["line"], "via": "agent_progress"} for e in sub)
    # the Task call waits for its result while the sub-agent works: it is not inline
    task = [e for e in events if e["tool_call_id"] == "toolu_T"]
    assert [(e["type"], e["source"]["line"]) for e in task] == [("tool_call", 12), ("tool_result", 18)]


def test_a_sub_agent_with_calls_missing_is_named(tmp_path):
    lines = S2.read_text().splitlines()
    short = tmp_path / "cc-s2.jsonl"
    short.write_text("\n".join(lines[:15] + lines[17:]) + "\n")  # drop the WebFetch call and its result
    with pytest.raises(SessionFormatError, match=r"cc-s2\.jsonl:16: sub-agent b7: no side file .* 1 of its 2 "
                                                 r"tool call\(s\) in progress records: 1 missing"):
        list(import_paths("claude-code", [short]))
    # with a side file the progress records are not read again
    side = tmp_path / "cc-s2" / "subagents" / "agent-b7.jsonl"
    side.parent.mkdir(parents=True)
    side.write_text((FIX / "cc-s1" / "subagents" / "agent-a1b2c3.jsonl").read_text())
    events = list(import_paths("claude-code", [short]))
    assert not any(e["source"].get("via") for e in events)
    assert [e["source"]["path"] for e in events if e["agent_id"] != "main"] == [str(side)]
