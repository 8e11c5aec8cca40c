"""Session files the real runners wrote (tests/fixtures/runners, made by ``make e2e`` with
``LOOPWATCH_E2E_FIXTURES``: Claude Code 2.1.332, Codex CLI 0.171.0, long strings cut) import with the ids and
result hashes the live hooks gave, so a backtest of a session predicts its live verdicts.

``*.live-calls.jsonl`` are the live verdicts of the same run, read from the verdicts topic, one line per call
(:func:`tests.e2e.compare.calls_of`); ``*.hooks.jsonl`` are the hook calls the runner made.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.detection import Engine, OpenClawConfig
from streams.importers import import_paths
from streams.offline.replay import Replayer
from streams.runners.hooks import mapper
from tests.e2e.compare import E2E_CONFIG, GUARD_CONFIG, calls_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runners"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("name,fmt,config,verdicts", [
    ("claude-code-escalation", "claude-code", E2E_CONFIG, ["allow"] * 5 + ["block", "abort"]),
    ("codex-escalation", "codex", E2E_CONFIG, ["allow"] * 5 + ["block"] + ["abort"] * 4),
    ("codex-compaction", "codex", GUARD_CONFIG, ["allow"] * 5 + ["abort"] * 5),  # a compacted record arms the guard
])
def test_the_replay_of_a_runners_own_session_gives_its_live_verdicts_result_hashes_included(name, fmt, config, verdicts):
    replayer = Replayer(Engine(OpenClawConfig(config)), key_by="run")
    events = list(import_paths(fmt, [FIXTURES / f"{name}.jsonl"]))
    records = [replayer.apply(event, event["event_id"]) for event in events]
    live = {line.pop("tool_call_id"): line for line in _lines(FIXTURES / f"{name}.live-calls.jsonl")}
    assert calls_of(records) == live
    assert [c["verdict"] for c in live.values()] == verdicts
    assert all(c["result_hash"].startswith(("error:" if fmt == "claude-code" else "")) for c in list(live.values())[:5])
    assert [e["type"] for e in events].count("compaction_retry") == (1 if "compaction" in name else 0)


def test_claude_code_transcript_results_are_the_hooks_tool_responses():
    session = FIXTURES / "claude-code-bash-ok.jsonl"
    imported = {e["tool_call_id"]: e for e in import_paths("claude-code", [session])}
    hooks = mapper("claude-code")
    checked = 0
    for payload in _lines(FIXTURES / "claude-code-bash-ok.hooks.jsonl"):
        payload["transcript_path"] = str(session)
        event = hooks.event(payload)
        if event is None:
            continue
        mine = imported[event["tool_call_id"]]
        assert event["run_id"] == mine["run_id"] and event["session_id"] == mine["session_id"]
        if event["type"] == "tool_result":
            assert (event["result"], event["error"]) == (mine["result"], mine["error"])
            assert event["result"]["details"]["stdout"] == "hello"
            checked += 1
    assert checked == 8


def test_claude_code_hooks_name_the_run_by_prompt_id_even_before_the_transcript_is_written():
    """Claude Code 2.1.332 hands every hook call the prompt's ``prompt_id`` (the transcript's ``promptId``): a
    hook call that comes before the transcript exists (a loaded machine) still gets the importer's run id."""
    session = FIXTURES / "claude-code-bash-ok.jsonl"
    runs = {e["run_id"] for e in import_paths("claude-code", [session])}
    prompt = next(json.loads(line) for line in session.read_text().splitlines() if '"promptId"' in line)["promptId"]
    session_id = next(r["sessionId"] for r in _lines(session) if r.get("sessionId"))
    assert runs == {f"{session_id}:{prompt}"}
    hooks = mapper("claude-code")
    for payload in _lines(FIXTURES / "claude-code-bash-ok.hooks.jsonl"):
        payload["transcript_path"] = "/nonexistent/transcript.jsonl"
        event = hooks.event(payload)
        if event is not None:
            assert event["run_id"] in runs


