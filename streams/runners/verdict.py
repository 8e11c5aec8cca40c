"""What a runner gets back for one event: :class:`Verdict`.

The worker's verdict record, or the stand-in the client makes when none came in time (the
``on_timeout`` choice, :data:`TIMEOUT_VERDICTS`). Where the worker publishes it is
:func:`streams.wire.keys.verdict_partition`.

When no verdict comes: fail-open or fail-closed
-----------------------------------------------
A verdict that does not arrive within the timeout (worker down, lagging, or
broker unreachable) yields a :class:`Verdict` with ``timed_out=True`` and a
verdict chosen by ``on_timeout``. An event that cannot be published at all
(Kafka refuses it: larger than the producer's ``max_request_size`` or the
topic's ``max.message.bytes``, not authorised, ...; or Kafka is unreachable, or the
client's outbox is full) yields the same verdict at once, with ``timed_out=False`` and
``error`` saying why. Either way ``record`` is None and :attr:`Verdict.message` says what
happened and which way the client failed:

=====================================  ==========================  ==========================
event type                             ``on_timeout="allow"``       ``on_timeout="block"``
                                       (fail-open, the default)     (fail-closed)
=====================================  ==========================  ==========================
``tool_call``                          ``allow``                   ``block``
``tool_result``, ``compaction_retry``  ``allow``                   ``abort``
=====================================  ==========================  ==========================

A ``tool_result`` sent with ``ran_without_verdict: true`` (its call ran without a verdict,
:mod:`streams.runners.late`) is not waited for: ``allow``, ``waited`` False, at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from streams.detection.decision import decided_by as _decided_by

__all__ = ["Verdict", "TIMEOUT_VERDICTS"]

# What a runner is told when no verdict comes, per on_timeout choice and event type.
TIMEOUT_VERDICTS = {
    "allow": {"tool_call": "allow", "tool_result": "allow", "compaction_retry": "allow"},
    "block": {"tool_call": "block", "tool_result": "abort", "compaction_retry": "abort"},
}


@dataclass(frozen=True, slots=True)
class Verdict:
    """The worker's verdict on one event, or the stand-in for one that did not come.

    Attributes:
        event_id: the event's ``event_id`` (assigned by the client when absent).
        verdict: ``allow``, ``warn``, ``block``, ``abort`` or ``ignore`` (what the
            runner should do); on a timeout or a failed send, the ``on_timeout``
            choice (see the module docstring).
        record: the full verdict record as published by the worker (see
            :mod:`streams.worker.processor`: ``decision``, ``detection``, ``warning``,
            ``guard``, ``evidence``, ...); ``None`` on a timeout or a failed send.
        timed_out: True when no verdict arrived within the timeout.
        latency_s: seconds from just before the event was sent to the verdict's
            arrival (or to the timeout, or the send failure).
        error: why the event could not be published (e.g. ``"the event is
            1,500,265 bytes as a Kafka record, over the producer's
            max_request_size ..."``); None when it was (``timed_out`` then says
            whether its verdict came).
        waited: False for a ``tool_result`` sent with ``ran_without_verdict`` (its call ran without a
            verdict, after one timeout already): the client sent it and did not wait; ``verdict`` is
            ``allow`` and ``record`` None.
    """

    event_id: str
    verdict: str
    record: Mapping[str, Any] | None
    timed_out: bool = False
    latency_s: float = 0.0
    error: str | None = None
    waited: bool = True

    @property
    def allowed(self) -> bool:
        """True when the runner may go on: ``allow``, ``warn`` or ``ignore``."""
        return self.verdict in ("allow", "warn", "ignore")

    @property
    def run_ended(self) -> Mapping[str, Any] | None:
        """``{by, reason, message}`` when the event belongs to a run that had already ended, else None.

        The runner must refuse the call (and stop the run as firmly as it can): the run is over.
        """
        ended = (self.record or {}).get("run_ended")
        return ended if ended else None

    @property
    def late(self) -> bool:
        """True for a verdict that applied a call the runner ran without waiting for its verdict.

        The worker's record says ``late: true`` (a result sent with ``ran_without_verdict``); a
        result the client sent that way and did not wait for (:attr:`waited` False) is late too.
        """
        return bool((self.record or {}).get("late")) or not self.waited

    @property
    def detection(self) -> Mapping[str, Any] | None:
        """The detection (``detector``, ``level``, ``count``, ``message``) when one fired, else None."""
        detection = (self.record or {}).get("detection")
        return detection if detection and detection.get("stuck") else None

    @property
    def message(self) -> str | None:
        """What to tell the model: the block text (else reason), abort message or emitted warning (its note
        under 2026.9.6); else None.

        For a verdict that is not the worker's (``timed_out`` or ``error``), what
        happened and how the client failed, whatever the verdict, e.g.
        ``"loopwatch: no verdict within 0.5 s (the loopwatch worker is down or
        lagging, or Kafka is unreachable); failing closed (on_timeout='block'):
        the tool call is blocked"``.
        """
        if self.record is None and (self.timed_out or self.error is not None):
            return self._fallback_message()
        if not self.waited:
            return ("loopwatch: this call ran without a verdict (its check timed out and the runner failed open); "
                    "its result is reported with ran_without_verdict and not waited for")
        record = self.record or {}
        decided = self.decided_by
        if self.verdict not in ("warn", "block", "abort") or decided is None:
            return None
        if self.verdict == "warn":
            return self.note or decided.get("message")
        # the run had ended, or a loopwatch rule decided: its message (run_ended's says the run is over);
        # else the text OpenClaw hands the model (block_text, 2026.9.6: a terminal block is an abort)
        if decided.get("kind") in ("detection", "policy") and record.get("block_text"):
            return record["block_text"]
        return decided.get("message")

    @property
    def note(self) -> str | None:
        """The note 2026.9.6 appends to the tool result of a call whose warning it emitted, else None.

        Integrations append it to the tool's result (or give it as additional context).
        """
        return ((self.record or {}).get("warning") or {}).get("note")

    @property
    def decided_by(self) -> Mapping[str, Any] | None:
        """What decided a ``warn``, ``block`` or ``abort``: the record's ``decided_by`` field
        (:mod:`streams.detection.decision`: ``kind``, ``action``, ``detector``, ``level``, ``count``,
        ``message``, ``rule``, ``enforced``; computed from the record for a worker that predates the
        field): for an event of a run that had ended, kind ``run_end``; for 2026.9.6's terminal block,
        the detection with ``recovery: "terminal"``. None for other verdicts, a verdict that is not the
        worker's (timeout, send error), or a shadow-only finding (nothing enforced: the runner goes on).
        """
        record = self.record
        if self.verdict not in ("warn", "block", "abort") or not record:
            return None
        decided = record["decided_by"] if "decided_by" in record else _decided_by(record)
        if not isinstance(decided, Mapping) or decided.get("enforced") is False:
            return None
        return decided

    def _fallback_message(self) -> str:
        if self.error is not None:
            what = f"loopwatch: the event could not be sent ({self.error})"
        else:
            what = (f"loopwatch: no verdict within {round(self.latency_s, 1):g} s (the loopwatch worker is "
                    "down or lagging, or Kafka is unreachable)")
        if self.verdict == "block":
            return f"{what}; failing closed (on_timeout='block'): the tool call is blocked"
        if self.verdict == "abort":
            return f"{what}; failing closed (on_timeout='block'): the run is stopped"
        return f"{what}; failing open (on_timeout='allow'): going on without a loop check"
