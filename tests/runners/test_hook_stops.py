"""How each runner's hook answer stops a run, for every verdict that ends one (measured with the real runners:
docs/runners/claude-code.md and codex.md, "What stops a run"; the end-to-end tests in tests/e2e/ run them).

Claude Code 2.1.332 stops on a ``PreToolUse`` deny with ``continue: false``, and on ``continue: false``
from ``PostToolUse`` or ``PostToolBatch``, but ignores it from ``PostToolUseFailure``. Codex 0.171 ends a
turn on no hook answer: a deny (exit 2) is its strongest stop, and ``continue: false`` on ``PreToolUse``
makes the hook count as failed (the call runs), so it is never sent.
"""

from __future__ import annotations

import asyncio

import pytest

from streams.detection import OpenClawConfig
from streams.runners.hooks import mapper
from streams.runners.hooks.base import stop_text, warning_text
from streams.runners.hooks.command import runner_exit
from tests.runners.gateway_support import EngineSource, served
from tests.runners.test_hooks import CC_COMMON, CX_COMMON, _post, cc_pre, cx_post, cx_pre

RUN_ENDED = {"decision": "abort", "message": None, "verdict": {  # OpenClaw would block it: its fields stay
    "run_id": "cc-1:start", "verdict": "abort", "decision": "block", "blocked": True,
    "block_reason": "CRITICAL: Called exec with identical arguments ...",
    "run_ended": {"by": "compaction_loop_persisted", "reason": "CRITICAL: tool exec repeated 3 times",
                  "message": "loopwatch: this run has ended (compaction_loop_persisted); no further tool calls run"}}}
TERMINAL = {"decision": "abort", "message": "CRITICAL: Called exec with identical arguments ...", "verdict": {
    "run_id": "cc-1:start", "verdict": "abort", "decision": "block", "blocked": True,
    "block_reason": "CRITICAL: Called exec with identical arguments ...",
    "block_text": "Tool loop stopped: exec repeated with identical results. Stop and report to the user.",
    "tool_loop_recovery": "terminal"}}
GUARD_ABORT = {"decision": "abort", "message": "CRITICAL: tool exec repeated 3 times after compaction",
               "verdict": {"run_id": "cc-1:start", "verdict": "abort", "decision": "allow", "blocked": False,
                           "guard": {"abort": True, "message": "CRITICAL: tool exec repeated 3 times after compaction"}}}
POLICY_ABORT = {"decision": "abort", "message": "CRITICAL: 2 consecutive tool calls in this run were blocked",
                "verdict": {"run_id": "cc-1:start", "verdict": "abort", "decision": "block", "blocked": True,
                            "block_reason": "CRITICAL: Called exec with identical arguments ...",
                            "policy": {"name": "escalation", "verdict": "abort",
                                       "message": "CRITICAL: 2 consecutive tool calls in this run were blocked"}}}
RECOVERY_BLOCK = {"decision": "block", "message": "CRITICAL: bare", "verdict": {
    "run_id": "cc-1:start", "verdict": "block", "blocked": True, "block_reason": "CRITICAL: bare",
    "block_text": "CRITICAL: bare\n\nTry a different approach.", "tool_loop_recovery": "recovery"}}
NOTED_WARNING = {"decision": "warn", "message": "WARNING: You have called exec 10 times", "verdict": {
    "run_id": "cc-1:start", "verdict": "warn", "warning": {"emitted": True, "note": "[loop warning] exec x10"}}}
ENDING = {"run_ended": RUN_ENDED, "terminal": TERMINAL, "guard": GUARD_ABORT, "policy": POLICY_ABORT}


def test_the_text_for_the_model_is_block_text_else_block_reason_and_the_note_of_a_warning():
    assert stop_text(TERMINAL) == TERMINAL["verdict"]["block_text"]
    assert stop_text(RECOVERY_BLOCK) == "CRITICAL: bare\n\nTry a different approach."
    assert stop_text(RUN_ENDED) == RUN_ENDED["verdict"]["run_ended"]["message"]
    assert stop_text(GUARD_ABORT) == "CRITICAL: tool exec repeated 3 times after compaction"
    assert stop_text(POLICY_ABORT) == "CRITICAL: 2 consecutive tool calls in this run were blocked"
    assert stop_text({"decision": "block", "message": "loopwatch: no verdict within 2 s", "verdict": None}) \
        == "loopwatch: no verdict within 2 s"
    assert warning_text(NOTED_WARNING) == "[loop warning] exec x10"
    assert warning_text({"decision": "warn", "message": "WARNING: plain", "verdict": {"warning": {}}}) == "WARNING: plain"


@pytest.mark.parametrize("name", sorted(ENDING))
def test_claude_code_denies_and_stops_on_every_ending_verdict_of_a_call(name):
    decision = ENDING[name]
    answer = mapper("claude-code").answer(cc_pre(7), decision)
    text = stop_text(decision)
    assert answer == {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                             "permissionDecisionReason": text},
                      "continue": False, "stopReason": text}


def test_claude_code_blocks_without_stopping_on_a_recovery_block():
    answer = mapper("claude-code").answer(cc_pre(7), RECOVERY_BLOCK)
    assert "continue" not in answer
    assert answer["hookSpecificOutput"]["permissionDecisionReason"] == RECOVERY_BLOCK["verdict"]["block_text"]


