"""Request bodies in, gateway answers out: parsing a JSON object, and a verdict as the ``/v1/events`` answer."""

from __future__ import annotations

from typing import Any

from streams.runners.client import Verdict
from streams.wire.codecs import json_loads

__all__ = ["BadRequest", "parse_object", "event_answer", "DECISIONS"]

DECISIONS = ("allow", "warn", "block", "abort")


class BadRequest(Exception):
    """A request the gateway refuses: ``status`` (400, 403, 408, 413, 415, 503) and ``reason`` (the
    answer's ``error``); ``close``: close the connection after the answer (a client too slow to send)."""

    def __init__(self, status: int, reason: str, close: bool = False) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.close = close


def parse_object(body: bytes) -> dict[str, Any]:
    """The JSON object in ``body`` (UTF-8). Raises BadRequest(400) with the reason for anything else
    (``NaN``, ``Infinity`` and numbers beyond a double such as ``1e999`` included)."""
    if not body.strip():
        raise BadRequest(400, "empty body: expected one JSON object")
    try:
        value = json_loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadRequest(400, f"body is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except ValueError as exc:  # json.JSONDecodeError included
        raise BadRequest(400, f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadRequest(400, f"the body must be a JSON object, got {type(value).__name__}")
    return value


def event_answer(verdict: Verdict, on_timeout: str) -> dict[str, Any]:
    """The ``/v1/events`` answer for ``verdict``.

    ``decision`` is the verdict as the Python client gives it (:class:`Verdict`): the worker's
    (``ignore``, a result for a blocked or unknown call, answers ``allow``: nothing to do) or, when
    no verdict came (``timed_out``, or Kafka refused the event: ``error``), the client's stand-in for
    the ``on_timeout`` policy (fail-closed: ``block`` for a call, ``abort`` for a result or a
    compaction). ``decided_by`` is what decided (:attr:`Verdict.decided_by`, the record's field:
    ``kind``, ``detector``, ``count``, ...; None when nothing did or no verdict came), ``detector``
    and ``count`` its detector and count; ``message`` is what to tell the model
    (:attr:`Verdict.message`); ``verdict`` is the worker's verdict record, None when there is none.
    ``waited: false`` is added for a result sent with ``ran_without_verdict`` that the client did
    not wait for (docs/events-and-verdicts.md, "Late calls").
    """
    record = verdict.record
    decided = verdict.decided_by
    answer: dict[str, Any] = {"decision": verdict.verdict if verdict.verdict in DECISIONS else "allow",
                              "decided_by": dict(decided) if decided is not None else None,
                              "detector": decided.get("detector") if decided is not None else None,
                              "count": decided.get("count") if decided is not None else None,
                              "message": verdict.message, "timed_out": verdict.timed_out,
                              "on_timeout": on_timeout, "verdict": dict(record) if record is not None else None,
                              "event_id": verdict.event_id, "latency_ms": round(verdict.latency_s * 1000, 3)}
    if record is None and verdict.error is not None:
        answer["error"] = verdict.error
    if not verdict.waited:  # a result of a call run without its verdict: sent, not waited for
        answer["waited"] = False
    return answer
