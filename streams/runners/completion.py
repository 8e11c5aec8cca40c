"""What a producer adds to the events it sends, so the worker sees what OpenClaw sees (docs/detection-rules.md §7, §9, §10).

OpenClaw's hooks know, for every event, the session key of the session and,
for a tool result, the call's tool name and params. A runner reporting a
result or a compaction retry often sends only ids. :class:`EventCompleter`
fills in, from the events the same producer sent before:

* ``session_key``: on an event without the field, the session key last sent
  for its ``session_id`` (a tool call or result that carried one). So a
  ``compaction_retry`` sent with only its ``session_id`` arms the guard its
  calls use, and under ``key_by="session"`` it gets the calls' record key.
  An explicit ``session_key: null`` (a keyless event) is left as it is;
* ``tool_name`` and ``args`` on a ``tool_result`` without them: those of the
  ``tool_call`` with the same ``tool_call_id`` (a result may carry them,
  docs/detection-rules.md §9; the worker then reports a blocked call's result, or records a
  result whose call it never saw, with the call's own name and args).

Fields the event has are never changed. Memory: at most ``max_calls`` calls
waiting for their result and ``max_sessions`` session keys, the oldest
forgotten first; a forgotten call's result is sent as it is, which the worker
still matches by ``tool_call_id``.
"""

from __future__ import annotations

from typing import Any, Mapping

from streams.detection.events import EventError, validate_event

__all__ = ["EventCompleter", "MAX_CALLS", "MAX_SESSIONS"]

MAX_CALLS = 10_000  # calls remembered until their result is sent
MAX_SESSIONS = 10_000  # session id -> session key


class EventCompleter:
    """Fills ``session_key``, and a result's ``tool_name``/``args``, from earlier events (see the module docstring).

    Arguments:
        max_calls: calls remembered until their result is sent.
        max_sessions: session ids whose session key is remembered.
    """

    __slots__ = ("max_calls", "max_sessions", "_calls", "_keys")

    def __init__(self, max_calls: int = MAX_CALLS, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_calls = max_calls
        self.max_sessions = max_sessions
        self._calls: dict[str, tuple[Any, Any]] = {}  # tool_call_id -> (tool_name, args or _ABSENT)
        self._keys: dict[str, str] = {}  # session_id -> session key

    def complete(self, event: Mapping[str, Any]) -> Mapping[str, Any]:
        """``event`` with the missing fields added (a new dict), or ``event`` itself when nothing is missing.

        An event the worker would dead-letter (:func:`~streams.detection.events.validate_event`)
        is returned as it is and teaches nothing, so what is added always has the right type.
        """
        try:
            kind = validate_event(event)
        except EventError:
            return event
        session_id = event.get("session_id")
        added: dict[str, Any] = {}
        if isinstance(session_id, str) and session_id:
            if "session_key" in event:
                key = event["session_key"]
                if isinstance(key, str) and key:
                    self._remember(self._keys, session_id, key, self.max_sessions)
            elif session_id in self._keys:
                added["session_key"] = self._keys[session_id]
        call_id = event.get("tool_call_id")
        if isinstance(call_id, str) and call_id:
            if kind == "tool_call" and event.get("outcome_follows") is True:
                self._remember(self._calls, call_id, (event.get("tool_name"), event.get("args", _ABSENT)),
                               self.max_calls)
            elif kind == "tool_result":
                call = self._calls.pop(call_id, None)
                if call is not None:
                    tool_name, args = call
                    if "tool_name" not in event and tool_name is not None:
                        added["tool_name"] = tool_name
                    if "args" not in event and args is not _ABSENT:
                        added["args"] = args
        return {**event, **added} if added else event

    @staticmethod
    def _remember(store: dict, key: str, value: Any, limit: int) -> None:
        store.pop(key, None)  # the newest goes last
        if len(store) >= limit:
            del store[next(iter(store))]
        store[key] = value


_ABSENT = object()
