"""Claude Code hooks -> loopwatch events, and verdicts -> Claude Code's hook output.

Claude Code calls a hook with one JSON object (on stdin for a ``command`` hook, as the POST body
for an ``http`` hook) holding ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``
and the event's own fields; tool events add ``tool_name``, ``tool_input``, ``tool_use_id``, and
``PostToolUse`` adds ``tool_response`` (Claude Code hooks reference,
https://code.claude.com/docs/en/hooks). Calls made inside a sub-agent also carry the sub-agent's
``agent_id``.

Mapping (the Claude Code importer's, :mod:`streams.importers.claude_code`):

* Runs: the importer's, ``<session_id>:<prompt id>``: the ``prompt_id`` Claude Code 2.1.332 sends with
  every hook call of a prompt (the transcript's ``promptId``), else the id of the last human prompt read
  from the session's transcript (``transcript_path``; :class:`~streams.runners.hooks.transcripts.TranscriptPrompts`), so
  the run ids are the ones ``loopwatch replay --format claude-code`` gives and survive a gateway
  restart; ``<session_id>:start`` before any prompt. When the transcript cannot be read (a gateway on
  another machine), ``UserPromptSubmit`` starts a new run with a fresh id instead (the same cut,
  another spelling; a restarted gateway then puts a session's calls in ``:start`` until the next
  prompt). A sub-agent's calls are in ``<session_id>:<agent_id>``. ``UserPromptSubmit`` sends no event.
* ``PreToolUse`` -> ``tool_call`` (``tool_call_id`` = ``tool_use_id``, ``tool_name`` as Claude Code
  spells it, ``args`` = ``tool_input``, ``agent_id`` = ``main`` or the sub-agent's id) with
  ``outcome_follows: true``.
* ``PostToolUse`` -> ``tool_result`` whose ``result`` is ``tool_response`` in OpenClaw's shape
  (:func:`streams.runners.hooks.base.tool_outcome`); ``PostToolUseFailure`` -> ``tool_result``
  whose ``error`` is the failure's ``error`` text (a thrown error, as the importer reads
  ``is_error``).
* ``PostCompact`` (or ``SessionStart`` with ``source: "compact"``, which Claude Code 2.1.332 sends to
  command hooks only) -> ``compaction_retry`` in the run in progress (the importer's
  ``compact_boundary``); a second one before any tool event is the same compaction and is not sent again.
* ``PostToolBatch`` sends nothing; its answer stops the session when the run has ended.
* Anything else (``PreCompact``, ``Stop``, ``Notification``, ...) sends nothing and answers ``{}``.

Answers (Claude Code's hook output; what Claude Code 2.1.332 does with each was measured with the real
runner, docs/runners/claude-code.md "What stops a run"):

* ``PreToolUse`` blocked: ``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision":
  "deny", "permissionDecisionReason": <text>}}`` (:func:`~streams.runners.hooks.base.stop_text`:
  ``run_ended.message``, a policy's message, ``block_text``, ``block_reason``); the model goes on.
* ``PreToolUse`` aborted (a run-ending verdict, a call of an ended run, failing closed on a result):
  the same deny plus ``"continue": false, "stopReason": <text>``: the call does not run and the
  session stops.
* A result or compaction whose verdict is ``abort``: ``{"continue": false, "stopReason": ...}``. Claude
  Code honours it on ``PostToolUse`` but ignores it on ``PostToolUseFailure``, so the run is remembered
  as ended (:class:`~streams.runners.hooks.base.EndedRuns`) and the ``PostToolBatch`` hook that follows
  answers ``continue: false`` too.
* A warning: ``{"systemMessage": <text>, "hookSpecificOutput": {"hookEventName": <event>,
  "additionalContext": <text>}}`` with ``warning.note`` when present (the model sees
  ``additionalContext``, the user ``systemMessage``); the call runs.
* A ``PreToolUse`` the gateway let run without a verdict (fail-open): ``{"systemMessage": <why>}``.
* Otherwise ``{}``.
"""

from __future__ import annotations

import uuid
from typing import Any, Mapping

from streams.importers.claude_code import MAIN_AGENT, run_id
from .base import (EndedRuns, RunTracker, failed_open, optional_str, require_str, run_ended, stop_text, tool_outcome,
                   warning_text)
from .transcripts import TranscriptPrompts

__all__ = ["ClaudeCodeHooks", "RUNNER"]

RUNNER = "claude-code"
_TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")


