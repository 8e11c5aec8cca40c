"""Backtesting: the same events under two configurations, side by side.

:func:`compare` takes the verdict records of one event stream replayed under
configuration A and under configuration B (same events, same order, so record *i*
of A and record *i* of B answer the same event) and keeps both reports plus:

* ``differences``: every event whose ``verdict`` differs -- what the runner acts on
  (``allow``, ``warn``, ``block``, ``abort``, ``ignore``);
* ``detection_differences``: every tool call with the same verdict under both but a
  different detection (detector, level, or what it led to): a warning suppressed by
  OpenClaw's dedupe under A and no detection under B are both ``allow``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from streams.detection.decision import findings
from streams.detection.fleet import FleetSettings

from .model import Report, build_report, call_status, file_position, where

__all__ = ["Difference", "Comparison", "compare", "outcome_label"]


def outcome_label(record: Mapping[str, Any]) -> str:
    """What one event led to, verdict first, from its ``decided_by``: ``allow``, ``allow, suppressed
    ping_pong/warning 3``, ``block generic_repeat/critical 5``, ``abort compaction_loop_persisted/critical 3``,
    for 2026.9.6's terminal block ``abort generic_repeat/critical 21 (run stopped)``, or for a verdict a
    loopwatch rule decided ``abort escalation/critical 3 (escalation)``."""
    verdict = str(record.get("verdict"))
    enforced = [f for f in findings(record) if f["enforced"]]
    if not enforced:
        return verdict
    top = enforced[0]
    what = f"{top['detector']}/{top['level']} {'' if top['count'] is None else top['count']}".rstrip()
    if top["rule"] is not None:
        what += f" ({top['rule']})"
    if top.get("recovery") == "terminal":
        what += " (run stopped)"
    return f"{verdict} {what}" if top["action"] == verdict else f"{verdict}, {top['action']} {what}"


def _detection(record: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What fired on a tool call and what it led to (the count aside), or None."""
    detection = record.get("detection") or {}
    if record.get("type") != "tool_call" or not detection.get("stuck"):
        return None
    return detection.get("detector"), detection.get("level"), call_status(record)


@dataclass
class Difference:
    """One event with different outcomes under A and B."""

    event_id: str | None
    session_id: str | None
    run_id: str | None
    tool: str
    source: dict[str, Any] | None
    a: str
    b: str

    def where(self, relative_to: str | None = None) -> str:
        return where(self.source, relative_to)

    def ids(self) -> str:
        """``run R  event E`` (what is known of them)."""
        parts = [f"run {self.run_id}" if self.run_id else "no run id"]
        if self.event_id:
            parts.append(f"event {self.event_id}")
        return "  ".join(parts)


@dataclass
class Comparison:
    a: Report
    b: Report
    label_a: str
    label_b: str
    differences: list[Difference] = field(default_factory=list)  # the verdict differs
    detection_differences: list[Difference] = field(default_factory=list)  # same verdict, other detection

    def detection_rows(self) -> list[tuple[str, str, str, int, int]]:
        """``(detector, level, action, count under A, count under B)`` for every key seen in either."""
        keys = sorted(set(self.a.totals.detections) | set(self.b.totals.detections))
        return [(d, lvl, act, self.a.totals.detections[(d, lvl, act)], self.b.totals.detections[(d, lvl, act)])
                for d, lvl, act in keys]

    def total_rows(self) -> list[tuple[str, int, int]]:
        rows = []
        for name, attr in (("calls", "calls"), ("warnings emitted", "warnings_emitted"),
                           ("warnings suppressed", "warnings_suppressed"), ("blocks", "blocks"),
                           ("aborts", "aborts")):
            rows.append((name, getattr(self.a.totals, attr), getattr(self.b.totals, attr)))
        return rows


def compare(records_a: Sequence[Mapping[str, Any]], records_b: Sequence[Mapping[str, Any]],
            label_a: str = "A", label_b: str = "B", fleet: FleetSettings | None = None) -> Comparison:
    """Compare two replays of the same events (record *i* of each answers event *i*); ``fleet``: A's fleet
    view settings (:func:`~streams.report.model.build_report`)."""
    if len(records_a) != len(records_b):
        raise ValueError(f"not the same events: {len(records_a)} records under A, {len(records_b)} under B")
    comparison = Comparison(build_report(records_a, label_a, fleet=fleet), build_report(records_b, label_b),
                            label_a, label_b)
    for ra, rb in zip(records_a, records_b):
        if ra.get("event_id") != rb.get("event_id"):
            raise ValueError(f"not the same events: {ra.get('event_id')!r} vs {rb.get('event_id')!r}")
        if ra.get("type") == "compaction_retry":
            continue
        if ra.get("verdict") != rb.get("verdict"):
            found = comparison.differences
        elif _detection(ra) != _detection(rb):
            found = comparison.detection_differences
        else:
            continue
        found.append(Difference(
            ra.get("event_id"), ra.get("session_id"), ra.get("run_id"),
            str(ra.get("tool_name") or rb.get("tool_name") or "tool"),
            file_position(ra), outcome_label(ra), outcome_label(rb),
        ))
    return comparison
