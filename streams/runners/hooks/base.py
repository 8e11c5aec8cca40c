"""What the runner hook mappers share: input errors, the current run of each session, tool outcomes."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Mapping

from streams.importers.events import VOLATILE_KEYS, structured_result

__all__ = ["HookInputError", "RunTracker", "EndedRuns", "tool_outcome", "require_str", "optional_str", "VOLATILE_KEYS",
           "stop_text", "warning_text", "run_ended", "failed_open"]

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


tool_outcome = structured_result  # the ``result`` of a hook's ``tool_response``, as the importers read it


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


DEFAULT_STOP_TEXT = "loopwatch: tool-call loop detected"


def stop_text(decision: Mapping[str, Any]) -> str:
    """What to tell the model when a call is denied or a run stopped (``decision``: the gateway's answer).

    For a call of a run that had already ended, the record's ``run_ended.message`` (docs/events-and-
    verdicts.md); else a loopwatch policy's message when a policy decided; else the record's
    ``block_text`` (OpenClaw 2026.9.6's text for the model), else its ``block_reason``, else the
    gateway's ``message`` (the post-compaction guard's abort, or the client's stand-in when no
    verdict came).
    """
    record = decision.get("verdict") or {}
    ended = record.get("run_ended") or {}
    policy = record.get("policy") or {}
    candidates = [ended.get("message"), ended.get("reason")] if ended and decision.get("decision") == "abort" else []
    if policy.get("message") and policy.get("verdict") == decision.get("decision"):
        candidates.append(policy["message"])
    candidates += [record.get("block_text"), record.get("block_reason"), decision.get("message")]
    for text in candidates:
        if isinstance(text, str) and text:
            return text
    return DEFAULT_STOP_TEXT


def warning_text(decision: Mapping[str, Any]) -> str | None:
    """What to tell the model of an emitted warning: the record's ``warning.note`` (OpenClaw 2026.9.6's
    note on the tool result) when present, else the warning's message; None when there is none."""
    record = decision.get("verdict") or {}
    note = (record.get("warning") or {}).get("note")
    if isinstance(note, str) and note:
        return note
    return decision.get("message") or None


def failed_open(payload: Mapping[str, Any], decision: Mapping[str, Any] | None) -> str | None:
    """The gateway's message when a ``PreToolUse`` call goes on without its verdict (no verdict in time, or
    Kafka refused the event, and the gateway fails open): the user should know it ran unchecked."""
    if (decision is None or payload.get("hook_event_name") != "PreToolUse" or decision.get("decision") != "allow"
            or decision.get("verdict") is not None or not (decision.get("timed_out") or decision.get("error"))):
        return None
    return decision.get("message") or "loopwatch: no verdict; failing open"


def run_ended(decision: Mapping[str, Any] | None) -> bool:
    """Whether ``decision`` ends its run or says it has ended: an ``abort`` (the post-compaction guard, a
    policy's abort, a 2026.9.6 terminal block, a call of an ended run, or failing closed on a result)."""
    return decision is not None and decision.get("decision") == "abort"


class EndedRuns:
    """Runs that a gateway answered with an ending verdict, and why (bounded, least recently used forgotten).

    Only for the hook events that carry no event of their own but can still stop the runner (Claude
    Code's ``PostToolBatch``): every call of an ended run gets the worker's ``abort`` anyway.
    """

    def __init__(self, max_runs: int = 100_000) -> None:
        self.max_runs = max_runs
        self._runs: OrderedDict[str, str] = OrderedDict()

    def end(self, run: str, reason: str) -> None:
        self._runs[run] = reason
        self._runs.move_to_end(run)
        if len(self._runs) > self.max_runs:
            self._runs.popitem(last=False)

    def reason(self, run: str) -> str | None:
        """Why ``run`` ended, or None when it has not (as far as this gateway saw)."""
        return self._runs.get(run)
