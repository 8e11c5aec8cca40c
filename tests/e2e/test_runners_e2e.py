"""The real runner CLIs in a tool loop, through the real broker, worker and gateway (``make e2e``; marker ``e2e``).

Each test drives one runner (Claude Code 2.1.332, Codex CLI 0.171.0, installed by ``make e2e`` from the npm
registry) with a scripted model (:mod:`tests.e2e.fake_model`) that asks for the same failing shell command
again and again, with loopwatch's hooks exactly as ``loopwatch hook RUNNER --print-config`` prints them. The
command appends a line to a counter file before it fails, so the counter is what really ran.

With ``warningThreshold: 3, criticalThreshold: 5`` and the ``escalation`` policy (2 blocks in a row abort
the run): calls 1-5 run, the 6th is blocked (``generic_repeat`` at 5; the model gets OpenClaw's CRITICAL
message), the 7th ends the run. Claude Code stops there (deny + ``continue: false``); Codex cannot be stopped by a hook, so every
later call of the turn is denied (exit 2) until the model gives up. In both, no call after the 5th runs,
and the live verdicts equal ``loopwatch replay`` of the runner's own session file (Claude Code's transcript,
Codex's rollout) with the same config: run ids, call ids, args and result hashes, verdicts.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from streams.detection import Engine, OpenClawConfig
from streams.offline.replay import Replayer
from tests.conftest import topic_tag
from tests.e2e.compare import E2E_CONFIG, GUARD_CONFIG, calls_of
from tests.e2e.harness import (Pipeline, ModelServer, replay, run_claude_code, run_codex, runner_bin)

pytestmark = [pytest.mark.e2e, pytest.mark.kafka]

CONFIG = E2E_CONFIG
MAX_CALLS = 10  # the model gives up after this many tool calls
FIXTURES_OUT = os.environ.get("LOOPWATCH_E2E_FIXTURES")  # write the runs' files here (tests/fixtures/runners)


def _binary(name: str) -> Path:
    found = runner_bin(name)
    if found is None:
        pytest.skip(f"{name} of the pinned version is not installed: run `make e2e` (installs it)")
    return found


@pytest.fixture(scope="module")
def pipeline(kafka_bootstrap, tmp_path_factory):
    started = Pipeline(kafka_bootstrap, tmp_path_factory.mktemp("pipeline"), CONFIG, topic_tag()).start()
    try:
        yield started
    finally:
        started.stop()


def _command(counter: Path) -> str:
    """The looping command: counts its runs in ``counter`` (in the project folder, the command's cwd) and fails.
    Relative, so that the command, and the args hash, is the same in every run and in the fixtures."""
    return f"echo ran >> {counter.name}; ls /nonexistent-loop-target"


def _ran(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _model_saw(log: Path) -> str:
    """The last request the model got (its whole conversation), as text."""
    return log.read_text().splitlines()[-1]


def _keep(name: str, run, live: list[dict]) -> None:
    """Save a run's session file and live verdicts as a test fixture (LOOPWATCH_E2E_FIXTURES)."""
    if not FIXTURES_OUT or run.session_file is None:
        return
    from tests.e2e.trim import trim_file

    out = Path(FIXTURES_OUT)
    trim_file(run.session_file, out / f"{name}.jsonl", root=str(run.home.parent))
    lines = [json.dumps({"tool_call_id": k, **v}) for k, v in calls_of(live).items()]
    (out / f"{name}.live-calls.jsonl").write_text("\n".join(lines) + "\n")


def _assert_live_equals_replay(fmt: str, run, live: list[dict], config: Path) -> dict:
    replayed = calls_of(replay(fmt, run.session_file, config))
    live_calls = calls_of(live)
    assert live_calls == replayed
    return live_calls


@pytest.mark.parametrize("hooks", ["command", "http"])
def test_claude_code_blocks_the_sixth_call_and_stops_at_the_seventh(pipeline, tmp_path, hooks):
    binary = _binary("claude")
    counter = tmp_path / "project" / "ran.txt"
    started = time.monotonic()
    with ModelServer(_command(counter), MAX_CALLS, tmp_path / "model.jsonl") as model:
        run = run_claude_code(binary, tmp_path, model.url, pipeline.hook_env(), http=hooks == "http")
    assert run.status == 0, run.stderr
    assert run.session_id is not None
    live = pipeline.verdicts(run.session_id, at_least=12)
    calls = _assert_live_equals_replay("claude-code", run, live, pipeline.config_path)
    verdicts = [c["verdict"] for c in calls.values()]
    assert verdicts == ["allow"] * 5 + ["block", "abort"]
    assert _ran(counter) == 5  # nothing ran after the block; the session stopped at the abort
    assert model.model.calls == 7  # no model turn after the stop
    assert "CRITICAL: Called exec with identical arguments" in _model_saw(tmp_path / "model.jsonl")
    transcript = run.session_file.read_text()
    assert "hook_stopped_continuation" in transcript  # Claude Code says why it stopped
    if hooks == "command":
        _keep("claude-code-escalation", run, live)
    print(f"claude-code ({hooks} hooks) e2e run: {time.monotonic() - started:.1f} s")


def test_codex_blocks_the_sixth_call_and_denies_every_later_call_of_the_turn(pipeline, tmp_path):
    binary = _binary("codex")
    counter = tmp_path / "project" / "ran.txt"
    started = time.monotonic()
    with ModelServer(_command(counter), MAX_CALLS, tmp_path / "model.jsonl") as model:
        run = run_codex(binary, tmp_path, model.url, pipeline.hook_env())
    assert run.status == 0, run.stderr
    assert run.session_id is not None
    live = pipeline.verdicts(run.session_id, at_least=MAX_CALLS + 5)
    calls = _assert_live_equals_replay("codex", run, live, pipeline.config_path)
    verdicts = [c["verdict"] for c in calls.values()]
    assert verdicts == ["allow"] * 5 + ["block"] + ["abort"] * (MAX_CALLS - 6)
    assert _ran(counter) == 5  # every call after the 5th was denied before it ran
    assert model.model.calls == MAX_CALLS  # the turn went on: no hook answer ends it
    seen = _model_saw(tmp_path / "model.jsonl")
    assert "CRITICAL: Called shell with identical arguments" in seen
    assert "2 consecutive tool calls in this run were blocked" in seen
    _keep("codex-escalation", run, live)
    print(f"codex e2e run: {time.monotonic() - started:.1f} s")


def test_codex_sub_agent_loop_ends_the_sub_agents_run_and_its_parent_goes_on(pipeline, tmp_path):
    """The thread ``codex exec`` started spawns a sub-agent (``spawn_agent``, Codex's ``multi_agent_v1`` tools)
    and waits for it; the sub-agent repeats the failing command: 5 run, the 6th is blocked, every later one
    is refused as a call of its ended run. Its events carry the parent's session id, the sub-agent's own turn as
    their run and its thread id as agent_id (what Codex hands its hooks); the parent's calls stay in the
    parent's run (``codex``), allowed, and its two commands run. Live verdicts equal the replay of both
    rollout files (each thread writes its own)."""
    from streams.importers.codex_rollout import sub_agent_parent

    binary = _binary("codex")
    counter = tmp_path / "project" / "ran.txt"
    started = time.monotonic()
    with ModelServer(_command(counter), MAX_CALLS, tmp_path / "model.jsonl", spawn=PARENT_CALLS) as model:
        run = run_codex(binary, tmp_path, model.url, pipeline.hook_env())
    assert run.status == 0, run.stderr
    children = []
    for path in (run.home / "sessions").rglob("rollout-*.jsonl"):
        meta = json.loads(path.read_text().splitlines()[0])["payload"]
        if sub_agent_parent(meta) is not None:
            children.append((path, meta))
    assert len(children) == 1 and sub_agent_parent(children[0][1]) == run.session_id
    child_path, child = children[0]
    live = pipeline.verdicts(run.session_id, at_least=2 * (5 + 2 + PARENT_CALLS) + MAX_CALLS - 5)
    calls = [r for r in live if r["type"] == "tool_call"]
    by_agent: dict[str, list[dict]] = {}
    for record in calls:
        by_agent.setdefault(record["agent_id"], []).append(record)
    assert set(by_agent) == {"codex", child["id"]}
    child_calls, parent_calls = by_agent[child["id"]], by_agent["codex"]
    assert len({r["run_id"] for r in child_calls}) == 1 and len({r["run_id"] for r in parent_calls}) == 1
    assert child_calls[0]["run_id"] != parent_calls[0]["run_id"]
    assert {r["session_id"] for r in calls} == {run.session_id}
    assert [r["verdict"] for r in child_calls] == ["allow"] * 5 + ["block"] + ["abort"] * (MAX_CALLS - 6)
    assert all(r.get("run_ended") for r in child_calls[7:])
    assert [(r["tool_name"], r["verdict"]) for r in parent_calls] == \
        [("spawn_agent", "allow"), ("multi_agent_v1wait_agent", "allow")] + [("shell", "allow")] * PARENT_CALLS
    assert _ran(counter) == 5 + PARENT_CALLS  # the sub-agent's 6th call on never ran, the parent's did
    assert model.model.calls == MAX_CALLS
    assert "CRITICAL: Called shell with identical arguments" in (tmp_path / "model.jsonl").read_text()
    replayed = calls_of(replay("codex", run.home / "sessions", pipeline.config_path))
    assert calls_of(live) == replayed
    print(f"codex sub-agent e2e run: {time.monotonic() - started:.1f} s")


PARENT_CALLS = 2  # the parent's own shell calls after its sub-agent is done


def test_claude_code_sub_agent_loop_stops_the_sub_agent_and_its_parent_goes_on(pipeline, tmp_path):
    """The main agent starts a sub-agent in the foreground (Claude Code's ``Agent`` tool); the sub-agent
    repeats the failing command: 5 run, the 6th is blocked, the 7th aborts its run (deny + ``continue:
    false``). Claude Code 2.1.332 then stops the sub-agent only (its side file records
    ``hook_stopped_continuation``): the ``Agent`` call returns and the main agent goes on, its own calls in
    its own run, allowed. The sub-agent's calls carry its ``agent_id`` and run ``<session>:<agent_id>``; live
    verdicts equal the replay of the main log (which brings the sub-agent's side file)."""
    binary = _binary("claude")
    counter = tmp_path / "project" / "ran.txt"
    started = time.monotonic()
    with ModelServer(_command(counter), MAX_CALLS, tmp_path / "model.jsonl", spawn=PARENT_CALLS) as model:
        run = run_claude_code(binary, tmp_path, model.url, pipeline.hook_env())
    assert run.status == 0, run.stderr
    side_files = list(run.session_file.with_suffix("").glob("subagents/agent-*.jsonl"))
    assert len(side_files) == 1
    sub_agent = side_files[0].stem.removeprefix("agent-")
    live = pipeline.verdicts(run.session_id, at_least=2 * (5 + 1 + PARENT_CALLS) + 2)
    calls = [r for r in live if r["type"] == "tool_call"]
    child = [r for r in calls if r["agent_id"] == sub_agent]
    parent = [r for r in calls if r["agent_id"] == "main"]
    assert len(child) + len(parent) == len(calls)
    assert {r["run_id"] for r in child} == {f"{run.session_id}:{sub_agent}"}
    assert len({r["run_id"] for r in parent}) == 1 and parent[0]["run_id"] != child[0]["run_id"]
    assert [r["verdict"] for r in child] == ["allow"] * 5 + ["block", "abort"]
    assert [(r["tool_name"], r["verdict"]) for r in parent] == [("agent", "allow")] + [("exec", "allow")] * PARENT_CALLS
    assert _ran(counter) == 5 + PARENT_CALLS  # nothing of the sub-agent's after its block, the parent's ran
    assert model.model.calls == 7  # no sub-agent turn after its abort
    assert "hook_stopped_continuation" in side_files[0].read_text()
    assert "hook_stopped_continuation" not in run.session_file.read_text()
    assert calls_of(replay("claude-code", run.session_file, pipeline.config_path)) == calls_of(live)
    print(f"claude-code sub-agent e2e run: {time.monotonic() - started:.1f} s")


def test_codex_exec_skips_untrusted_hooks_without_a_word(pipeline, tmp_path):
    binary = _binary("codex")
    counter = tmp_path / "project" / "ran.txt"
    with ModelServer(_command(counter), 7, tmp_path / "model.jsonl") as model:
        run = run_codex(binary, tmp_path, model.url, pipeline.hook_env(), trust_hooks=False)
    assert run.status == 0, run.stderr
    assert _ran(counter) == 7  # no hook ran: nothing was blocked
    assert pipeline.verdicts(run.session_id, at_least=1, timeout=3.0) == []
    assert "hook" not in run.stderr.lower()


NO_GATEWAY_CALLS = 6


@pytest.mark.parametrize("on_failure", ["allow", "block"])
@pytest.mark.parametrize("runner", ["claude", "codex"])
def test_the_command_hook_without_a_gateway_fails_open_or_closed_as_set(tmp_path, runner, on_failure):
    """No gateway answers (nothing listens on its port): ``LOOPWATCH_HOOK_ON_FAILURE`` decides. ``allow``: every
    call runs and the hook says why (Claude Code's transcript keeps its stderr). ``block``: no call runs.
    Codex refuses each call (exit 2; the model reads ``failing closed``) and the model goes on; Claude Code
    stops at the prompt: the ``UserPromptSubmit`` hook fails closed too (``continue: false``), so the model is
    never asked and ``claude -p`` prints ``Operation stopped by hook: ... failing closed``."""
    from tests.e2e.harness import free_port

    binary = _binary(runner)
    counter = tmp_path / "project" / "ran.txt"
    hook_env = {"LOOPWATCH_GATEWAY_URL": f"http://127.0.0.1:{free_port()}",
                "LOOPWATCH_GATEWAY_TOKEN_FILE": str(tmp_path / "no-token"), "LOOPWATCH_HOOK_ON_FAILURE": on_failure}
    log = tmp_path / "model.jsonl"
    with ModelServer(_command(counter), NO_GATEWAY_CALLS, log) as model:
        run = (run_codex if runner == "codex" else run_claude_code)(binary, tmp_path, model.url, hook_env)
    assert run.status == 0, run.stderr
    session = run.session_file.read_text() if run.session_file else ""
    if on_failure == "allow":
        assert _ran(counter) == NO_GATEWAY_CALLS and model.model.calls == NO_GATEWAY_CALLS
        assert "failing closed" not in session
        if runner == "claude":
            assert "unreachable" in session and "failing open (on-failure allow)" in session
    elif runner == "codex":
        assert _ran(counter) == 0 and model.model.calls == NO_GATEWAY_CALLS
        assert "failing closed (on-failure block)" in _model_saw(log)
    else:
        assert _ran(counter) == 0 and model.model.calls == 0 and not log.exists()
        result = json.loads(run.stdout)
        assert result["result"].startswith("Operation stopped by hook: loopwatch: gateway at ")
        assert result["result"].endswith("failing closed (on-failure block)")


PROFILE_CONFIG = {"tools": {"loopDetection": {"enabled": True}}, "options": {"profile": "openclaw-2026.9.6"}}


@pytest.fixture(scope="module")
def profile_pipeline(kafka_bootstrap, tmp_path_factory):
    """OpenClaw 2026.9.6's behaviour (its fixed thresholds: warn at 10, critical at 20), no loopwatch policy."""
    started = Pipeline(kafka_bootstrap, tmp_path_factory.mktemp("profile"), PROFILE_CONFIG, topic_tag()).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.parametrize("runner", ["claude", "codex"])
def test_the_2026_9_6_terminal_block_ends_the_run(profile_pipeline, tmp_path, runner):
    """Under the ``openclaw-2026.9.6`` profile the 21st identical call gets the recovery block (verdict ``block``,
    the model reads its ``block_text``) and the 22nd the terminal block (verdict ``abort``: the run has ended).
    Claude Code stops there (deny + ``continue: false``): 20 calls ran, no model turn after the 22nd. Codex
    refuses the 22nd and every later call (``run_ended``), and the model reads the terminal text. The warning
    at the 11th call reaches the model with OpenClaw 2026.9.6's note (``additionalContext``)."""
    binary = _binary(runner)
    counter = tmp_path / "project" / "ran.txt"
    max_calls = 25
    log = tmp_path / "model.jsonl"
    with ModelServer(_command(counter), max_calls, log) as model:
        run = (run_codex if runner == "codex" else run_claude_code)(binary, tmp_path, model.url,
                                                                      profile_pipeline.hook_env())
    assert run.status == 0, run.stderr
    asked = 22 if runner == "claude" else max_calls
    live = profile_pipeline.verdicts(run.session_id, at_least=20 * 2 + asked - 20)
    calls = calls_of(live)
    verdicts = [c["verdict"] for c in calls.values()]
    assert verdicts[20:] == ["block", "abort"] + ["abort"] * (asked - 22)
    assert "block" not in verdicts[:20] and "abort" not in verdicts[:20] and verdicts[10] == "warn"
    records = {r["tool_call_id"]: r for r in live if r["type"] == "tool_call"}
    ids = list(calls)
    assert records[ids[20]]["tool_loop_recovery"] == "recovery"
    assert records[ids[21]]["tool_loop_recovery"] == "terminal" and records[ids[21]]["run_terminated"]
    assert all(records[i]["run_ended"]["by"] for i in ids[22:])
    assert _ran(counter) == 20 and model.model.calls == asked
    requests = log.read_text().splitlines()
    assert records[ids[10]]["warning"]["note"] in requests[-1]
    assert "Do not repeat this exact tool action" in requests[-1]  # the recovery block's text
    if runner == "claude":
        assert "hook_stopped_continuation" in run.session_file.read_text()
    else:
        assert "This run is stopping now" in requests[-1]
        assert records[ids[-1]]["run_ended"]["message"].splitlines()[0] in requests[-1]  # the log escapes newlines
    fmt = "codex" if runner == "codex" else "claude-code"
    assert calls_of(replay(fmt, run.session_file, profile_pipeline.config_path)) == calls


@pytest.fixture
def stoppable(kafka_bootstrap, tmp_path_factory):
    """A pipeline of its own (its worker is stopped mid-run), failing open after 1 s without a verdict."""
    started = Pipeline(kafka_bootstrap, tmp_path_factory.mktemp("stoppable"), CONFIG, topic_tag(),
                       gateway_timeout_s=1.0, on_timeout="allow").start()
    try:
        yield started
    finally:
        started.stop()


STOP_BEFORE_CALL = 3


@pytest.mark.parametrize("runner", ["codex", "claude"])
def test_with_the_worker_stopped_mid_run_state_follows_what_ran(stoppable, tmp_path, runner):
    """Codex and Claude Code: the worker stops before the 3rd call; fail-open, every call runs without a verdict. Once the worker is
    back, it applies the backlog: the calls its rules block (the 6th on) get late verdicts, and their results
    are recorded as executed (marked ``ran_without_verdict`` by the gateway), never ignored as results of
    blocked calls. The live verdicts equal the replay of the events as the gateway published them."""
    binary = _binary(runner)
    counter = tmp_path / "project" / "ran.txt"

    def stop_worker(number: int) -> None:
        if number == STOP_BEFORE_CALL:
            stoppable.stop_worker()

    with ModelServer(_command(counter), MAX_CALLS, tmp_path / "model.jsonl", before_call=stop_worker) as model:
        run = (run_codex if runner == "codex" else run_claude_code)(binary, tmp_path, model.url, stoppable.hook_env())
    assert run.status == 0, run.stderr
    assert _ran(counter) == MAX_CALLS  # fail-open: nothing could be blocked in time
    stoppable.start_worker()
    live = stoppable.verdicts(run.session_id, at_least=2 * MAX_CALLS, timeout=60.0)
    events = stoppable.events(run.session_id, at_least=2 * MAX_CALLS)
    calls = calls_of(live)
    assert len(calls) == MAX_CALLS
    assert all(c["result_hash"] is not None for c in calls.values())  # every call that ran is in the state
    results = [r for r in live if r["type"] == "tool_result"]
    assert not [r for r in results if r["verdict"] == "ignore"]
    late = [e["tool_call_id"] for e in events if e.get("ran_without_verdict")]
    assert len(late) >= MAX_CALLS - STOP_BEFORE_CALL  # the calls run while the worker was down
    assert all(r.get("late") for r in results if r["tool_call_id"] in late)
    verdicts = [c["verdict"] for c in calls.values()]
    assert verdicts[5] == "block"  # the rules' answer, after the fact: the call had run
    # ... which the call's late result corrects: it ran, it counts as run, not as blocked
    refused = [(call_id, c["verdict"]) for call_id, c in calls.items() if c["verdict"] in ("block", "abort")]
    assert len(refused) >= MAX_CALLS - 5
    corrections = {r["tool_call_id"]: r.get("corrects") for r in results}
    for call_id, verdict in refused:
        assert call_id in late and (corrections[call_id] or {}).get("verdict") == verdict, (call_id, corrections)
    assert all(isinstance(e.get("deadline"), int) for e in events if e["type"] == "tool_call")  # fail-open client
    replayer = Replayer(Engine(OpenClawConfig(CONFIG)), key_by="run")
    assert calls_of(replayer.apply(e, e["event_id"]) for e in events) == calls




@pytest.fixture(scope="module")
def guard_pipeline(kafka_bootstrap, tmp_path_factory):
    """Detectors far off (warn at 10), the post-compaction guard at OpenClaw's default window (3)."""
    started = Pipeline(kafka_bootstrap, tmp_path_factory.mktemp("guard"), GUARD_CONFIG, topic_tag()).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.parametrize("hooks", ["command", "http"])
def test_claude_code_stops_when_the_loop_survives_an_auto_compaction(guard_pipeline, tmp_path, hooks):
    """The model reports a nearly full context window with the 3rd call: Claude Code compacts on its own
    (``PostCompact`` arms the guard; over ``http`` it is the only compaction hook that arrives). Calls 4-6
    repeat the failing call with the same result: the guard aborts on the 6th's outcome, which comes through
    ``PostToolUseFailure`` (whose ``continue: false`` Claude Code ignores), so ``PostToolBatch`` stops the
    session: 6 calls ran, the model is not asked again."""
    binary = _binary("claude")
    counter = tmp_path / "project" / "ran.txt"
    with ModelServer(_command(counter), MAX_CALLS, tmp_path / "model.jsonl", full_after=3) as model:
        run = run_claude_code(binary, tmp_path, model.url, guard_pipeline.hook_env(), http=hooks == "http")
    assert run.status == 0, run.stderr
    live = guard_pipeline.verdicts(run.session_id, at_least=13)
    assert [r["type"] for r in live].count("compaction_retry") == 1
    aborts = [r for r in live if (r.get("guard") or {}).get("abort")]
    assert len(aborts) == 1 and aborts[0]["type"] == "tool_result"
    assert list(calls_of(live)).index(aborts[0]["tool_call_id"]) == 5  # the 6th call's outcome
    assert _ran(counter) == 6 and model.model.calls == 6
    replayed = replay("claude-code", run.session_file, guard_pipeline.config_path)
    assert calls_of(replayed) == calls_of(live)
    assert [r["tool_call_id"] for r in replayed if (r.get("guard") or {}).get("abort")] == [aborts[0]["tool_call_id"]]


def test_codex_denies_every_call_after_the_loop_survives_an_auto_compaction(guard_pipeline, tmp_path):
    """The same for Codex: it compacts on its own after the 3rd call (``PostCompact`` arms the guard), the
    guard aborts on the 6th call's outcome (the model is told through ``additionalContext``), and every later
    call of the turn is refused as a call of an ended run (exit 2): 6 calls ran."""
    binary = _binary("codex")
    counter = tmp_path / "project" / "ran.txt"
    with ModelServer(_command(counter), MAX_CALLS, tmp_path / "model.jsonl", full_after=3) as model:
        run = run_codex(binary, tmp_path, model.url, guard_pipeline.hook_env())
    assert run.status == 0, run.stderr
    live = guard_pipeline.verdicts(run.session_id, at_least=2 * 6 + (MAX_CALLS - 6) + 1)
    assert [r["type"] for r in live].count("compaction_retry") == 1
    calls = calls_of(live)
    assert [c["verdict"] for c in calls.values()] == ["allow"] * 5 + ["abort"] * (MAX_CALLS - 5)
    assert all(r.get("run_ended") for r in live if r["type"] == "tool_call" and r["verdict"] == "abort")
    assert _ran(counter) == 6 and model.model.calls == MAX_CALLS
    assert "this run has" in _model_saw(tmp_path / "model.jsonl")
    assert calls_of(replay("codex", run.session_file, guard_pipeline.config_path)) == calls
    _keep("codex-compaction", run, live)
