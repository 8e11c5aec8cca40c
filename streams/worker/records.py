"""The worker's output records: their shapes, and how one too large to publish is cut down.

Values are encoded with the output codec (msgpack by default, as JSON when
msgpack cannot carry them, e.g. a lone surrogate from JSON input); dead letters
are always msgpack because they carry raw bytes.

* verdict (``loopwatch.verdicts``, same key as the event)::

    {event_id, key, run_id, session_id, tool_call_id, [event_ts],
     source: {topic, partition, offset}, [event_source],
     <every field of the engine's verdict: type, verdict, decision, detection, ...,
      evidence: [[event_id, partition, offset], ...]>}

  ``event_ts`` is the event's ``ts`` (epoch ms) when it has one;
  ``event_source`` is the event's own ``source`` (importers' file position).
  The time the verdict was produced is the Kafka record's timestamp.
* loop event (``loopwatch.loop-events``), one per finding of the verdict's
  ``decided_by`` (:mod:`streams.detection.decision`: a detection that warns,
  is suppressed or blocks, the guard's abort, a policy's or the fleet breaker's
  decision, a run that had ended, and the shadow findings)::

    {kind, action (warn|suppressed|block|abort|would_*), detector, level, count,
     message, rule, enforced, warning_key, tool_name, run_id, session_id, key,
     event_id, evidence, source: {topic, partition, offset}, event_ts}

  plus, for a late result (``ran_without_verdict``) whose call loopwatch had
  refused, a correction: kind ``correction``, action ``ran``, ``corrects:
  {event_id, tool_call_id, verdict, by}`` (that call's block or abort did not
  stop it; docs/events-and-verdicts.md, Late calls).

* dead letter (``loopwatch.dead-letters``)::

    {reason_class (decode|schema|error|size|state), reason, source: {topic, partition, offset},
     key: bin|None, value: bin}

  ``state``: a stored state the worker cannot read (its changelog topic and
  partition, offset -1; the key then starts afresh).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import msgpack

from streams.detection.decision import correction, findings
from streams.wire.codecs import MAX_CARRIED_BYTES, fits

__all__ = ["SHORTENED_CHARS", "Source", "encode_capped", "encode_dead_letter", "loop_events", "shortened"]


class Source(NamedTuple):
    """Where a record was read: topic, partition, offset.

    ``rekeyed``: the record came through the rekey topic (a keyless input
    record forwarded under its state key); topic/partition/offset are then
    its origin in the input topic. A named tuple: one is made per record.
    """

    topic: str
    partition: int
    offset: int
    rekeyed: bool = False

    @property
    def tp(self) -> str:
        """The key of :attr:`SessionState.last_offsets`: ``"topic:partition"``, ``"rekey:topic:partition"`` if rekeyed.

        Rekeyed records of a key reach it in their origin's order, but not in
        order with the keyed records of that origin partition (they take a
        detour through the rekey topic), so each path keeps its own last offset.
        """
        return f"rekey:{self.topic}:{self.partition}" if self.rekeyed else f"{self.topic}:{self.partition}"

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset}


SHORTENED_CHARS = 1_024
"""Longest string (or bytes) a :func:`shortened` record keeps whole, ``event_id`` aside."""

_EVENT_ID_CHARS = 65_536
_SHORTENED_DEPTH = 16  # containers nested deeper are dropped (None)
# what a stub keeps: the decision (the engine's own short values) and where the event was
_STUB_FIELDS = ("event_id", "type", "verdict", "decision", "blocked", "block_reason", "run_aborted", "detector",
                "level", "action", "count")


def shortened(record: Mapping[str, Any], size: int, stub: bool = False) -> dict[str, Any]:
    """A verdict or loop-event record too large to publish (``size`` bytes encoded), cut down.

    Every string and bytes value over :data:`SHORTENED_CHARS` is cut to that
    (``event_id`` to 64 KiB: the runner waiting for the verdict matches it
    whole), containers nested over 16 levels are dropped; ``truncated``
    gives ``size``. With ``stub`` (for when that is still too large, e.g.
    the evidence of a huge ``historySize``, or a long record key) only the
    decision fields (``verdict``, ``decision``, ``blocked``, ``block_reason``,
    ``run_aborted``;
    for a loop event ``detector``, ``level``, ``action``, ``count``), ``type``,
    ``source`` (the worker's topic/partition/offset) and ``event_id`` (cut to
    :data:`SHORTENED_CHARS`) are kept: at most a few KB, whatever the event.

    Such records come from events with tool names or ids of hundreds of KB (a
    verdict repeats the tool name) or a huge free-form ``source``.
    """
    if stub:
        out = {name: _cut(record[name]) for name in _STUB_FIELDS
               if name in record and isinstance(record[name], (str, int, float, bool, type(None)))}
        out["source"] = record.get("source")
    else:
        out = _cut(record)
        out["event_id"] = _cut(record.get("event_id"), _EVENT_ID_CHARS)
    out["truncated"] = size
    return out


def encode_capped(encode: Callable[[Any], bytes], key: bytes, record: dict[str, Any]) -> bytes:
    """``encode(record)``, :func:`shortened` (then a stub) while it does not :func:`fit <fits>` with ``key``.

    The stub goes even if it does not fit (a key of about 1 MB): it is a few KB, and
    :meth:`streams.worker.outputs.Outputs.add` then leaves the key out. Raises what ``encode`` raises.
    """
    encoded = encode(record)
    if fits(key, encoded):
        return encoded
    size = len(encoded)
    encoded = encode(shortened(record, size))
    return encoded if fits(key, encoded) else encode(shortened(record, size, stub=True))


def _cut(value: Any, limit: int = SHORTENED_CHARS, depth: int = 0) -> Any:
    if isinstance(value, (str, bytes)):
        return value[:limit] if len(value) > limit else value
    if isinstance(value, (dict, list)) and depth >= _SHORTENED_DEPTH:
        return None
    if isinstance(value, dict):
        return {name: _cut(item, limit, depth + 1) for name, item in value.items()}
    if isinstance(value, list):
        return [_cut(item, limit, depth + 1) for item in value]
    return value


def encode_dead_letter(raw: bytes | None, key: bytes | None, source: Source, reason_class: str,
                       reason: str) -> bytes:
    """The dead-letter record value (always msgpack: ``key`` and ``value`` are raw bytes).

    ``{reason_class, reason, source, key, value}``. A ``key`` field over
    :data:`SHORTENED_CHARS` bytes is cut to that (``key_size`` then gives
    its length), and so is the reason, which may quote the event. The value
    is cut to what makes the letter :func:`fit <fits>` beside the record
    key ``key`` (``value_truncated: true``, ``value_size``: bytes of the
    whole record value), so the letter keeps its record key, except for a
    key that leaves no room at all (about 1 MB), which
    :meth:`streams.worker.outputs.Outputs.add` then leaves out.
    """
    value = raw if raw is not None else b""
    key = key or None
    kept_key = _cut(key)
    record: dict[str, Any] = {"reason_class": reason_class, "reason": _cut(reason), "source": source.as_dict(),
                              "key": kept_key, "value": value}
    if kept_key is not key:
        record["key_size"] = len(key)  # type: ignore[arg-type]
    if not fits(key, _pack_letter(record)):
        record.update(value=b"", value_truncated=True, value_size=len(value))
        # the empty bin is 2 bytes (c4 00); the cut value's header is 5 at most (bin 32)
        room = MAX_CARRIED_BYTES - len(key or b"") - (len(_pack_letter(record)) - 2 + 5)
        record["value"] = value[:max(0, room)]
    return _pack_letter(record)


def _pack_letter(record: dict[str, Any]) -> bytes:
    # backslashreplace: a reason may quote a lone surrogate of the event (JSON can carry one)
    return msgpack.packb(record, use_bin_type=True, unicode_errors="backslashreplace")


def loop_events(record: Mapping[str, Any], found: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The loop events of a verdict record: one per finding of its ``decided_by``
    (:func:`streams.detection.decision.findings`, or ``found`` when the caller has them already),
    enforced or shadow, and the correction of a late result whose call loopwatch had refused
    (:func:`streams.detection.decision.correction`)."""
    if record.get("decided_by", record) is None and "corrects" not in record:
        return []  # the usual case, at a dict lookup's cost: nothing decided, nothing to correct
    if found is None:
        found = findings(record)
    fix = correction(record)  # a late result: the block or abort of its call did not happen
    if fix is not None:
        found = [*found, fix]
    if not found:
        return []  # the usual case: nothing to report
    base = {
        "tool_name": record.get("tool_name"), "run_id": record.get("run_id"), "session_id": record.get("session_id"),
        "key": record.get("key"), "event_id": record.get("event_id"), "evidence": record.get("evidence", []),
        "source": record.get("source"), "event_ts": record.get("event_ts"),
    }
    detection = record.get("detection") or {}
    out = []
    for finding in found:
        warning_key = detection.get("warning_key") if finding["kind"] in ("detection", "policy") else None
        out.append({**finding, "warning_key": warning_key, **base})
    return out
