"""Event shapes, the schema the engine checks, and the keys an event maps to (docs/detection-rules.md §10).

Event shapes (docs/detection-rules.md §10, the conformance vectors' schema):

* ``tool_call``: ``run_id``, ``session_id``, optional ``session_key``
  (defaults to ``session_id``; explicit null = no session key), optional
  ``agent_id``, ``tool_call_id``, ``tool_name``, ``args`` (absent =
  JavaScript undefined), ``result`` (null = returned nothing), ``error``
  (string = thrown Error message; other non-null = thrown value), optional
  ``outcome_follows``;
* ``tool_result``: ``run_id``, ``session_id``, optional ``session_key``,
  ``tool_call_id`` (may be null or absent, docs/detection-rules.md §9), optional ``tool_name``
  and ``args`` (the call's, as OpenClaw's after-tool-call hook has them),
  ``result``, ``error``; optional ``ran_without_verdict`` and ``judged`` (see
  below). It may have neither session id nor session key (docs/detection-rules.md §8.1: it
  then reads and changes no session state);
* ``compaction_retry``: ``run_id``, ``session_id``, optional ``session_key``,
  optional ``agent_id``.

Any event may carry ``runner`` (a string: which runner recorded it, ``openclaw``,
``claude-code``, ``codex``, ...; the importers set it), which no rule reads.

:func:`validate_event` holds every rule the engine rejects an event by; :func:`state_key`,
:func:`guard_key` and :func:`blocked_key` give the identities OpenClaw keeps its session state,
post-compaction guards and blocked calls by (docs/detection-rules.md §7-§9).
"""

from __future__ import annotations

from typing import Any, Mapping

from .canonical import accelerated
from .fingerprint import js_trim
from .profiles import PROFILES, check_profile

__all__ = ["EVENT_TYPES", "EventError", "validate_event", "state_key", "guard_key", "run_identity", "has_session_key",
           "has_session", "blocked_key"]

EVENT_TYPES = ("tool_call", "tool_result", "compaction_retry")


class EventError(ValueError):
    """An event that does not fit the schema; ``str()`` says which field and why."""


_STRING_FIELDS = ("session_id", "session_key", "run_id", "agent_id", "tool_call_id", "tool_name", "event_id",
                  "blocked_by", "runner")
_NUMBER_FIELDS = ("ts", "deadline")
_BOOL_FIELDS = ("outcome_follows", "ran_without_verdict", "judged")
# validate_event of the usual event in one C call (None without the accelerator: the Python checks only)
_event_kind = accelerated("event_kind")


def _check_envelope(event: Mapping[str, Any], kind: str) -> None:
    """Field types every event kind shares, and a session to belong to.

    Raises EventError. Absent and null are allowed where OpenClaw has a default
    (docs/detection-rules.md §10: ``session_key`` null = no session key; a missing tool name is
    ``tool``). A ``tool_call`` or ``compaction_retry`` with neither session id
    nor session key belongs to no session at all and is rejected; a
    ``tool_result`` without them is valid and has no effect (docs/detection-rules.md §8.1).
    """
    get = event.get
    for field in _STRING_FIELDS:
        value = get(field)
        if value is not None and type(value) is not str:
            raise EventError(f"{field} must be a string or null, got {type(value).__name__}")
    if kind != "tool_result" and not (get("session_id") or get("session_key")):
        raise EventError("an event needs a session_id (or a session_key)")
    for field in _NUMBER_FIELDS:
        value = get(field)
        if value is not None and (type(value) is bool or not isinstance(value, (int, float))):
            raise EventError(f"{field} must be epoch milliseconds (a number), got {type(value).__name__}")
    for field in _BOOL_FIELDS:
        value = get(field)
        if value is not None and type(value) is not bool:
            raise EventError(f"{field} must be true or false, got {type(value).__name__}")
    if get("judged") is False and get("ran_without_verdict") is True:
        raise EventError("judged: false (loopwatch was never asked) contradicts ran_without_verdict: true "
                         "(asked, not waited for)")
    profile = get("profile")
    if profile is not None:
        problem = check_profile(profile)
        if problem:
            raise EventError(f"profile: {problem}")


