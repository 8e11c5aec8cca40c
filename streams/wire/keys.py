"""Record keys and partitions: which state an event belongs to, and which partition a key lands on.

:func:`partition_key` / :func:`record_key` give an event's Kafka record key (the client, ``loopwatch
produce``, the worker's re-keying and offline replay all key events with them);
:func:`verdict_partition` is the partition of a record key by Kafka's default partitioner, which is
where the worker publishes a verdict and where a runner reads only its own verdicts. The rest of this
docstring says when the keying gives exactly the offline verdicts.

The worker keeps one :class:`~streams.detection.SessionState` per record key,
with the post-compaction guards of the events under that key inside it. The
offline store (:class:`~streams.detection.SessionStore`: replay, report,
conformance) holds every session state and every guard in one place and
follows OpenClaw's lookup: session state by session key, else session id,
joined across keys by remembered session ids (docs/detection-rules.md §8.1); one guard per raw
run id across sessions, and per ``session_key``-else-``session_id`` for a
blank run id (docs/detection-rules.md §7). The worker gives exactly the offline verdicts when
everything the store lets events share lands under one record key and
nothing under one record key is kept apart by the store. Two modes:

* ``session``: session key, falling back to the session id. Exact when
  (1) every event of a session -- ``tool_call``, ``tool_result`` and
  ``compaction_retry`` alike -- carries its session key, or none does (the
  client and ``loopwatch produce`` add the key a session was last sent with,
  :mod:`streams.runners.completion`; a ``compaction_retry`` sent before any
  keyed event of its session cannot get it); (2) a session id is sent under
  one session key only; (3) a run id that is not blank stays in one session;
  (4) no blank run id comes with ``session_key: ""`` (that guard identity
  spans sessions offline).
* ``run`` (default): run id, falling back to the session key, then the
  session id; a blank (whitespace-only) run id falls back too, as its guard
  does. Guards are always exact (a non-blank run's guard is under its run id,
  whatever session keys its events carry). The session state is exact when
  each session's events belong to one run id, spelled one way (``" r1"`` and
  ``"r1"`` share history but not a record key), that run is in no other
  session, and each ``tool_result`` carries its call's run id; a session id
  may then come with and without its session key. A session with several
  runs stays exact while its history never holds more than ``historySize``
  records in all and its dedupe map never passes 256 keys (both are per
  session offline, docs/detection-rules.md §8.2, §6).

A ``tool_result`` with neither session id nor session key (valid: it changes
no session state and records nothing, docs/detection-rules.md §8.1) goes under its run id
(whatever ``key_by``; its verdict reports that run's guard, exact with ``run``
keying), else under ``unknown`` (OpenClaw's own state key for an event with
neither). Blocked deferred calls are remembered in the state of the call's
record key, by run id and call id (docs/detection-rules.md §9): a result is ignored there when
it carries the call's run id, as with ``run`` keying it lands there.

Outside that line the worker differs by construction: a run spread over
sessions on several record keys (its guard is split), a session id under two
keys (its state is split: a keyless result does not find the pending call of
its keyed call), several runs of a session interleaved past ``historySize``
under run keys. ``docs/keying.md`` says the same for users;
``tests/worker/test_keying_exactness.py`` runs both sides through a broker.
"""

from __future__ import annotations

from typing import Any, Mapping

from aiokafka.partitioner import DefaultPartitioner

from streams.detection.fingerprint import js_trim

__all__ = ["KEY_BY", "NO_IDS_KEY", "partition_key", "record_key", "verdict_partition"]

KEY_BY = ("run", "session")
NO_IDS_KEY = "unknown"  # a result with no run id, session id or key (docs/detection-rules.md §8.1: OpenClaw's key for neither)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _run_text(value: Any) -> str | None:
    """The run id as sent when it is not blank (a whitespace-only run id is none, docs/detection-rules.md §7, §8.2)."""
    return value if isinstance(value, str) and js_trim(value) else None


def partition_key(event: Mapping[str, Any], key_by: str = "run") -> str:
    """The partition key of ``event`` for ``key_by`` (``run`` or ``session``).

    An event with neither session id nor key (only a ``tool_result`` is
    valid so) falls back to its run id, then to :data:`NO_IDS_KEY`.
    """
    session = _text(event.get("session_key")) or _text(event.get("session_id"))
    run = _run_text(event.get("run_id"))
    if key_by == "session":
        return session or run or NO_IDS_KEY
    if key_by != "run":
        raise ValueError(f"key_by must be one of {KEY_BY}, got {key_by!r}")
    return run or session or NO_IDS_KEY


def record_key(event: Mapping[str, Any], key_by: str = "run") -> bytes | None:
    """The Kafka record key of ``event``: :func:`partition_key` as UTF-8 bytes (never empty).

    Raises:
        ValueError: ``key_by`` is not ``run`` or ``session``.
    """
    # surrogatepass: a lone surrogate in an id (JSON can carry one) keys the record instead of raising,
    # and the client and `loopwatch produce` put the same event on the same partition.
    return partition_key(event, key_by).encode("utf-8", "surrogatepass") or None


def verdict_partition(key: bytes, partitions: int) -> int:
    """The partition of ``key`` among ``partitions`` by Kafka's default partitioner.

    Same as the Java client's and aiokafka's ``DefaultPartitioner``: murmur2 of
    the key bytes, masked to 31 bits, modulo the partition count.

    Arguments:
        key: the record key (:func:`record_key`).
        partitions: partition count of the topic, >= 1.
    Returns:
        A partition number in ``range(partitions)``.
    """
    return DefaultPartitioner()(key, list(range(partitions)), None)
