"""Codex CLI hooks -> loopwatch events, and verdicts -> Codex's hook output.

Codex runs command hooks only, with one JSON object on stdin: ``session_id`` (the thread id),
``turn_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ``model``, and for tool events
``tool_name`` (``Bash`` for shell commands, ``apply_patch``, MCP tools as ``mcp__<server>__<tool>``),
``tool_input`` (``{"command": ...}`` for ``Bash`` and ``apply_patch``), ``tool_use_id``; ``PostToolUse``
adds ``tool_response`` (Codex hooks reference, https://developers.openai.com/codex/hooks). A hook
blocks with exit status 2 (stderr is the reason) or a ``permissionDecision: "deny"``; a hook that
fails or prints something Codex cannot parse does not block.

Mapping (the Codex importer's, :mod:`streams.importers.codex`):

* ``run_id`` = ``<session_id>#<turn_id>``: one run per turn, as the importer's ``<thread_id>#turn<n>``
  (Codex's own turn id instead of the turn's number, which the hook does not carry). A call without
  a ``turn_id`` goes to its thread's last turn (``#turn1`` before any). ``agent_id`` = ``codex``.
* Sub-agents (``spawn_agent``): Codex 0.171 calls the hooks of a spawned thread with the root
  ``session_id``, the sub-agent's own ``turn_id`` and ``agent_id`` = the sub-agent's thread id (and
  ``agent_type``). Its events keep that ``session_id``, are in the runs of its own turns and carry
  ``agent_id`` = its thread id, as the importer gives a sub-agent's rollout
  (:mod:`streams.importers.codex_rollout`, "Sub-agents"). Each thread has its own last turn and
  compaction state, so a sub-agent's calls never move its parent's run.
* ``PreToolUse`` -> ``tool_call`` with ``outcome_follows: true``; ``Bash`` is the importer's ``shell``
  with ``args = {"command": tool_input.command}``; other tools keep their name and ``tool_input``.
* ``PostToolUse`` -> ``tool_result`` with ``tool_response`` in OpenClaw's shape
  (:func:`streams.runners.hooks.base.tool_outcome`).
* ``PostCompact`` (or ``SessionStart`` with ``source: "compact"``) -> ``compaction_retry`` (a session
  file's ``compacted`` record, :mod:`streams.importers.codex_rollout`; ``codex exec --json`` output has
  no compactions).
* Anything else sends nothing and answers ``{}``.

Answers (no hook answer ends a Codex 0.171 turn, measured with the real runner: docs/runners/codex.md
"What stops a run"): ``PreToolUse`` blocked or aborted (a run-ending verdict, a call of an ended run) ->
``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
"permissionDecisionReason": ...}}``, which ``loopwatch hook codex`` turns into exit status 2 with the
reason on stderr; never ``continue: false`` (on ``PreToolUse`` Codex then counts the hook as failed and
runs the call). A warning, or an abort that arrives on a result -> ``{"systemMessage": ...,
"hookSpecificOutput": {"hookEventName": <event>, "additionalContext": ...}}`` (the model sees
``additionalContext``, the user ``systemMessage``); a ``PreToolUse`` the gateway let run without a
verdict -> ``{"systemMessage": <why>}``; else ``{}``.
"""

from __future__ import annotations

from typing import Any, Mapping

from streams.importers.codex import AGENT_ID, run_id, shell_args
from .base import RunTracker, failed_open, optional_str, require_str, stop_text, tool_outcome, warning_text

__all__ = ["CodexHooks", "RUNNER", "agent_of", "thread_key"]

RUNNER = "codex"
SHELL_HOOK_NAME = "Bash"  # what Codex names its shell tools in hook input; the importer's "shell"


def agent_of(payload: Mapping[str, Any]) -> str:
    """The ``agent_id`` of a hook call's events: the sub-agent's thread id (the hook's ``agent_id``, sent only
    from a spawned thread), else ``codex``."""
    return optional_str(payload, "agent_id") or AGENT_ID


