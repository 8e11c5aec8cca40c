"""An event made ready to publish: checked, completed, keyed, stamped and encoded, before anything is sent.

:class:`~streams.runners.client.LoopwatchClient` passes every event through :func:`prepare` and
:func:`encode_event`; nothing here talks to Kafka.

Validation
----------
Events are checked before anything is sent, with the engine's own schema
check (:func:`streams.detection.events.validate_event`, the rules by which
the worker dead-letters an event): an invalid event raises
:class:`~streams.detection.EventError` (a ``ValueError``) naming the field,
instead of being dead-lettered while the caller waits out its timeout.
An event the chosen codec cannot carry (for msgpack an integer beyond 64
bits or a lone surrogate, for JSON bytes) is sent in the other, which the
worker reads too (:func:`streams.wire.codecs.record_encoder`, as ``loopwatch
produce`` does); one neither can encode raises ``ValueError`` naming the event.

What is added to events
-----------------------
On an event that lacks them, the ``session_key`` last sent for its ``session_id`` and, on a
``tool_result``, the call's ``tool_name`` and ``args`` (:mod:`streams.runners.completion`); an
``event_id`` (uuid4 hex) and ``ts`` (epoch ms). No field the event has is changed, and the caller's
mapping is not changed.

Record keys
-----------
Each event is published with the record key ``record_key(event, key_by)``
(:mod:`streams.wire.keys`; ``loopwatch produce`` keys it the same): with
``key_by="run"`` (the default) its run id, else its session key, else its
session id; with ``key_by="session"`` its session key, else its session id. The worker uses the record key
**as it is** as the key of the detection state (its own ``--key-by`` only derives a key for
records that arrive without one), so the client's ``key_by`` decides whether
loop detection sees a run or a whole session: ``"session"`` gives OpenClaw's
session-level behaviour (history cap and warning dedupe shared by the
session's runs). Every producer of one session's events should use the same
``key_by``. The verdict comes back with the same key.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Mapping

from streams.detection.events import EventError, validate_event
from streams.wire.keys import record_key

from .completion import EventCompleter

__all__ = ["encode_event", "event_type", "prepare"]


def event_type(event: Any) -> Any:
    """The ``type`` of an event mapping; None for anything else (validated later)."""
    return event.get("type") if isinstance(event, Mapping) else None


def prepare(event: Mapping[str, Any], completer: EventCompleter, key_by: str,
            clock: Callable[[], float]) -> tuple[str, bytes, dict[str, Any], float]:
    """``(kind, record key, event, now)``: ``event`` checked, completed and stamped (a new dict), ``now`` the
    wall clock's time (epoch ms, ``clock()`` read once), the ``ts`` given to an event without one.

    Raises :class:`~streams.detection.EventError` (a ``ValueError``) for an event the worker would dead-letter.
    """
    try:
        kind = validate_event(event)
    except EventError as exc:
        raise EventError(f"invalid event (the worker would dead-letter it): {exc}") from None
    # After validation: what it adds comes from events that passed it too.
    event = completer.complete(event)
    # A valid event has a session id or key (a non-empty string): there is always a key.
    key = record_key(event, key_by)
    assert key is not None
    event = dict(event)
    event_id = event.get("event_id")
    if not isinstance(event_id, str) or not event_id:
        event["event_id"] = uuid.uuid4().hex
    now_ms = clock() * 1000
    if "ts" not in event:
        event["ts"] = int(now_ms)
    return kind, key, event, now_ms


def encode_event(encode: Callable[[Mapping[str, Any]], bytes], event: Mapping[str, Any], kind: str,
                 key: bytes) -> bytes:
    """The record value of ``event``; ``ValueError`` naming the event (:func:`event_name`) if neither codec can."""
    try:
        return encode(event)
    except ValueError as exc:
        raise ValueError(f"{event_name(event, kind, key)}: {exc}") from None


def event_name(event: Mapping[str, Any], kind: str, key: bytes) -> str:
    """How an error names an event, e.g. ``tool_call event 'e1' (key 'r1', tool_call_id 'c1')``."""
    call_id = event.get("tool_call_id")
    text = key.decode("utf-8", "surrogatepass")  # the key record_key encoded
    ids = f"key {text!r}" + (f", tool_call_id {call_id!r}" if isinstance(call_id, str) else "")
    return f"{kind} event {event['event_id']!r} ({ids})"
