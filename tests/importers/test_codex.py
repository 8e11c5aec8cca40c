"""streams.importers.codex on a synthetic ``codex exec --json`` capture."""

from pathlib import Path

from streams.importers import detect_format, import_paths

FIX = Path(__file__).parent / "fixtures" / "codex" / "th-1.codex_stdout.jsonl"


def test_commands_pairs_and_overlap():
    events = list(import_paths("codex", [FIX]))
    assert [(e["type"], e["tool_call_id"], e.get("tool_name"), e.get("outcome_follows", False), e["source"]["line"])
            for e in events] == [
        ("tool_call", "item_1", "shell", False, 4),
        ("tool_call", "item_2", "shell", True, 6),  # item_3 starts before item_2 completes
        ("tool_call", "item_3", "shell", True, 7),  # starts while item_2 runs: never inline
        ("tool_result", "item_3", "shell", False, 8),
        ("tool_result", "item_2", "shell", False, 9),
        ("tool_call", "item_4", "update_plan", False, 10),
        ("tool_call", "item_5", "apply_patch", False, 12),
    ]
    first, late = events[0], events[4]
    assert first["args"] == {"command": "/bin/bash -lc ls"}
    assert first["result"] == {"content": [{"type": "text", "text": "a\nb\n"}],
                               "details": {"status": "completed", "exitCode": 0, "aggregated": "a\nb\n"}}
    # a non-zero exit is a returned result, not a thrown error
    assert late["error"] is None and late["result"]["details"]["exitCode"] == 1
    # a result carries its call's tool name and args (spec §9)
    assert late["args"] == {"command": "/bin/bash -lc 'cat nope'"} and late["agent_id"] == "codex"
    assert {e["session_id"] for e in events} == {"th-1"} and {e["run_id"] for e in events} == {"th-1#turn1"}
    assert events[5]["args"] == {"items": [{"text": "read", "completed": False}]}
    assert events[6]["args"] == {"changes": [{"path": "/w/a.md", "kind": "add"}]}


def test_a_call_started_while_another_runs_gets_its_result_after_the_earlier_completion():
    events = list(import_paths("codex", [FIX.with_name("th-2.codex_stdout.jsonl")]))
    # item_1 starts (line 4) while item_0 runs and completes (6) after item_0 (5): its outcome is
    # recorded after item_0's, not at its start
    assert [(e["type"], e["tool_call_id"], e["source"]["line"]) for e in events] == [
        ("tool_call", "item_0", 3), ("tool_call", "item_1", 4),
        ("tool_result", "item_0", 5), ("tool_result", "item_1", 6),
        ("tool_call", "item_2", 7),  # alone: one event, outcome inline
    ]
    assert events[3]["result"]["content"][0]["text"] == "# a\n"
    assert events[4]["result"]["details"]["exitCode"] == 0 and "outcome_follows" not in events[4]
    assert [e["event_id"] for e in events] == ["th-2:3:0", "th-2:4:0", "th-2:5:0", "th-2:6:0", "th-2:7:0"]


def test_detect_format():
    assert detect_format(FIX) == "codex"
    assert detect_format(Path(__file__).parent / "fixtures" / "openclaw/agents/bot1/sessions/oc-s1.jsonl") == "openclaw"
    assert detect_format(Path(__file__).parent / "fixtures" / "claude-code/cc-s1.jsonl") == "claude-code"


def test_a_file_neither_rollout_nor_exec_output_is_one_error_not_silence(tmp_path):
    from streams.importers import SessionFormatError, codex

    path = tmp_path / "other.jsonl"
    path.write_text('{"type": "session_meta", "ayload": {}}\n{"type": "response_item"}\n')  # a damaged rollout head
    errors: list[SessionFormatError] = []
    assert list(codex.read(path, errors.append)) == []
    assert [(e.line, e.reason) for e in errors] == [(1, (
        "neither a Codex session file (its first record is no session_meta, response_item, ... record with a "
        "payload) nor `codex exec --json` output (no thread, turn or item event)"))]


def test_an_exec_event_without_a_type_is_passed_over(tmp_path):
    from streams.importers import codex

    path = tmp_path / "exec.jsonl"
    path.write_text('{"type": "thread.started", "thread_id": "t"}\n{"type": "turn.started"}\n'
                    '{"item": {"id": "i1", "type": "command_execution", "command": "ls"}}\n'
                    '{"type": "item.completed", "item": {"id": "i1", "type": "command_execution", "command": "ls", '
                    '"aggregated_output": "a", "exit_code": 0, "status": "completed"}}\n')
    events = list(codex.read(path))
    assert [(e["type"], e["tool_call_id"], e["source"]["line"]) for e in events] == [("tool_call", "i1", 3)]
    assert events[0]["result"]["content"][0]["text"] == "a"