def validate_event(event: Any) -> str:
    """Check ``event`` against the schema as :meth:`Engine.process` does, and return its type.

    These are all the rules the engine rejects an event by (the worker
    dead-letters such an event with reason class ``schema``): an object,
    ``type`` one of :data:`EVENT_TYPES`, the shared field types and, except
    for a ``tool_result``, a session (see :func:`_check_envelope`). A
    ``tool_result`` needs no ``tool_call_id`` (docs/detection-rules.md §9) and no session
    (docs/detection-rules.md §8.1). An event that passes is accepted by the engine whatever
    state it meets.

    Raises:
        EventError: the first rule the event breaks (``str()`` names the field).
    """
    if _event_kind is not None and type(event) is dict:
        kind = _event_kind(event, EVENT_TYPES, _STRING_FIELDS, _NUMBER_FIELDS, _BOOL_FIELDS, PROFILES)
        if kind is not None:  # the usual event, checked in C; else the checks below decide, and say why
            return kind
    if type(event) is not dict and not isinstance(event, Mapping):
        raise EventError(f"an event must be an object, got {type(event).__name__}")
    kind = event.get("type")
    if kind not in EVENT_TYPES:
        raise EventError(f"type must be one of {', '.join(EVENT_TYPES)}, got {kind!r}")
    _check_envelope(event, kind)
    return kind


def state_key(event: Mapping[str, Any]) -> str | None:
    """OpenClaw's session-state key for an event: the session key, else the session id (docs/detection-rules.md §8.1).

    Only an absent or null ``session_key`` falls back (JavaScript's ``??``):
    ``session_key: ""`` is the key ``""``. None when the event has
    neither (the store then uses ``"unknown"``).
    """
    key = event.get("session_key")
    return event.get("session_id") if key is None else key


def has_session_key(event: Mapping[str, Any]) -> bool:
    """Whether the event has a session key: ``session_key`` non-empty, or absent with a session id (docs/detection-rules.md §8.1, §10).

    Only such calls are checked by the detectors and recorded before execution;
    an explicit ``session_key: null`` (or ``""``) makes the event keyless.
    """
    return bool(event["session_key"] if "session_key" in event else event.get("session_id"))


def has_session(event: Mapping[str, Any]) -> bool:
    """Whether the event has a session key or a session id, either non-empty (docs/detection-rules.md §3 step 6, §8.1).

    Outcomes are recorded only for such events; a ``tool_result`` without
    either reads and changes no session state.
    """
    return bool(event.get("session_key") or event.get("session_id"))


def blocked_key(raw_run: Any, call_id: Any) -> str | None:
    """The key a blocked call is remembered by (docs/detection-rules.md §9); None: never remembered.

    The run id as sent (untrimmed) joined by ``:`` with the ``tool_call_id``
    when the run id is not blank, else the call id alone; a call without an id
    (null, absent or empty) has no key.
    """
    if not call_id:
        return None
    if raw_run and js_trim(raw_run):
        return f"{raw_run}:{call_id}"
    return call_id


def guard_key(event: Mapping[str, Any]) -> str | None:
    """The identity of the post-compaction guard an event belongs to (docs/detection-rules.md §7).

    A run id that is not blank identifies its guard as sent, untrimmed
    (``"r1"`` and ``" r1"`` are two guards), in whatever session. For a blank
    (absent, null, empty or whitespace-only) run id: the ``session_key`` when
    the field is present and not null (even ``""``), else the ``session_id``.
    Both kinds share one namespace of strings, as OpenClaw's own map does.
    None for a blank run id with neither (only a ``tool_result`` can have
    neither: it gets a guard of its own that nothing keeps).
    """
    return run_identity(event)[2]


def run_identity(event: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """``(run id as sent, trimmed run id or None when blank, guard_key(event))``, trimming once."""
    raw_run = event.get("run_id")
    run_id = js_trim(raw_run) if raw_run else None
    if run_id:
        return raw_run, run_id, raw_run
    session_key = event.get("session_key")
    return raw_run, None, session_key if session_key is not None else event.get("session_id")