def test_codex_rollout_turns_call_ids_and_calls_that_never_ran():
    events = list(import_paths("codex", [FIXTURES / "codex-interrupted.jsonl"]))
    meta = _lines(FIXTURES / "codex-interrupted.jsonl")[0]["payload"]
    turn = next(r["payload"]["turn_id"] for r in _lines(FIXTURES / "codex-interrupted.jsonl")
                if r["payload"].get("type") == "task_started")
    assert [e["tool_call_id"] for e in events] == ["call_01_000001", "call_02_000002", "call_03_000003"]
    assert {e["run_id"] for e in events} == {f"{meta['id']}#{turn}"}
    assert all(e["tool_name"] == "shell" and e["args"] == {"command": "ls /nonexistent-dir"} for e in events)
    assert events[0]["result"] == {"content": [{"type": "text", "text": "ls: cannot access '/nonexistent-dir': "
                                                                        "No such file or directory\n"}], "details": {}}
    assert events[2]["result"] is None and "outcome_follows" not in events[2]  # interrupted before it ran

    blocked = list(import_paths("codex", [FIXTURES / "codex-escalation.jsonl"]))
    assert [e["result"] is None for e in blocked] == [False] * 5 + [True] * 5  # 6-10 denied by the hook


def test_codex_sessions_import_from_a_tree_and_from_standard_input(monkeypatch, tmp_path):
    tree = tmp_path / "sessions" / "2026" / "12" / "03"
    tree.mkdir(parents=True)
    (tree / "rollout-2026-12-03T07-00-00-x.jsonl").write_bytes((FIXTURES / "codex-interrupted.jsonl").read_bytes())
    from_tree = list(import_paths("codex", [tmp_path / "sessions"]))
    assert len(from_tree) == 3
    import subprocess
    import sys
    out = subprocess.run([str(Path(sys.executable).parent / "loopwatch"), "import", "--format", "codex", "-"],
                         input=(FIXTURES / "codex-interrupted.jsonl").read_bytes(), capture_output=True, check=True)
    assert [json.loads(line)["tool_call_id"] for line in out.stdout.splitlines()] == \
        [e["tool_call_id"] for e in from_tree]


SUBAGENT = FIXTURES / "codex-subagent"  # a parent thread that spawned a sub-agent; the sub-agent runs one command 7 times


def test_codex_sub_agent_rollouts_import_in_their_parent_session_with_the_hooks_ids_and_verdicts():
    """Codex CLI 0.171.0 wrote the parent's and the sub-agent's rollout files and made the hook calls in
    ``codex-subagent.hooks.jsonl`` (a logging hook that allowed everything). The hook calls, mapped as the live
    Codex hook maps them and replayed keyed by run as the worker keys them, give the verdicts the import of the
    two rollout files gives, call by call: the sub-agent's calls are a run of their own in the parent's session."""
    parent_file, child_file = sorted(SUBAGENT.glob("rollout-*.jsonl"))
    parent, child = _lines(parent_file)[0]["payload"], _lines(child_file)[0]["payload"]
    events = list(import_paths("auto", [SUBAGENT]))
    assert {e["runner"] for e in events} == {"codex"}
    from_child = [e for e in events if e["source"]["path"] == str(child_file)]
    from_parent = [e for e in events if e["source"]["path"] == str(parent_file)]
    child_turn = next(r["payload"]["turn_id"] for r in _lines(child_file) if r["payload"].get("type") == "task_started")
    assert [e["tool_call_id"] for e in from_child] == [f"call_child_{n:02d}" for n in range(1, 8)]
    assert {(e["session_id"], e["run_id"], e["agent_id"]) for e in from_child} == {
        (parent["id"], f"{parent['id']}#{child_turn}", child["id"])}
    assert {(e["source"]["thread"], e["source"]["parent_thread"]) for e in from_child} == {(child["id"], parent["id"])}
    assert all(e["event_id"].startswith(f"{parent['id']}/{child['id']}:") for e in from_child)
    assert [e["tool_name"] for e in from_parent] == ["spawn_agent", "multi_agent_v1wait_agent",
                                                     "multi_agent_v1close_agent", "shell", "shell"]
    assert {e["session_id"] for e in from_parent} == {parent["id"]} and "thread" not in from_parent[0]["source"]

    hooks = mapper("codex")
    live = [event for payload in _lines(FIXTURES / "codex-subagent.hooks.jsonl")
            if (event := hooks.event(payload)) is not None]
    assert len(live) == 24
    replay_live = Replayer(Engine(OpenClawConfig(E2E_CONFIG)), key_by="run")
    replay_import = Replayer(Engine(OpenClawConfig(E2E_CONFIG)), key_by="run")
    from_hooks = calls_of(replay_live.apply(e, n) for n, e in enumerate(live))
    from_files = calls_of(replay_import.apply(e, e["event_id"]) for e in events)
    assert from_files == from_hooks
    # who made each call: the sub-agent's thread id (the hooks' agent_id) for its calls, codex for the parent's
    agents_live = {e["tool_call_id"]: e["agent_id"] for e in live if e["type"] == "tool_call"}
    assert agents_live == {e["tool_call_id"]: e["agent_id"] for e in events if e["type"] == "tool_call"}
    assert {agents_live[f"call_child_{n:02d}"] for n in range(1, 8)} == {child["id"]}
    assert {agents_live[f"call_parent_{n:02d}"] for n in (1, 2)} == {"codex"}
    # the escalation policy ends the sub-agent's run at its second block; the parent's run goes on
    assert [from_files[f"call_child_{n:02d}"]["verdict"] for n in range(1, 8)] == ["allow"] * 5 + ["block", "abort"]
    assert [from_files[f"call_parent_{n:02d}"]["verdict"] for n in (1, 2)] == ["allow", "allow"]


