"""streams.importers.codex on a synthetic ``codex exec --json`` capture."""

from pathlib import Path

from streams.importers import detect_format, import_paths

FIX = Path(__file__).parent / "fixtures" / "codex" / "th-1.codex_stdout.jsonl"


def test_commands_pairs_and_overlap():
    events = list(import_paths("codex", [FIX]))
    assert [(e["type"], e["tool_call_id"], e.get("tool_name"), e.get("outcome_follows", False)) for e in events] == [
        ("tool_call", "item_1", "shell", False),
        ("tool_call", "item_2", "shell", True),  # item_3 starts before item_2 completes
        ("tool_call", "item_3", "shell", False),
        ("tool_result", "item_2", None, False),
        ("tool_call", "item_4", "update_plan", False),
        ("tool_call", "item_5", "apply_patch", False),
    ]
    first, late = events[0], events[3]
    assert first["args"] == {"command": "/bin/bash -lc ls"}
    assert first["result"] == {"content": [{"type": "text", "text": "a\nb\n"}],
                               "details": {"status": "completed", "exitCode": 0, "aggregated": "a\nb\n"}}
    # a non-zero exit is a returned result, not a thrown error
    assert late["error"] is None and late["result"]["details"]["exitCode"] == 1
    assert {e["session_id"] for e in events} == {"th-1"} and {e["run_id"] for e in events} == {"th-1#turn1"}
    assert events[4]["args"] == {"items": [{"text": "read", "completed": False}]}
    assert events[5]["args"] == {"changes": [{"path": "/w/a.md", "kind": "add"}]}


def test_detect_format():
    assert detect_format(FIX) == "codex"
    assert detect_format(Path(__file__).parent / "fixtures" / "openclaw/agents/bot1/sessions/oc-s1.jsonl") == "openclaw"
    assert detect_format(Path(__file__).parent / "fixtures" / "claude-code/cc-s1.jsonl") == "claude-code"
