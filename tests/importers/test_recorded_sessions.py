"""Every recorded session under shared/realdata imports without error, with the counts its SOURCE.md states.

The recordings are never copied into the project (licences): this test reads them in place,
from ``../shared/realdata`` beside the repository or ``$LOOPWATCH_REALDATA``, and is skipped
when they are absent. Numbers quoted below come from each format's SOURCE.md; where our count
differs from a raw-transcript count there, the comment says why.
"""

import os
from collections import Counter
from pathlib import Path

import pytest

from streams.importers import import_paths, iter_files

REALDATA = Path(os.environ.get("LOOPWATCH_REALDATA") or Path(__file__).resolve().parents[3] / "shared" / "realdata")

pytestmark = [
    pytest.mark.realdata,
    pytest.mark.skipif(not REALDATA.is_dir(), reason=f"no recorded sessions at {REALDATA}"),
]

OC = "openclaw/{}/agents/{}/sessions/{}"


def _import(fmt, rel):
    errors = []
    events = list(import_paths(fmt, [REALDATA / rel], on_error=errors.append))
    assert errors == []
    return events


def _calls(events):
    return [e for e in events if e["type"] == "tool_call"]


def _errors(events):
    """tool_call_id -> thrown error of each call's outcome, inline or in its later tool_result."""
    out = {}
    for e in events:
        if e["type"] == "tool_result" or (e["type"] == "tool_call" and not e.get("outcome_follows")):
            out[e["tool_call_id"]] = e["error"]
    return out


def _lines(events, kind="compaction_retry"):
    return [e["source"]["line"] for e in events if e["type"] == kind]


@pytest.mark.parametrize("fmt,folder,files", [
    ("openclaw", "openclaw", 10),  # 11 files, one of them the trajectory sidecar
    ("claude-code", "claude-code", 5),
    ("codex", "codex-cli", 3),
    ("swe-agent", "swe-agent", 4),
])
def test_every_file_imports_without_error(fmt, folder, files):
    found = list(iter_files(fmt, [REALDATA / folder]))
    assert len(found) == files
    assert not any(p.name.endswith(".trajectory.jsonl") for p in found)
    events = _import(fmt, folder)
    assert len({e["event_id"] for e in events}) == len(events)


# --- OpenClaw (openclaw/SOURCE.md) -------------------------------------------------------

def test_openclaw_sidecar_runs_5e9096eb():
    ev = _import("openclaw", OC.format("nucbox", "main", "5e9096eb-a13b-48ae-990d-ca9d6f231b05.jsonl"))
    # "compaction at line 8 ... belongs to run c8c9f2d6-..."; runs d7fb3457 = lines 10-15, ff98fef4 = 16-19
    assert [(e["type"], e["run_id"][:8], e["source"]["line"]) for e in ev] == [
        ("compaction_retry", "c8c9f2d6", 8),
        ("tool_call", "d7fb3457", 12), ("tool_call", "d7fb3457", 14), ("tool_call", "ff98fef4", 18),
    ]
    assert ev[1]["session_key"] == "agent:main:telegram:direct:1000000001"


def test_openclaw_rewritten_branch_0ff7b343():
    ev = _import("openclaw", OC.format(
        "nucbox", "main", "0ff7b343-fcdb-4bc2-8504-ccc296c7e85b.jsonl.reset.2026-05-01T16-27-13.884Z"))
    calls = _calls(ev)
    # lines 3166-6243 re-write lines 88-3165 ("367 toolCallIds occur twice"): counted once
    assert len(calls) == len({c["tool_call_id"] for c in calls}) == 530
    assert not any(3166 <= e["source"]["line"] <= 6243 for e in ev)
    # "Compactions: lines 1248 and 4326 (... the second is the copy in the rewritten branch) and 6516"
    assert _lines(ev) == [1248, 6516]
    # "lines 6523-6532 (10x read_file, followed at 6533 by the guard text)"
    burst = [c for c in calls if 6523 <= c["source"]["line"] <= 6532]
    assert [(c["tool_name"], c["args"], c["error"]) for c in burst] == [("read_file", None, "Tool read_file not found")] * 10
    assert len({c["run_id"] for c in burst}) == 1
    # "38 runs with 3 or more consecutive orphan not-found results in the file": 8 of them are on
    # the abandoned branch (2753-2856) and again in its copy (5831-5934), which we import once
    per_run, streak = {}, {}
    for c in calls:
        orphan = c["args"] is None and str(c["error"]).endswith("not found")
        streak[c["run_id"]] = streak.get(c["run_id"], 0) + 1 if orphan else 0
        per_run[c["run_id"]] = max(per_run.get(c["run_id"], 0), streak[c["run_id"]])
    assert sum(1 for n in per_run.values() if n >= 3) == 38 - 8