def test_the_e2e_harness_takes_the_root_threads_rollout_whichever_sorts_first(tmp_path):
    """A sub-agent spawned in the same second as its parent's start writes a rollout that can sort first; the
    session the run is read from is the one ``codex exec`` started (no parent thread in its ``session_meta``)."""
    from tests.e2e.harness import root_rollout

    parent_file, child_file = sorted(SUBAGENT.glob("rollout-*.jsonl"))
    day = tmp_path / "2026" / "12" / "03"
    day.mkdir(parents=True)
    (day / "rollout-2026-12-03T10-06-10-0-child.jsonl").write_bytes(child_file.read_bytes())
    (day / "rollout-2026-12-03T10-06-10-1-parent.jsonl").write_bytes(parent_file.read_bytes())
    assert root_rollout(tmp_path) == (day / "rollout-2026-12-03T10-06-10-1-parent.jsonl",
                                      _lines(parent_file)[0]["payload"]["id"])
    assert root_rollout(tmp_path / "none") == (None, None)


CC_SUBAGENT = FIXTURES / "claude-code-subagent"  # a main log and its sub-agent's side file; the sub-agent loops


def test_claude_code_sub_agent_hook_calls_give_the_import_of_its_side_file():
    """Claude Code 2.1.332 wrote the main log and the sub-agent's side file (``<session>/subagents/agent-<id>.jsonl``)
    and made the hook calls in ``claude-code-subagent.hooks.jsonl`` (a logging hook that allowed everything): the
    main agent started a sub-agent with its ``Agent`` tool, the sub-agent ran one failing command 7 times, then
    the main agent ran it twice. The sub-agent's hook calls carry its ``agent_id``; mapped as the live hook maps
    them and replayed keyed by run, they give the verdicts, runs and agents the import of the main log (which
    brings the side file) gives, call by call."""
    main_log = next(CC_SUBAGENT.glob("*.jsonl"))
    side_file = next(CC_SUBAGENT.glob("*/subagents/agent-*.jsonl"))
    sub_agent, session = side_file.stem.removeprefix("agent-"), main_log.stem
    events = list(import_paths("claude-code", [main_log]))
    hooks = mapper("claude-code")
    payloads = _lines(FIXTURES / "claude-code-subagent.hooks.jsonl")
    assert {p.get("agent_id") for p in payloads if p["hook_event_name"] == "PreToolUse"} == {None, sub_agent}
    live = [event for payload in payloads if (event := hooks.event(payload)) is not None]
    replay_live = Replayer(Engine(OpenClawConfig(E2E_CONFIG)), key_by="run")
    replay_import = Replayer(Engine(OpenClawConfig(E2E_CONFIG)), key_by="run")
    from_hooks = calls_of([replay_live.apply(e, n) for n, e in enumerate(live)])
    from_file = calls_of([replay_import.apply(e, e["event_id"]) for e in events])
    assert from_hooks == from_file
    agents = {e["tool_call_id"]: (e["agent_id"], e["run_id"]) for e in live if e["type"] == "tool_call"}
    assert agents == {e["tool_call_id"]: (e["agent_id"], e["run_id"]) for e in events}
    child = [c for c, (agent, _) in agents.items() if agent == sub_agent]
    assert {agents[c][1] for c in child} == {f"{session}:{sub_agent}"}
    assert [from_file[c]["verdict"] for c in child] == ["allow"] * 5 + ["block", "abort"]
    parent = [c for c, (agent, _) in agents.items() if agent == "main"]
    assert len(parent) == 3 and {from_file[c]["verdict"] for c in parent} == {"allow"}  # Agent + two commands
    assert len({agents[c][1] for c in parent}) == 1 and agents[parent[0]][1] != f"{session}:{sub_agent}"
