"""Many sessions at once: states looked up as OpenClaw looks them up (docs/detection-rules.md §8.1).

The stream processor keeps one :class:`SessionState` per Kafka record key in a
table. Offline (replay, conformance, backtests) :class:`SessionStore` plays the
part of OpenClaw's in-process map, holding every state in one place:

* states are keyed by the session key, else the session id (only an absent
  or null key falls back: ``session_key: ""`` is a key); each remembers
  the last session id it was looked up with;
* a ``tool_call`` or ``tool_result`` finds its state by the lookup of Spec
  §8.1: the state under its key; else, or when that one remembers another
  session id, the first state (in insertion order) remembering its session
  id, which is merged into the direct one, moved under the event's session
  key, or (keyless event) used where it is;
* a ``compaction_retry`` touches no session state, nor does a
  ``tool_result`` with neither session id nor session key;
* the post-compaction guards live beside the states, one map for all
  sessions, by :func:`~streams.detection.events.guard_key` (docs/detection-rules.md §7): they
  never move or merge with a session's state; so do the blocked deferred
  calls, by :func:`~streams.detection.events.blocked_key` (docs/detection-rules.md §9);
* a deferred call is found by its ``tool_call_id`` in whatever state holds it
  (docs/detection-rules.md §9: OpenClaw's wrapper keeps the call, not the session): a
  ``tool_result`` whose own state lacks its pending call takes it from the
  state that has it (another alias of the session, before the lookup joined
  them), and is recorded as that call's in the state its own fields look up.

Idle states are not pruned: a store lives for one input.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from .engine import Engine
from .events import has_session, has_session_key, state_key, validate_event
from .state import PendingCall, RunState, SessionState, remember_blocked

__all__ = ["SessionStore", "merge_states"]


def merge_states(into: SessionState, other: SessionState) -> None:
    """Merge ``other`` into ``into`` (docs/detection-rules.md §8.1).

    Histories are concatenated, ``into``'s records first (not trimmed: the
    next record or outcome trims to ``historySize``); warning buckets keep the
    larger of the two per key; pending deferred calls of both are kept
    (``into``'s for an id both hold). Guards kept in ``runs`` and blocked calls
    kept in ``blocked`` are joined too (the stream processor's states; the
    offline store keeps none there).
    """
    into.history.extend(other.history)
    into.reindex()
    for key, bucket in other.warning_buckets.items():
        if bucket > into.warning_buckets.get(key, 0):
            into.store_warning_bucket(key, bucket)
    for key, run in other.runs.items():
        into.runs.setdefault(key, run)
    for key, call in other.calls.items():
        into.calls.setdefault(key, call)
    for key, call in other.blocked.items():
        remember_blocked(into.blocked, key, call)


class SessionStore:
    """States of many sessions, for processing a mixed event stream in one process.

    Arguments:
        engine: the engine to apply events with.

    Attributes:
        states: state key -> :class:`SessionState`, in insertion order (a moved
            state is inserted anew).
        guards: guard identity -> :class:`RunState`, for all sessions.
        blocked: blocked deferred calls by run and call id, for all sessions (docs/detection-rules.md §9).
    """

    __slots__ = ("engine", "states", "guards", "blocked", "_session_ids", "_by_session_id", "_order", "_next",
                 "_pending")

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.states: dict[str, SessionState] = {}
        self.guards: dict[str, RunState] = {}
        self.blocked: dict[str, PendingCall] = {}
        self._session_ids: dict[str, str] = {}  # state key -> the session id it remembers
        self._by_session_id: dict[str, set[str]] = {}  # session id -> keys of the states remembering it
        self._order: dict[str, int] = {}  # state key -> insertion number (the lookup's "first")
        self._next = 0
        self._pending: dict[str, SessionState] = {}  # tool_call_id -> the state its deferred call went to

    def __len__(self) -> int:
        return len(self.states)

    def __iter__(self) -> Iterator[str]:
        return iter(self.states)

    def remembered_session_id(self, key: str) -> str | None:
        """The session id the state under ``key`` was last looked up with (None: none yet)."""
        return self._session_ids.get(key)

    def state_for(self, event: Mapping[str, Any]) -> SessionState:
        """The state a ``tool_call`` or ``tool_result`` applies to, by the lookup of docs/detection-rules.md §8.1.

        Changes the store as the lookup does (merge, move or create) and makes
        the state remember the event's session id.
        """
        key = state_key(event)
        if key is None:
            key = "unknown"
        session_id = event.get("session_id")
        if not (isinstance(session_id, str) and session_id):
            session_id = None
        direct = self.states.get(key)
        found_key = None
        if session_id is not None and (direct is None or self._session_ids.get(key) != session_id):
            found_key = self._first_remembering(session_id)
        used = key
        if found_key is not None and found_key != key:
            if direct is not None:
                merge_states(direct, self.states[found_key])
                self._remove(found_key)
            elif has_session_key(event):
                state = self.states[found_key]
                self._remove(found_key)
                self._insert(key, state)
            else:
                used = found_key  # a keyless event uses it where it is
        elif direct is None:
            self._insert(key, SessionState())
        if session_id is not None:
            self._remember(used, session_id)
        return self.states[used]

    def process(self, event: Mapping[str, Any], ref: Any = None) -> dict[str, Any]:
        """Apply one event; see :meth:`Engine.process`.

        Raises:
            EventError: the event does not fit the schema (the store is
                unchanged: checked before the lookup), or the engine rejects
                it (args nested too deeply or not JSON data: the state and
                guards are unchanged, but a merge or move the lookup made stays).
        """
        kind = validate_event(event)  # before keying: a session id that is a list is an EventError, not a TypeError
        if kind == "compaction_retry" or (kind == "tool_result" and not has_session(event)):
            return self.engine.process_valid(kind, event, None, ref, self.guards, self.blocked)
        state = self.state_for(event)
        call_id = event.get("tool_call_id")
        if kind == "tool_result" and call_id and isinstance(call_id, str):
            self._bring_pending(call_id, state)
        verdict = self.engine.process_valid(kind, event, state, ref, self.guards, self.blocked)
        if kind == "tool_call" and event.get("outcome_follows") is True and call_id in state.calls:
            self._pending[call_id] = state
        return verdict

    # ------------------------------------------------------------------ helpers

    def _bring_pending(self, call_id: str, state: SessionState) -> None:
        """Move the pending deferred call ``call_id`` into ``state`` when another state holds it (docs/detection-rules.md §9)."""
        owner = self._pending.pop(call_id, None)
        if call_id in state.calls:
            return
        if owner is None or call_id not in owner.calls:  # its state was merged into another since
            owner = next((other for other in self.states.values() if call_id in other.calls), None)
        if owner is not None and owner is not state:
            state.calls[call_id] = owner.calls.pop(call_id)

    def _first_remembering(self, session_id: str) -> str | None:
        keys = self._by_session_id.get(session_id)
        if not keys:
            return None
        if len(keys) == 1:
            return next(iter(keys))
        order = self._order
        return min(keys, key=order.__getitem__)

    def _insert(self, key: str, state: SessionState) -> None:
        self.states[key] = state
        self._order[key] = self._next
        self._next += 1

    def _remove(self, key: str) -> None:
        del self.states[key]
        del self._order[key]
        session_id = self._session_ids.pop(key, None)
        if session_id is not None:
            keys = self._by_session_id[session_id]
            keys.discard(key)
            if not keys:
                del self._by_session_id[session_id]

    def _remember(self, key: str, session_id: str) -> None:
        previous = self._session_ids.get(key)
        if previous == session_id:
            return
        if previous is not None:
            keys = self._by_session_id[previous]
            keys.discard(key)
            if not keys:
                del self._by_session_id[previous]
        self._session_ids[key] = session_id
        self._by_session_id.setdefault(session_id, set()).add(key)