class ClaudeCodeHooks:
    """Maps Claude Code hook calls to events (see the module docstring); keeps each session's run.

    Arguments:
        runs: the sessions' runs in progress when their transcripts cannot be read (a fresh
            :class:`RunTracker` by default); one per gateway, shared by all requests.
        transcripts: where the runs are read from (a fresh :class:`TranscriptPrompts` by default).
        ended: the runs this gateway answered with an ending verdict (a fresh :class:`EndedRuns`).
    """

    runner = RUNNER

    def __init__(self, runs: RunTracker | None = None, transcripts: TranscriptPrompts | None = None,
                 ended: EndedRuns | None = None) -> None:
        self.runs = runs if runs is not None else RunTracker()
        self.transcripts = transcripts if transcripts is not None else TranscriptPrompts()
        self.ended = ended if ended is not None else EndedRuns()

    def _main_run(self, payload: Mapping[str, Any], session: str, tracked: str | None) -> str | None:
        """The run of a main-agent call: its ``prompt_id`` (Claude Code 2.1.332 sends it with every hook call
        of a prompt), else from the transcript, else ``tracked`` (the RunTracker's)."""
        prompt = optional_str(payload, "prompt_id")
        if prompt is not None and tracked is not None:
            return run_id(session, prompt=prompt)
        path = optional_str(payload, "transcript_path")
        if path is not None and tracked is not None:
            try:
                return run_id(session, prompt=self.transcripts.last_prompt(path))
            except OSError:
                pass
        return tracked

    def event(self, payload: Mapping[str, Any]) -> dict[str, Any] | None:
        """The loopwatch event a hook call stands for, or None.

        Raises:
            HookInputError: no ``hook_event_name`` or ``session_id`` string; a tool event without a
                ``tool_use_id`` (or ``PreToolUse`` without a ``tool_name``) string.
        """
        name = require_str(payload, "hook_event_name")
        session = require_str(payload, "session_id")
        sub_agent = optional_str(payload, "agent_id")
        default = run_id(session, sub_agent=sub_agent)
        if name == "UserPromptSubmit":
            if sub_agent is None:
                self.runs.start(session, run_id(session, prompt=uuid.uuid4().hex))
            return None
        if name in _TOOL_EVENTS:
            call_id = require_str(payload, "tool_use_id")
            run = default if sub_agent else self._main_run(payload, session,
                                                           self.runs.tool_event(session, default))
            base = {"run_id": run, "session_id": session, "tool_call_id": call_id, "runner": RUNNER}
            if name == "PreToolUse":
                event = {"type": "tool_call", **base, "agent_id": sub_agent or MAIN_AGENT,
                         "tool_name": require_str(payload, "tool_name")}
                if "tool_input" in payload:
                    event["args"] = payload["tool_input"]
                event["outcome_follows"] = True
                return event
            if name == "PostToolUse":
                return {"type": "tool_result", **base, "result": tool_outcome(payload.get("tool_response")),
                        "error": None}
            error = payload.get("error")
            return {"type": "tool_result", **base, "result": None,
                    "error": error if isinstance(error, str) and error else "tool failed"}
        if name == "PostCompact" or (name == "SessionStart" and payload.get("source") == "compact"):
            run = default if sub_agent else self._main_run(payload, session,
                                                           self.runs.compaction(session, default))
            if run is None:
                return None
            return {"type": "compaction_retry", "run_id": run, "session_id": session,
                    "agent_id": sub_agent or MAIN_AGENT, "runner": RUNNER}
        return None

    def run_of(self, payload: Mapping[str, Any]) -> str:
        """The run a hook call of any event belongs to (as :meth:`event` maps a tool event's).

        Raises:
            HookInputError: no ``session_id`` string.
        """
        session = require_str(payload, "session_id")
        sub_agent = optional_str(payload, "agent_id")
        default = run_id(session, sub_agent=sub_agent)
        if sub_agent:
            return default
        return self._main_run(payload, session, self.runs.current(session, default)) or default

    def answer(self, payload: Mapping[str, Any], decision: Mapping[str, Any] | None) -> dict[str, Any]:
        """Claude Code's hook output for ``decision`` (the gateway's answer; None when no event was sent).

        See the module docstring; an ``abort`` is remembered for the run, so that the
        ``PostToolBatch`` after a ``PostToolUseFailure`` (whose ``continue: false`` Claude Code
        ignores) stops the session.
        """
        name = payload.get("hook_event_name")
        if name == "PostToolBatch":
            reason = self.ended.reason(self.run_of(payload))
            return {"continue": False, "stopReason": reason} if reason else {}
        if decision is None:
            return {}
        verdict = decision.get("decision")
        if verdict in ("block", "abort"):
            text = stop_text(decision)
            if run_ended(decision):
                record = decision.get("verdict") or {}
                self.ended.end(record.get("run_id") or self.run_of(payload), text)
            if name != "PreToolUse":
                return {"continue": False, "stopReason": text}
            answer: dict[str, Any] = {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                                             "permissionDecision": "deny",
                                                             "permissionDecisionReason": text}}
            if verdict == "abort":
                answer.update({"continue": False, "stopReason": text})
            return answer
        if verdict == "warn" and name in _TOOL_EVENTS:
            text = warning_text(decision)
            if text:  # systemMessage is shown to the user, additionalContext reaches the model
                return {"systemMessage": text, "hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}
        unchecked = failed_open(payload, decision)
        return {"systemMessage": unchecked} if unchecked else {}
