"""streams.importers.swe_agent on a synthetic ``.traj`` file."""

from pathlib import Path

import pytest

from streams.importers import SessionFormatError, import_paths

FIX = Path(__file__).parent / "fixtures" / "swe-agent" / "demo__repo-1.traj"


def test_steps_become_calls():
    events = list(import_paths("swe-agent", [FIX]))
    assert [(e["tool_call_id"], e["tool_name"], e["args"]) for e in events] == [
        ("call_open", "open", {"path": "src/a.py"}),  # function calling: id, name, parsed arguments
        ("demo__repo-1#1", "edit", "3:4\nx = 1\nend_of_edit"),  # first word / rest of the action
        ("demo__repo-1#2", "submit", ""),
    ]
    # no error flag in SWE-agent: error-looking observations are returned results
    assert events[2]["error"] is None
    assert events[2]["result"] == {"content": [{"type": "text", "text": "Wrong flag!"}], "details": {}}
    assert events[1]["source"] == {"path": str(FIX), "line": 1, "step": 1}
    assert {e["run_id"] for e in events} == {"demo__repo-1"}


def test_not_a_trajectory(tmp_path):
    bad = tmp_path / "x.traj"
    bad.write_text('{"history": []}')
    with pytest.raises(SessionFormatError, match="not a SWE-agent trajectory"):
        list(import_paths("swe-agent", [bad]))
