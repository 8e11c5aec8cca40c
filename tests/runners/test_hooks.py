"""Claude Code and Codex hook calls through the gateway (in-process engine): events sent, answers given.

Payload shapes are those of the runners' hook references:
* Claude Code, https://code.claude.com/docs/en/hooks (common input: session_id, transcript_path,
  cwd, permission_mode, hook_event_name; tool events: tool_name, tool_input, tool_use_id;
  PostToolUse: tool_response; PostToolUseFailure: error; SessionStart: source "compact" after a
  compaction. Output: hookSpecificOutput.permissionDecision "deny" with permissionDecisionReason;
  top-level continue false with stopReason stops the session).
* Codex, https://developers.openai.com/codex/hooks (common input: session_id, turn_id,
  transcript_path, cwd, hook_event_name, model, permission_mode; tool_name "Bash" for shell commands
  with tool_input.command; exit status 2 with the reason on stderr blocks; malformed output or another
  failing status lets the tool run).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from streams.runners.hooks.command import runner_exit
from streams.runners.hooks import HookInputError, mapper
from tests.runners.gateway_support import EngineSource, served

CC_COMMON = {"session_id": "cc-1", "transcript_path": "/home/u/.claude/projects/p/cc-1.jsonl", "cwd": "/home/u/p",
             "permission_mode": "default"}
CX_COMMON = {"session_id": "cx-1", "turn_id": "turn-a", "transcript_path": None, "cwd": "/home/u/p",
             "model": "gpt-5-codex", "permission_mode": "default"}


def cc_pre(i: int, command: str = "npm test") -> dict:
    return {**CC_COMMON, "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": command, "description": "Run tests"}, "tool_use_id": f"toolu_{i:03d}"}


def cc_post(i: int, stdout: str = "1 failing") -> dict:
    return {**CC_COMMON, "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_input": {"command": "npm test"}, "tool_use_id": f"toolu_{i:03d}",
            "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}}


def cx_pre(i: int, turn: str = "turn-a") -> dict:
    return {**CX_COMMON, "turn_id": turn, "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": "cargo test"}, "tool_use_id": f"call_{i}"}


def cx_post(i: int, turn: str = "turn-a") -> dict:
    return {**CX_COMMON, "turn_id": turn, "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_input": {"command": "cargo test"}, "tool_use_id": f"call_{i}", "tool_response": "test failed"}


async def _post(client, runner: str, payload: dict) -> dict:
    response = await client.post(f"/v1/hooks/{runner}", json=payload)
    assert response.status == 200, await response.text()
    return await response.json()


def test_claude_code_maps_sessions_runs_and_tool_use_ids_as_the_importer():
    hooks = mapper("claude-code")
    before = hooks.event(cc_pre(1))
    assert before == {"type": "tool_call", "run_id": "cc-1:start", "session_id": "cc-1", "tool_call_id": "toolu_001",
                      "runner": "claude-code", "agent_id": "main", "tool_name": "Bash",
                      "args": {"command": "npm test", "description": "Run tests"}, "outcome_follows": True}
    assert hooks.event({**CC_COMMON, "hook_event_name": "UserPromptSubmit", "prompt": "fix it"}) is None
    call = hooks.event(cc_pre(2))
    assert call["run_id"].startswith("cc-1:") and call["run_id"] != "cc-1:start"
    post = hooks.event({**cc_post(2), "tool_response": {"stdout": "ok", "durationMs": 12}})
    assert post == {"type": "tool_result", "run_id": call["run_id"], "session_id": "cc-1", "tool_call_id": "toolu_002",
                    "runner": "claude-code", "result": {"content": [], "details": {"stdout": "ok"}}, "error": None}
    failed = hooks.event({**CC_COMMON, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
                          "tool_input": {}, "tool_use_id": "toolu_003", "error": "Exit code 1"})
    assert failed["error"] == "Exit code 1" and failed["result"] is None
    sub = hooks.event({**cc_pre(4), "agent_id": "a1b2", "agent_type": "Explore"})
    assert (sub["run_id"], sub["agent_id"]) == ("cc-1:a1b2", "a1b2")
    compact = hooks.event({**CC_COMMON, "hook_event_name": "SessionStart", "source": "compact"})
    assert compact == {"type": "compaction_retry", "run_id": call["run_id"], "session_id": "cc-1", "agent_id": "main",
                       "runner": "claude-code"}
    assert hooks.event({**CC_COMMON, "hook_event_name": "PostCompact"}) is None  # the same compaction
    assert hooks.event({**CC_COMMON, "hook_event_name": "Stop"}) is None
    with pytest.raises(HookInputError, match="tool_use_id"):
        hooks.event({**CC_COMMON, "hook_event_name": "PreToolUse", "tool_name": "Bash"})
    with pytest.raises(HookInputError, match="session_id"):
        hooks.event({"hook_event_name": "PreToolUse"})


def test_codex_maps_turns_to_runs_and_bash_to_the_importers_shell():
    hooks = mapper("codex")
    assert hooks.event(cx_pre(1)) == {"type": "tool_call", "run_id": "cx-1#turn-a", "session_id": "cx-1",
                                      "tool_call_id": "call_1", "runner": "codex", "agent_id": "codex", "tool_name": "shell",
                                      "args": {"command": "cargo test"}, "outcome_follows": True}
    assert hooks.event(cx_post(1))["result"] == {"content": [{"type": "text", "text": "test failed"}], "details": {}}
    patch = hooks.event({**cx_pre(2, "turn-b"), "tool_name": "apply_patch", "tool_input": {"command": "*** Begin"}})
    assert (patch["run_id"], patch["tool_name"], patch["args"]) == ("cx-1#turn-b", "apply_patch", {"command": "*** Begin"})
    no_turn = {k: v for k, v in cx_pre(3).items() if k != "turn_id"}
    assert hooks.event(no_turn)["run_id"] == "cx-1#turn-b"


def test_codex_sub_agent_calls_carry_the_sub_agents_thread_and_leave_its_parents_turn_alone():
    """Codex 0.171 calls a spawned thread's hooks with the root session_id, the sub-agent's own turn_id and
    agent_id (its thread id) plus agent_type (tests/fixtures/runners/codex-subagent.hooks.jsonl). Its events
    carry that agent_id in runs of its own turns; the parent's last turn and compaction are the parent's."""
    hooks = mapper("codex")
    child = {"agent_id": "th-child", "agent_type": "default"}
    assert hooks.event(cx_pre(1, "turn-parent"))["agent_id"] == "codex"
    sub = hooks.event({**cx_pre(2, "turn-child"), **child})
    assert (sub["session_id"], sub["run_id"], sub["agent_id"]) == ("cx-1", "cx-1#turn-child", "th-child")
    sub_post = hooks.event({**cx_post(2, "turn-child"), **child})
    assert (sub_post["run_id"], sub_post["type"]) == ("cx-1#turn-child", "tool_result")
    # a parent's call without a turn id stays in the parent's last turn, a sub-agent's in the sub-agent's
    parent_no_turn = {k: v for k, v in cx_pre(3).items() if k != "turn_id"}
    assert (hooks.event(parent_no_turn)["run_id"], hooks.event(parent_no_turn)["agent_id"]) == ("cx-1#turn-parent", "codex")
    child_no_turn = {k: v for k, v in {**cx_pre(4), **child}.items() if k != "turn_id"}
    assert hooks.event(child_no_turn)["run_id"] == "cx-1#turn-child"
    # each thread reports its own compaction once, even when the other's tool calls come in between
    compact = {k: v for k, v in CX_COMMON.items() if k != "turn_id"}
    parent_compact = hooks.event({**compact, "hook_event_name": "PostCompact"})
    assert (parent_compact["run_id"], parent_compact["agent_id"]) == ("cx-1#turn-parent", "codex")
    hooks.event({**cx_pre(5, "turn-child"), **child})
    assert hooks.event({**compact, "hook_event_name": "SessionStart", "source": "compact"}) is None
    child_compact = hooks.event({**compact, **child, "hook_event_name": "PostCompact"})
    assert (child_compact["run_id"], child_compact["agent_id"]) == ("cx-1#turn-child", "th-child")


def test_claude_code_answers_allow_warn_block_and_stops_the_session_on_abort():
    async def main():
        async with served(EngineSource()) as client:
            answers = []
            for i in range(13):
                answers.append(await _post(client, "claude-code", cc_pre(i)))
                assert await _post(client, "claude-code", cc_post(i)) == {}
            # compaction, then the same outcome twice: the post-compaction guard aborts (window 2)
            assert await _post(client, "claude-code", {**CC_COMMON, "hook_event_name": "SessionStart",
                                                       "source": "compact"}) == {}
            after = []
            for i in (20, 21):
                await _post(client, "claude-code", cc_pre(i, command="ls"))
                after.append(await _post(client, "claude-code", cc_post(i, stdout="same")))
            return answers, after

    answers, after = asyncio.run(main())
    assert answers[:10] == [{}] * 10 and answers[11] == {}
    warning = answers[10]["systemMessage"]
    assert warning.startswith("WARNING: You have called exec 10 times")
    assert answers[10]["hookSpecificOutput"] == {"hookEventName": "PreToolUse", "additionalContext": warning}
    deny = answers[12]["hookSpecificOutput"]
    assert deny["hookEventName"] == "PreToolUse" and deny["permissionDecision"] == "deny"
    assert deny["permissionDecisionReason"].startswith("CRITICAL: Called exec with identical arguments")
    assert after[0] == {}
    assert after[1]["continue"] is False and "compaction did not break the loop" in after[1]["stopReason"]


def test_codex_answers_and_the_command_turns_a_deny_into_exit_2():
    async def main():
        async with served(EngineSource()) as client:
            answers = []
            for i in range(13):
                answers.append(await _post(client, "codex", cx_pre(i)))
                await _post(client, "codex", cx_post(i))
            return answers

    answers = asyncio.run(main())
    assert answers[:10] == [{}] * 10
    assert answers[10]["systemMessage"].startswith("WARNING: You have called shell 10 times")
    reason = answers[12]["hookSpecificOutput"]["permissionDecisionReason"]
    assert runner_exit("codex", "PreToolUse", answers[12], None, "allow") == (2, "", reason + "\n")
    assert runner_exit("codex", "PreToolUse", answers[0], None, "allow") == (0, "", "")
    status, out, err = runner_exit("codex", "PreToolUse", answers[10], None, "allow")
    assert status == 0 and err == ""
    assert json.loads(out)["hookSpecificOutput"] == {"hookEventName": "PreToolUse",
                                                     "additionalContext": answers[10]["systemMessage"]}
    # Claude Code reads the deny as JSON on stdout with exit 0
    status, out, _ = runner_exit("claude-code", "PreToolUse", answers[12], None, "allow")
    assert status == 0 and '"permissionDecision": "deny"' in out


def test_hook_command_failure_is_fail_open_or_the_runners_blocking_answer():
    failure = "gateway at http://127.0.0.1:8787 unreachable (Connection refused)"
    # fail-open: the tool runs (exit 0), and the user sees why: systemMessage (what Codex shows of a
    # hook) and stderr (Claude Code's transcript)
    for runner in ("codex", "claude-code"):
        status, out, err = runner_exit(runner, "PreToolUse", None, failure, "allow")
        assert status == 0 and err.startswith("loopwatch: gateway at") and "failing open" in err
        assert json.loads(out) == {"systemMessage": err.strip()}
    assert runner_exit("codex", "PreToolUse", None, failure, "block")[0] == 2
    assert runner_exit("codex", "PostToolUse", None, failure, "block")[0] == 2
    assert runner_exit("claude-code", "PreToolUse", None, failure, "block")[0] == 2
    status, out, _ = runner_exit("claude-code", "PostToolUse", None, failure, "block")
    assert status == 0 and '"continue": false' in out and "failing closed" in out


def test_malformed_hook_json_gets_400_and_sends_nothing():
    async def main():
        source = EngineSource()
        async with served(source) as client:
            for runner in ("claude-code", "codex"):
                for payload in ({}, {"hook_event_name": "PreToolUse", "session_id": 3},
                                {"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash"}):
                    response = await client.post(f"/v1/hooks/{runner}", json=payload)
                    assert response.status == 400
                    assert (await response.json())["error"].startswith(f"not a {runner} hook call: ")
        assert source.published == []
    asyncio.run(main())


def test_command_hook_fast_path_asks_the_gateway_over_http_and_takes_only_plain_options():
    from streams.runners.hooks.command import _options, ask_gateway

    async def main():
        async with served(EngineSource()) as client:
            url = str(client.make_url("")).rstrip("/")
            loop = asyncio.get_running_loop()
            allowed = await loop.run_in_executor(None, ask_gateway, url, "codex", b'{"hook_event_name": "Stop", '
                                                 b'"session_id": "s"}', 5.0, None)
            with pytest.raises(Exception, match="gateway answered 400: not a codex hook call: session_id"):
                await loop.run_in_executor(None, ask_gateway, url, "codex", b'{"hook_event_name": "Stop"}', 5.0, None)
            with pytest.raises(Exception, match="unreachable"):
                await loop.run_in_executor(None, ask_gateway, "http://127.0.0.1:9", "codex", b"{}", 1.0, None)
            return allowed

    assert asyncio.run(main()) == {}
    assert _options(["codex"])["url"] == "http://127.0.0.1:8787"
    assert _options(["claude-code", "--url=http://h:1", "--timeout", "3", "--on-failure", "block"]) == {
        "runner": "claude-code", "url": "http://h:1", "timeout": 3.0, "on_failure": "block"}
    for args in (["--help"], ["codex", "--help"], ["codex", "--timeout", "0"], ["codex", "--on-failure", "maybe"],
                 ["other"], ["codex", "--url"]):
        assert _options(args) is None, args


def test_a_mistyped_hook_command_does_not_block_the_runner():
    import subprocess
    import sys

    def run(*args: str) -> int:
        return subprocess.run([sys.executable, "-c", "from streams.cli import main; main()", *args],
                              input=b"{}", capture_output=True).returncode

    assert run("hook", "codex", "--bogus") == 1  # 2 would block every tool call
    assert run("hook", "--help") == 0
    assert run("replay", "--bogus") == 2  # other commands keep the usage status


def test_claude_code_runs_come_from_the_transcript_as_the_importer_names_them(tmp_path):
    import json as _json

    transcript = tmp_path / "cc-1.jsonl"

    def write(*records: dict) -> None:
        with transcript.open("a") as handle:
            handle.writelines(_json.dumps(r) + "\n" for r in records)

    payload = {**cc_pre(1), "transcript_path": str(transcript)}
    write({"type": "file-history-snapshot"})
    assert mapper("claude-code").event(payload)["run_id"] == "cc-1:start"
    write({"type": "user", "uuid": "u-1", "sessionId": "cc-1", "message": {"role": "user", "content": "fix it"}},
          {"type": "user", "uuid": "u-2", "sessionId": "cc-1", "isMeta": True, "message": {"content": "meta"}},
          {"type": "user", "uuid": "u-3", "sessionId": "cc-1",
           "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}})
    hooks = mapper("claude-code")
    assert hooks.event(payload)["run_id"] == "cc-1:u-1"
    with transcript.open("a") as handle:  # a line still being written counts once it is complete
        handle.write('{"type": "user", "uuid": "u-4", "message": {"content": "and the te')
    assert hooks.event(payload)["run_id"] == "cc-1:u-1"
    with transcript.open("a") as handle:
        handle.write('sts"}}\n')
    assert hooks.event(payload)["run_id"] == "cc-1:u-4"
    # a restarted gateway (a new mapper) carries on in the same run; the prompt hook changes nothing then
    restarted = mapper("claude-code")
    assert restarted.event({**CC_COMMON, "hook_event_name": "UserPromptSubmit", "transcript_path": str(transcript)}) is None
    assert restarted.event(payload)["run_id"] == "cc-1:u-4"
    # without a readable transcript: the prompt hook's own run
    gone = {**payload, "transcript_path": str(tmp_path / "elsewhere.jsonl")}
    assert restarted.event(gone)["run_id"] != "cc-1:u-4"


def test_ctrl_c_while_the_gateway_is_slow_ends_the_hook_with_a_line_not_a_traceback():
    import signal
    import socket
    import subprocess
    import sys

    with socket.socket() as server:  # takes the request and never answers
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(60)
        port = server.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-c", "from streams.cli import main; main()", "hook", "codex",
             "--url", f"http://127.0.0.1:{port}", "--timeout", "30"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            # Ctrl-C as from a terminal, even if this test run was started with SIGINT ignored
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        proc.stdin.write(b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash", '
                         b'"tool_input": {"command": "ls"}}')
        proc.stdin.close()
        conn, _ = server.accept()  # started and connected (however long a loaded machine takes)
        with conn:
            conn.settimeout(60)
            request = b""
            while b"PreToolUse" not in request:  # the whole request sent: waiting for the answer
                chunk = conn.recv(65536)
                assert chunk, request
                request += chunk
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        err = proc.stderr.read()
    assert proc.returncode == 130  # not 2: Codex would read 2 as "block"
    assert b"Traceback" not in err
    assert b"loopwatch hook: interrupted before a verdict" in err
