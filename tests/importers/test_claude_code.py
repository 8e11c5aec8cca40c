"""streams.importers.claude_code on a synthetic session with a sub-agent."""

from pathlib import Path

from streams.importers import import_paths, iter_files

FIX = Path(__file__).parent / "fixtures" / "claude-code"


def test_main_log_before_sub_agent_log():
    assert [p.name for p in iter_files("claude-code", [FIX])] == ["cc-s1.jsonl", "agent-a1b2c3.jsonl"]


def test_tool_calls_results_errors_runs_and_compaction():
    events = list(import_paths("claude-code", [FIX]))
    summary = [(e["type"], e.get("tool_call_id"), e.get("tool_name"), e["run_id"], e["agent_id"]) for e in events]
    assert summary == [
        ("tool_call", "toolu_A", "Bash", "cc-s1:u1", "main"),
        ("tool_call", "toolu_B", "Read", "cc-s1:u1", "main"),
        ("compaction_retry", None, None, "cc-s1:u1", "main"),  # summary record does not start a run
        ("tool_call", "toolu_C", "Bash", "cc-s1:u1", "main"),
        ("tool_call", "toolu_D", "Glob", "cc-s1:u11", "main"),
        ("tool_call", "toolu_S", "WebSearch", "cc-s1:a1b2c3", "a1b2c3"),
    ]
    a, b, _, c, d, s = events
    assert a["args"] == {"command": "pytest -q"}
    assert (a["result"], a["error"]) == (None, "1 failed")  # is_error -> thrown
    assert b["result"] == {"content": [{"type": "text", "text": "line1"}, {"type": "text", "text": "line2"}],
                           "details": {}}
    assert c["result"] == {"content": [{"type": "text", "text": "ok"}], "details": {}}
    assert (d["result"], d["error"]) == (None, None)  # no result recorded
    assert s["session_id"] == "cc-s1" and s["event_id"] == "cc-s1/a1b2c3:2:0"
    assert a["source"]["line"] == 3 and a["ts"] == 1893456002000
