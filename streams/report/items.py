"""What a run's timeline holds: a :class:`Call` per tool call, a :class:`Compaction` per compaction,
and a :class:`DetectionRow` per finding of a verdict (``decided_by``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .records import ABORT_DETECTOR, where

__all__ = ["DetectionRow", "Call", "Compaction"]


@dataclass
class DetectionRow:
    """One detection: what fired, what it led to, and where the call was recorded."""

    session_id: str
    run_id: str
    tool: str
    detector: str
    level: str
    action: str  # warn, suppressed, block, abort; would_* for a shadow finding; late: a block or abort the runner
    # did not wait for (the call ran: its result came back ran_without_verdict)
    count: int | None
    message: str
    source: dict[str, Any] | None
    event_id: str | None
    kind: str = "detection"  # what decided (streams.detection.decision.KINDS)
    enforced: bool = True  # False: a shadow finding
    rule: str | None = None  # the loopwatch rule's name or the fleet loop's signature

    def where(self, relative_to: str | None = None, basename: bool = False) -> str:
        return where(self.source, relative_to, basename)


@dataclass
class Call:
    """A tool call on a run's timeline."""

    event_id: str | None
    tool_call_id: str | None
    tool: str
    status: str  # one of STATUSES
    verdict: str
    detection: dict[str, Any] | None  # the engine's detection when stuck, else None
    source: dict[str, Any] | None
    abort: dict[str, Any] | None = None  # the finding that aborted the run (decided_by), when the call aborted
    # or was refused (kind run_end: its run had ended)
    ts: float | None = None  # event time, epoch ms (None: the record had none)
    turn: str | None = None  # the model turn that asked for it, when the record carries usage (.usage)

    kind = "call"

    @property
    def count(self) -> int | None:
        if self.abort is not None and self.status in ("abort", "refused"):
            return self.abort.get("count")
        return self.detection.get("count") if self.detection else None

    @property
    def message(self) -> str:
        if self.abort is not None and self.status in ("abort", "refused"):
            return str(self.abort.get("message") or "")
        return str(self.detection.get("message") or "") if self.detection else ""

    @property
    def label(self) -> str:
        """``block generic_repeat/critical`` style: the status and, if any, what fired."""
        if self.status == "refused":
            return f"refused (run ended by {(self.abort or {}).get('detector')})"
        if self.status == "abort" and self.abort is None and self.detection:  # 2026.9.6's terminal block
            return f"abort {self.detection.get('detector')}/{self.detection.get('level')}"
        if self.status == "abort":
            return f"abort {(self.abort or {}).get('detector') or ABORT_DETECTOR}/critical"
        if self.detection:
            return f"{self.status} {self.detection.get('detector')}/{self.detection.get('level')}"
        return self.status


@dataclass
class Compaction:
    """A compaction followed by a retry (arms the post-compaction guard)."""

    event_id: str | None
    source: dict[str, Any] | None

    kind = "compaction"


