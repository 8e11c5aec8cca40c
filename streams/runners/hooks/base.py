"""What the runner hook mappers share: input errors, the current run of each session, tool outcomes."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Mapping

__all__ = ["HookInputError", "RunTracker", "tool_outcome", "require_str", "optional_str", "VOLATILE_KEYS", "hook_answer"]

# Timing fields some tools put in their response (Claude Code's Grep, WebFetch, WebSearch, Task): they change
# from one identical call to the next, so they would make every outcome look like progress.
VOLATILE_KEYS = frozenset({"durationMs", "durationSeconds", "totalDurationMs", "duration_ms", "duration"})


class HookInputError(ValueError):
    """Hook JSON that is not what the runner sends (a required field missing or of the wrong type);
    ``str()`` is the reason, e.g. ``session_id must be a non-empty string, got 42``."""


def require_str(payload: Mapping[str, Any], field: str) -> str:
    """``payload[field]`` when it is a non-empty string. Raises HookInputError otherwise."""
    value = payload.get(field)
    if not isinstance(value, str) or not value:
        shown = "missing" if field not in payload else f"got {value!r:.80}"
        raise HookInputError(f"{field} must be a non-empty string ({shown})")
    return value


def optional_str(payload: Mapping[str, Any], field: str) -> str | None:
    """``payload[field]`` when it is a non-empty string, else None."""
    value = payload.get(field)
    return value if isinstance(value, str) and value else None


def tool_outcome(response: Any) -> dict[str, Any]:
    """The ``result`` of a tool that returned ``response`` (a hook's ``tool_response``), in OpenClaw's shape.

    A string is the text the tool returned (``{"content": [{"type": "text", "text": ...}], "details": {}}``);
    a list is content blocks; an object is the tool's structured result, kept in ``details`` without
    its timing fields (:data:`VOLATILE_KEYS`); None (no response) is an empty result. The engine hashes
    ``details`` and the text together (spec §4.3 rule 8), so two responses count as the same outcome
    exactly when they are equal but for their timings.
    """
    if isinstance(response, str):
        return {"content": [{"type": "text", "text": response}], "details": {}}
    if isinstance(response, list):
        return {"content": response, "details": {}}
    if isinstance(response, dict):
        return {"content": [], "details": {k: v for k, v in response.items() if k not in VOLATILE_KEYS}}
    if response is None:
        return {"content": [], "details": {}}
    return {"content": [], "details": {"value": response}}


class RunTracker:
    """The run in progress of each session, for runners whose hooks carry no run id.

    Bounded: the ``max_sessions`` least recently used sessions are kept (a forgotten session's next
    call goes to the mapper's default run). Also remembers whether a compaction was the last thing
    reported for a session, so the two hook events that can stand for one compaction arm the
    post-compaction guard once.
    """

    def __init__(self, max_sessions: int = 100_000) -> None:
        self.max_sessions = max_sessions
        self._runs: OrderedDict[str, list] = OrderedDict()  # session -> [run id, compaction is last]

    def _entry(self, session: str, default: str) -> list:
        entry = self._runs.get(session)
        if entry is None:
            entry = self._runs[session] = [default, False]
            if len(self._runs) > self.max_sessions:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(session)
        return entry

    def start(self, session: str, run: str) -> None:
        """Make ``run`` the run in progress of ``session``."""
        entry = self._entry(session, run)
        entry[0], entry[1] = run, False

    def current(self, session: str, default: str) -> str:
        """The run in progress of ``session``; ``default`` when none was started (or it was forgotten)."""
        return self._entry(session, default)[0]

    def tool_event(self, session: str, default: str) -> str:
        """The run in progress of ``session`` (as :meth:`current`), noting that a tool event came."""
        entry = self._entry(session, default)
        entry[1] = False
        return entry[0]

    def compaction(self, session: str, default: str) -> str | None:
        """The run in progress, or None when a compaction was already the last event reported for ``session``."""
        entry = self._entry(session, default)
        if entry[1]:
            return None
        entry[1] = True
        return entry[0]


def hook_answer(payload: Mapping[str, Any], decision: Mapping[str, Any] | None,
                warning: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """A runner's hook output for the gateway's ``decision`` (None: no event was sent, no answer).

    Claude Code and Codex document the same shapes: a ``PreToolUse`` hook denies a call with
    ``hookSpecificOutput.permissionDecision: "deny"`` and its reason; any other hook stops the
    session with ``continue: false`` and a ``stopReason`` (a post-compaction abort arrives on the
    result); an emitted warning is ``warning(message)``, the one shape in which they differ.
    """
    if decision is None:
        return {}
    verdict, message = decision["decision"], decision.get("message") or "loopwatch: tool-call loop detected"
    if payload.get("hook_event_name") == "PreToolUse":
        if verdict in ("block", "abort"):
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": message}}
        if verdict == "warn" and decision.get("message"):
            return warning(message)
        return {}
    if verdict in ("abort", "block"):
        return {"continue": False, "stopReason": message}
    return {}

