"""Partition keys: which state an event belongs to.

Runners key event records by run id. Two modes:

* ``run`` (default): run id, falling back to the session key, then the session
  id. Each run's state is its own: bounded per run, spread over partitions.
  Differs from OpenClaw only where a session's runs share something: the
  ``historySize`` cap (other runs' calls evict this run's records, Spec §8.2)
  and the warning dedupe map (Spec §6).
* ``session``: session key, falling back to the session id -- OpenClaw's own
  scoping (Spec §8.1), exact in every case.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["KEY_BY", "partition_key", "record_key"]

KEY_BY = ("run", "session")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def partition_key(event: Mapping[str, Any], key_by: str = "run") -> str:
    """The partition key of ``event`` for ``key_by`` (``run`` or ``session``); "" if it has no ids."""
    session = _text(event.get("session_key")) or _text(event.get("session_id"))
    if key_by == "session":
        return session or ""
    if key_by != "run":
        raise ValueError(f"key_by must be one of {KEY_BY}, got {key_by!r}")
    return _text(event.get("run_id")) or session or ""


def record_key(event: Mapping[str, Any], key_by: str = "run") -> bytes | None:
    """The Kafka record key of ``event``: :func:`partition_key` as UTF-8 bytes; None if it is "".

    Raises:
        ValueError: ``key_by`` is not ``run`` or ``session``.
    """
    # surrogatepass: a lone surrogate in an id (JSON can carry one) keys the record instead of raising,
    # and the client and `loopwatch produce` put the same event on the same partition.
    return partition_key(event, key_by).encode("utf-8", "surrogatepass") or None