def test_claude_code_stops_at_the_batch_after_a_failed_call_whose_own_stop_it_ignores():
    hooks = mapper("claude-code")
    failure = {**CC_COMMON, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_use_id": "toolu_007",
               "tool_input": {"command": "npm test"}, "error": "Exit code 1\n1 failing"}
    batch = {**CC_COMMON, "hook_event_name": "PostToolBatch",
             "tool_calls": [{"tool_name": "Bash", "tool_use_id": "toolu_007", "tool_response": "Exit code 1"}]}
    other_session = {**batch, "session_id": "cc-2"}
    assert hooks.answer(batch, None) == {}  # no run ended yet
    assert hooks.answer(failure, GUARD_ABORT) == {"continue": False, "stopReason": GUARD_ABORT["message"]}
    assert hooks.answer(batch, None) == {"continue": False, "stopReason": GUARD_ABORT["message"]}
    assert hooks.answer(other_session, None) == {}


def test_claude_code_warnings_reach_the_model_as_additional_context():
    answer = mapper("claude-code").answer(cc_pre(3), NOTED_WARNING)
    assert answer == {"systemMessage": "[loop warning] exec x10",
                      "hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "[loop warning] exec x10"}}


@pytest.mark.parametrize("name", sorted(ENDING))
def test_codex_denies_every_ending_verdict_with_exit_2_and_never_sends_continue_false(name):
    decision = ENDING[name]
    hooks = mapper("codex")
    answer = hooks.answer(cx_pre(7), decision)
    assert answer == {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                             "permissionDecisionReason": stop_text(decision)}}
    assert runner_exit("codex", "PreToolUse", answer, None, "allow") == (2, "", stop_text(decision) + "\n")
    # an abort on a result: the model is told; continue:false would only replace the output (turn goes on)
    after = hooks.answer(cx_post(7), decision)
    assert "continue" not in after
    assert after["hookSpecificOutput"] == {"hookEventName": "PostToolUse", "additionalContext": stop_text(decision)}


def test_codex_warnings_reach_the_model_as_additional_context():
    answer = mapper("codex").answer(cx_pre(3), NOTED_WARNING)
    assert answer["hookSpecificOutput"] == {"hookEventName": "PreToolUse", "additionalContext": "[loop warning] exec x10"}
    assert runner_exit("codex", "PreToolUse", answer, None, "allow")[0] == 0


ESCALATION = OpenClawConfig({"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3,
                                                         "criticalThreshold": 5}},
                             "policies": {"escalation": {"consecutiveBlocks": 2}}})


def test_through_the_gateway_the_policy_abort_stops_claude_code_and_denies_in_codex():
    async def main():
        answers = {"claude-code": [], "codex": []}
        async with served(EngineSource(ESCALATION)) as client:
            for i in range(1, 9):
                answers["claude-code"].append(await _post(client, "claude-code", cc_pre(i)))
                if "permissionDecision" not in str(answers["claude-code"][-1]):
                    post = {**CC_COMMON, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
                            "tool_input": {"command": "npm test"}, "tool_use_id": f"toolu_{i:03d}",
                            "error": "Exit code 1\n1 failing"}
                    assert await _post(client, "claude-code", post) == {}
                answers["codex"].append(await _post(client, "codex", cx_pre(i)))
                if "permissionDecision" not in str(answers["codex"][-1]):
                    await _post(client, "codex", cx_post(i))
            batch = await _post(client, "claude-code", {**CC_COMMON, "hook_event_name": "PostToolBatch",
                                                        "tool_calls": []})
        return answers, batch

    answers, batch = asyncio.run(main())
    cc, cx = answers["claude-code"], answers["codex"]
    # calls 1-5 run (a warning at 4 and 5), the 6th is blocked, the 7th (2nd block in a row) ends the run
    assert [("continue" in a, a.get("hookSpecificOutput", {}).get("permissionDecision")) for a in cc[:7]] == \
        [(False, None)] * 3 + [(False, None)] * 2 + [(False, "deny"), (True, "deny")]
    assert cc[6]["stopReason"].startswith("CRITICAL: 2 consecutive tool calls")
    assert batch["continue"] is False  # the batch hook stops it too
    assert [a.get("hookSpecificOutput", {}).get("permissionDecision") for a in cx] == [None] * 5 + ["deny"] * 3
    assert all("continue" not in a for a in cx)


def test_a_call_that_goes_on_without_its_verdict_is_shown_to_the_user_and_its_result_is_not_waited_for():
    """Fail-open at the gateway (the worker down: ``hang`` answers at once as a timed-out client would, no
    sleeping): the call runs, each runner shows the user why (``systemMessage``), the model is not told."""
    async def main():
        answers = {}
        async with served(EngineSource(hang=True)) as client:
            answers["claude-code"] = await _post(client, "claude-code", cc_pre(1))
            answers["codex"] = await _post(client, "codex", cx_pre(1))
            answers["codex-post"] = await _post(client, "codex", cx_post(1))
        return answers

    answers = asyncio.run(main())
    for runner in ("claude-code", "codex"):
        message = answers[runner]["systemMessage"]
        assert answers[runner] == {"systemMessage": message}  # no deny, nothing for the model
        assert message.startswith("loopwatch: no verdict within") and "failing open" in message
        assert runner_exit(runner, "PreToolUse", answers[runner], None, "allow")[0] == 0
    assert answers["codex-post"] == {}  # a result is not announced again