def test_openclaw_compaction_storm_29330952():
    ev = _import("openclaw", OC.format("nucbox", "main", "29330952-50b3-43df-bbfe-a0e2046f3800.jsonl"))
    lines = _lines(ev)
    # "100 compaction entries (lines 8, 12, 16, ..., 401)", "with no tool calls"
    assert len(lines) == 100 and lines[:3] == [8, 12, 16] and lines[-1] == 401
    assert _calls(ev) == []
    assert len({e["run_id"] for e in ev}) == 100  # each heartbeat is its own run


def test_openclaw_known_poll_e619a9c5():
    ev = _import("openclaw", OC.format(
        "rs-backup", "chairong", "e619a9c5-4bc9-4060-bdd8-6dafac385dd4.jsonl.deleted.2026-04-17T00-06-55.116Z"))
    poll = {"action": "poll", "sessionId": "glow-ridge", "timeoutMs": "30000"}
    polls = [c for c in _calls(ev) if c["args"] == poll and 8 <= c["source"]["line"] <= 39]
    assert len(polls) == 3 and len({c["result"]["content"][0]["text"] for c in polls}) == 1
    assert _lines(ev) == [117]  # "Compaction: line 117 (last line)"
    assert len({e["run_id"] for e in ev}) == 1  # "a single turn"


def test_openclaw_long_turn_5783303d():
    ev = _import("openclaw", OC.format("rs-backup", "chairong", "5783303d-7411-4df9-9e47-3177bf226730.jsonl"))
    assert len(_calls(ev)) == 107 and _lines(ev) == [221]  # "107 tool calls in one turn", "Compaction at line 221"


def test_openclaw_283db52c():
    ev = _import("openclaw", OC.format("rs-backup", "main", "283db52c-4980-4c20-b50a-1c5d37c331a3.jsonl"))
    assert len(_calls(ev)) == 56 and _lines(ev) == []  # "56 calls in one turn"
    ls = [c for c in _calls(ev) if c["tool_name"] == "exec" and "outputs/preopen/20260409/" in str(c["args"])
          and 8 <= c["source"]["line"] <= 93]
    assert len(ls) >= 5  # "exec ls -la .../outputs/preopen/20260409/ 5x in one turn (lines 8-93)"


def test_openclaw_unknown_tool_ef7c5f27():
    ev = _import("openclaw", OC.format("rs-backup", "main", "ef7c5f27-7a9c-47b8-af96-e856cc5138f7.jsonl"))
    # "6 consecutive orphan results Tool tavily-search not found (lines 7-17)"
    assert [(c["tool_name"], c["args"], c["error"]) for c in _calls(ev)] == [
        ("tavily-search", None, "Tool tavily-search not found")] * 6
    assert 7 <= ev[0]["source"]["line"] and ev[-1]["source"]["line"] <= 17


def test_openclaw_invalid_write_de164575():
    calls = _calls(_import("openclaw", OC.format("cat-backup", "main", "de164575-fc39-43d3-b0f9-7781fe07e46d.jsonl")))
    writes = [c for c in calls if c["tool_name"] == "write" and c["args"] == {"file": "~/dnd-app/frontend/styles.css"}]
    # "write {...styles.css} 6x -> Validation failed for tool "write" ... (lines 9-22)"
    assert len(writes) == 6 and all(c["error"].startswith('Validation failed for tool "write"') for c in writes)
    # "exec {} 4x (lines 23-30)": the 4th (line 30) sits in the aborted message, which pi-agent never
    # executes, so OpenClaw's detector never saw it
    assert [c["source"]["line"] for c in calls if c["tool_name"] == "exec" and c["args"] == {}] == [23, 25, 27]


def test_openclaw_near_miss_f8c3e7a8():
    ev = _import("openclaw", OC.format("moltbot-config", "main", "f8c3e7a8-7dc1-43cc-8ce0-a9d268c29be1.jsonl"))
    acts = Counter(c["args"].get("action") for c in _calls(ev) if c["tool_name"] == "process")
    assert acts["poll"] == 5  # "process poll fast-mist 5x and send-keys 3x" (send-keys: 3 enter + 1 earlier)
    assert acts["send-keys"] >= 3
    assert _lines(ev) == [30, 33]


def test_openclaw_negative_control_22a2a42e():
    ev = _import("openclaw", OC.format("verve-backup", "main", "22a2a42e-6f87-47d6-958d-e10a0a8f4361.jsonl"))
    assert len(_calls(ev)) == 100 and _lines(ev) == []  # "100 calls, no loop"


# --- Claude Code (claude-code/SOURCE.md) -----------------------------------------------------

CC = "claude-code/marot-spotter/"