def thread_key(session: str, payload: Mapping[str, Any]) -> str:
    """Whose last turn a hook call moves: ``<session>`` for the root thread, ``<session>/<sub-agent thread>``
    for a sub-agent (the prefix the importer gives its event ids)."""
    sub_agent = optional_str(payload, "agent_id")
    return f"{session}/{sub_agent}" if sub_agent else session


class CodexHooks:
    """Maps Codex hook calls to events (see the module docstring); keeps each thread's last turn."""

    runner = RUNNER

    def __init__(self, runs: RunTracker | None = None) -> None:
        self.runs = runs if runs is not None else RunTracker()

    def _run(self, payload: Mapping[str, Any], session: str, thread: str) -> str:
        """The run of a hook call of ``thread`` (:func:`thread_key`): its turn's, else the thread's last turn's."""
        turn = optional_str(payload, "turn_id")
        if turn is None:
            return self.runs.current(thread, run_id(session, 1))
        run = run_id(session, turn)
        self.runs.start(thread, run)
        return run

    def event(self, payload: Mapping[str, Any]) -> dict[str, Any] | None:
        """The loopwatch event a hook call stands for, or None.

        Raises:
            HookInputError: no ``hook_event_name`` or ``session_id`` string; a tool event without
                a ``tool_use_id`` (or ``PreToolUse`` without a ``tool_name``) string.
        """
        name = require_str(payload, "hook_event_name")
        session = require_str(payload, "session_id")
        agent = agent_of(payload)
        thread = thread_key(session, payload)
        if name in ("PreToolUse", "PostToolUse"):
            call_id = require_str(payload, "tool_use_id")
            base = {"run_id": self._run(payload, session, thread), "session_id": session, "tool_call_id": call_id,
                    "runner": RUNNER}
            if name == "PostToolUse":
                return {"type": "tool_result", **base, "result": tool_outcome(payload.get("tool_response")),
                        "error": None}
            tool = require_str(payload, "tool_name")
            tool_input = payload.get("tool_input")
            event = {"type": "tool_call", **base, "agent_id": agent}
            if tool == SHELL_HOOK_NAME:
                command = tool_input.get("command") if isinstance(tool_input, dict) else tool_input
                event.update(tool_name="shell", args=shell_args(command))
            else:
                event["tool_name"] = tool
                if "tool_input" in payload:
                    event["args"] = tool_input
            event["outcome_follows"] = True
            return event
        if name == "PostCompact" or (name == "SessionStart" and payload.get("source") == "compact"):
            turn = optional_str(payload, "turn_id")
            current = self.runs.compaction(thread, run_id(session, turn or 1))
            if current is None:
                return None
            run = run_id(session, turn) if turn else current
            return {"type": "compaction_retry", "run_id": run, "session_id": session, "agent_id": agent,
                    "runner": RUNNER}
        if optional_str(payload, "turn_id"):
            self._run(payload, session, thread)
        return None

    @staticmethod
    def answer(payload: Mapping[str, Any], decision: Mapping[str, Any] | None) -> dict[str, Any]:
        """Codex's hook output for ``decision`` (the gateway's answer; None when no event was sent).

        No hook answer of Codex 0.171 ends a turn: a ``PreToolUse`` ``block`` or ``abort`` (an ended
        run's later calls included) is a deny, which ``loopwatch hook codex`` turns into exit status 2;
        ``continue: false`` is never sent (on ``PreToolUse`` Codex counts the hook as failed and runs
        the call). Warnings, and an abort that arrives on a result, reach the model as
        ``additionalContext`` and the user as ``systemMessage``.
        """
        if decision is None:
            return {}
        name, verdict = payload.get("hook_event_name"), decision.get("decision")
        if name == "PreToolUse" and verdict in ("block", "abort"):
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": stop_text(decision)}}
        if name in ("PreToolUse", "PostToolUse"):
            text = (stop_text(decision) if verdict in ("block", "abort")
                    else warning_text(decision) if verdict == "warn" else None)
            if text:  # systemMessage is shown to the user (TUI: "Hook · <text>"), additionalContext reaches the model
                return {"systemMessage": text, "hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}
        unchecked = failed_open(payload, decision)
        return {"systemMessage": unchecked} if unchecked else {}
