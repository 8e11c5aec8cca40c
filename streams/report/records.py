"""Verdict records as the report reads them: where a call was recorded, what happened to it, repeats.

* :func:`where`, :func:`file_position`, :func:`kafka_position`: the position of a record's event
  (``file:line`` of a recorded session or event file; the Kafka ``{topic, partition, offset}`` of the
  input event a worker's verdict answers);
* :func:`call_status`: what happened to a tool call, one of :data:`STATUSES`;
* :class:`Repeats`: a verdict the worker published again after a crash (docs/worker.md: byte for
  byte the same) is counted once: a record whose ``source`` is a Kafka position already seen with
  the same content. Records without a Kafka position (``loopwatch replay``'s) are never merged: each
  is one event the engine applied, and an event file holding the same event twice gives two
  identical verdict records.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Mapping

from streams.detection.decision import findings

__all__ = ["STATUSES", "ABORT_DETECTOR", "NO_RUN", "NO_SESSION", "TAIL_FIELDS", "Repeats", "call_status",
           "event_time", "file_position", "kafka_position", "plural", "where"]

# Timeline colours, worst last: what happened to a call (refused: a call of a run that had already ended).
STATUSES = ("allow", "suppressed", "warn", "block", "abort", "refused")

ABORT_DETECTOR = "compaction_loop_persisted"
NO_RUN = "(no run id)"
NO_SESSION = "(no session id)"


def where(source: Mapping[str, Any] | None, relative_to: str | None = None, basename: bool = False) -> str:
    """``file:line`` of a source position (``file:line step N`` for a step of a ``.traj`` file).

    The path is shown relative to ``relative_to`` (default: the working directory) when it
    lies below it, else as recorded; only its last component with ``basename``. ``"-"`` when
    there is no source.
    """
    if not source or not source.get("path"):
        return "-"
    path = str(source["path"])
    if basename:
        shown = os.path.basename(path)
    else:
        base = relative_to if relative_to is not None else os.getcwd()
        try:
            rel = os.path.relpath(path, base)
        except ValueError:  # another drive (Windows)
            rel = path
        shown = path if rel.startswith("..") else rel
    text = f"{shown}:{source.get('line', '?')}"
    if source.get("step") is not None:
        text += f" step {source['step']}"
    return text


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def file_position(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where the record's event was recorded (``{path, line, ...}``): ``source``, else ``event_source``; or None."""
    for name in ("source", "event_source"):
        value = record.get(name)
        if isinstance(value, dict) and value.get("path"):
            return value
    return None


def kafka_position(record: Mapping[str, Any]) -> tuple[Any, Any, Any] | None:
    """``(topic, partition, offset)`` of the input event a worker's verdict answers, or None (replay output)."""
    source = record.get("source")
    if isinstance(source, dict) and all(k in source for k in ("topic", "partition", "offset")):
        return source["topic"], source["partition"], source["offset"]
    return None


# Fields ``loopwatch tail --json`` puts before each record: the verdict's own position and time
# on the verdicts topic, which differ when the worker publishes the same verdict again.
TAIL_FIELDS = ("partition", "offset", "timestamp")


class Repeats:
    """Recognises a verdict published again: same Kafka ``source`` and same content as an earlier record.

    The content is the whole record but :data:`TAIL_FIELDS`. ``repeated`` counts the records
    recognised; ``conflicting`` those with the Kafka position of an earlier record but other
    content (two workers, or a configuration changed across a restart): they are not repeats
    and are counted as events.
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[Any, Any, Any], set[bytes]] = {}
        self.repeated = 0
        self.conflicting = 0

    def is_repeat(self, record: Mapping[str, Any]) -> bool:
        position = kafka_position(record)
        if position is None:
            return False
        content = {k: v for k, v in record.items() if k not in TAIL_FIELDS}
        digest = hashlib.blake2b(json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                                 .encode("utf-8", "surrogatepass"), digest_size=16).digest()  # JSON has lone ones
        seen = self._seen.setdefault(position, set())
        if digest in seen:
            self.repeated += 1
            return True
        if seen:
            self.conflicting += 1
        seen.add(digest)
        return False


def event_time(record: Mapping[str, Any]) -> float | None:
    """The record's event time (``event_ts``, epoch ms) when it is a plausible one, else None."""
    ts = record.get("event_ts")
    return ts if type(ts) in (int, float) and 0 < ts < 1e15 else None


def call_status(record: Mapping[str, Any]) -> str:
    """What happened to a tool call, one of :data:`STATUSES` (refused, abort, block, then the detection)."""
    if "run_ended" in record:
        return "refused"
    if record.get("verdict") == "abort":
        return "abort"
    if record.get("verdict") == "block":  # OpenClaw's block, a loopwatch policy's or the fleet breaker's
        return "block"
    for finding in findings(record):
        if finding["enforced"] and finding["action"] in ("warn", "suppressed"):
            return finding["action"]
    return "allow"