def test_claude_code_main_session():
    ev = _import("claude-code", CC + "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl")
    # named alone, the main log comes with its two side files (the Task sub-agent's 12 calls)
    assert Counter(c["agent_id"] for c in _calls(ev)) == {"main": 242, "aac57f5": 12}
    calls = [c for c in _calls(ev) if c["agent_id"] == "main"]
    errors = _errors(ev)
    names = Counter(c["tool_name"] for c in calls)
    # "242 tool calls (Bash 120, Edit 67, Read 37, ...), 12 tool errors, 1 manual compaction"
    assert len(calls) == 242 and (names["Bash"], names["Edit"], names["Read"]) == (120, 67, 37)
    assert sum(1 for c in calls if errors[c["tool_call_id"]] is not None) == 12
    assert _lines(ev) == [1481]
    # "git add -A && git commit ... repeated 5x (calls at lines 1338, 1361, 1384, 1414, 1442)"
    commits = [c for c in calls if str(c["args"].get("command", "")).startswith(
        'git add -A && git commit -m "feat: instrument hook controllers')]
    assert [c["source"]["line"] for c in commits[-5:]] == [1338, 1361, 1384, 1414, 1442]  # (1204: earlier)
    assert all(errors[c["tool_call_id"]] for c in commits[-5:])  # "all is_error:true"


def test_claude_code_sub_agent_from_progress_records_when_its_side_file_is_missing(tmp_path):
    # The same main log without its side files: the Task sub-agent's calls are in its agent_progress
    # records (lines 72-97), with the same ids, inputs and results as in its side file.
    lone = tmp_path / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
    lone.symlink_to(REALDATA / CC / lone.name)
    ev = _import("claude-code", lone)
    side = _import("claude-code", CC + "ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl")
    sub = [e for e in ev if e["agent_id"] == "aac57f5"]
    assert {e["source"]["line"] for e in sub} <= set(range(72, 98))
    assert [(e["type"], e["tool_call_id"], e.get("args"), e["result"], e["error"]) for e in sub] == [
        (e["type"], e["tool_call_id"], e.get("args"), e["result"], e["error"]) for e in side]


@pytest.mark.parametrize("name,calls,errors", [
    ("ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl", 12, 0),  # "12 WebSearch/WebFetch calls"
    ("ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-acompact-946d2b.jsonl", 0, 0),  # "no tools"
    ("tool_heavy.jsonl", 6, 0),  # "6 tool calls of different kinds"
    ("short.jsonl", 2, 2),  # "2 tool calls, both errors"
])
def test_claude_code_other_files(name, calls, errors):
    ev = _import("claude-code", CC + name)
    assert len(_calls(ev)) == calls and _lines(ev) == []
    assert sum(1 for error in _errors(ev).values() if error is not None) == errors


# --- Codex CLI (codex-cli/SOURCE.md) -----------------------------------------------------

@pytest.mark.parametrize("name,shell,other", [
    ("eval-5_with_skill_run-2.codex_stdout.jsonl", 43, 3),  # "43 shell calls" (+2 file_change, 1 todo_list)
    ("eval-12_without_skill_run-1.codex_stdout.jsonl", 17, 1),  # "17 shell calls" (+1 file_change)
    ("eval-15_with_skill_run-1.codex_stdout.jsonl", 0, 0),  # "no tool calls": transport retries only
])
def test_codex_files(name, shell, other):
    calls = _calls(_import("codex", "codex-cli/" + name))
    assert sum(1 for c in calls if c["tool_name"] == "shell") == shell
    assert len(calls) - shell == other


# --- SWE-agent (swe-agent/SOURCE.md) -----------------------------------------------------

def _steps(name):
    return {c["source"]["step"]: c for c in _calls(_import("swe-agent", "swe-agent/" + name))}


def test_swe_agent_eps_submit_loop():
    steps = _steps("eps.traj")
    assert len(steps) == 14
    # "Steps 9-12 are submit flag{...} four times, each answered Wrong flag!"
    loop = [steps[i] for i in range(9, 13)]
    assert {(c["tool_name"], c["args"]) for c in loop} == {("submit", "flag{People always make the best exploits.}")}
    assert all(c["result"]["content"][0]["text"].strip() == "Wrong flag!" and c["error"] is None for c in loop)


def test_swe_agent_pydicom_repeated_edit():
    steps = _steps("pydicom__pydicom-1458.traj")
    assert len(steps) == 12
    # "Steps 6 and 7 are byte-identical actions with byte-identical observations"; step 8 is edit 287:296
    assert steps[6]["args"] == steps[7]["args"] and steps[6]["result"] == steps[7]["result"]
    assert [steps[i]["args"].split("\n")[0] for i in (5, 6, 7, 8)] == ["287:295"] * 3 + ["287:296"]


def test_swe_agent_function_calling_files():
    clean = _steps("6e44b9__sweagenttestrepo-1c2844.traj")
    assert len(clean) == 5  # "clean 5-step run"
    assert clean[0]["tool_call_id"].startswith("call_") and clean[0]["args"] == {"file_name": "missing_colon.py"}
    marsh = _steps("marshmallow-code__marshmallow-1867.function_calling.traj")
    assert (marsh[6]["tool_name"], marsh[7]["tool_name"]) == ("edit", "edit")  # "steps 6-7 are two failing edit"
