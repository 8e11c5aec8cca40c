"""Many sessions at once: states keyed as OpenClaw keys them (Spec §8.1).

The stream processor keeps one :class:`SessionState` per Kafka record key in a
table. Offline (replay, conformance, backtests) :class:`SessionStore` plays the
part of OpenClaw's in-process map: state keyed by session key, else session
id, with a session id's state re-keyed or merged when that id shows up under a
session key.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from .engine import Engine, state_key, validate_event
from .state import SessionState

__all__ = ["SessionStore", "merge_states"]


def merge_states(into: SessionState, other: SessionState) -> None:
    """Merge ``other`` into ``into``: histories concatenated, bucket maxima kept (Spec §8.1)."""
    into.history.extend(other.history)
    into.reindex()
    for key, bucket in other.warning_buckets.items():
        if bucket > into.warning_buckets.get(key, 0):
            into.store_warning_bucket(key, bucket)
    for key, run in other.runs.items():
        into.runs.setdefault(key, run)
    for key, call in other.calls.items():
        into.calls.setdefault(key, call)


class SessionStore:
    """States of many sessions, for processing a mixed event stream in one process.

    Arguments:
        engine: the engine to apply events with.
    """

    __slots__ = ("engine", "states")

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.states: dict[str, SessionState] = {}

    def __len__(self) -> int:
        return len(self.states)

    def __iter__(self) -> Iterator[str]:
        return iter(self.states)

    def state_for(self, event: Mapping[str, Any]) -> SessionState:
        """The state an event applies to, re-keying a session id's state under its session key."""
        key = state_key(event) or ""
        session_id = event.get("session_id")
        if isinstance(session_id, str) and session_id and session_id != key and session_id in self.states:
            orphan = self.states.pop(session_id)
            if key in self.states:
                merge_states(self.states[key], orphan)
            else:
                self.states[key] = orphan
        state = self.states.get(key)
        if state is None:
            state = self.states[key] = SessionState()
        return state

    def process(self, event: Mapping[str, Any], ref: Any = None) -> dict[str, Any]:
        """Apply one event; see :meth:`Engine.process` (raises ``EventError`` for an event it rejects)."""
        validate_event(event)  # before keying: a session id that is a list is an EventError, not a TypeError
        return self.engine.process(event, self.state_for(event), ref)
