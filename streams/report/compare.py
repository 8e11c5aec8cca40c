"""Backtesting: the same events under two configurations, side by side.

:func:`compare` takes the verdict records of one event stream replayed under
configuration A and under configuration B (same events, same order, so record *i*
of A and record *i* of B answer the same event) and keeps both reports plus:

* ``differences``: every event whose ``verdict`` differs -- what the runner acts on
  (``allow``, ``warn``, ``block``, ``abort``, ``ignore``);
* ``detection_differences``: every tool call with the same verdict under both but a
  different detection (detector, level, or what it led to): a warning suppressed by
  OpenClaw's dedupe under A and no detection under B are both ``allow``;
* :meth:`Comparison.run_rows`: the same grouped by run (what each run's calls led to under A
  and B, with shadow findings and the fleet breaker's blocks), and :meth:`Comparison.total_rows`
  the totals with shadow and breaker findings beside them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from streams.detection.decision import findings
from streams.detection.fleet import FleetSettings

from .model import NO_RUN, NO_SESSION, Report, RunReport, build_report, call_status, file_position, where

__all__ = ["Difference", "Comparison", "compare", "outcome_label", "outcome_text", "OUTCOME_ORDER"]


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
        """``(name, under A, under B)``: the calls and what happened to them, then what shadow mode and the fleet
        breaker did or would have done (findings of ``decided_by``; rows that are 0 under both left out)."""
        rows = []
        for name, attr in (("calls", "calls"), ("warnings emitted", "warnings_emitted"),
                           ("warnings suppressed", "warnings_suppressed"), ("blocks", "blocks"),
                           ("aborts", "aborts"), ("refused (run ended)", "refused")):
            rows.append((name, getattr(self.a.totals, attr), getattr(self.b.totals, attr)))
        for name, test in _FINDING_ROWS:
            na, nb = (sum(n for key, n in t.decisions.items() if test(*key)) for t in (self.a.totals, self.b.totals))
            if na or nb:
                rows.append((name, na, nb))
        return [row for row in rows if row[0] in _ALWAYS or row[1] or row[2]]

    def run_rows(self) -> list[dict[str, Any]]:
        """The runs whose outcome differs under A and B, the most differing events first (then in input order).

        Each: ``{session, run, calls, a, b, differences}``; ``a`` and ``b`` count the run's calls by status
        (``warn``, ``suppressed``, ``block``, ``abort``, ``refused``) and its findings ``shadow`` (would_*,
        decided nothing) and ``breaker`` (the fleet breaker's blocks); ``differences``: its events whose
        verdict or detection differs."""
        differing: dict[tuple[Any, Any], int] = {}
        for diff in (*self.differences, *self.detection_differences):
            key = (str(diff.session_id or NO_SESSION), str(diff.run_id or NO_RUN))  # as the report keys them
            differing[key] = differing.get(key, 0) + 1
        rows = []
        for order, (session_id, run_a) in enumerate(_runs(self.a)):
            session_b = self.b.sessions.get(session_id)
            run_b = session_b.runs.get(run_a.run_id) if session_b else None
            a, b = _run_outcome(run_a), _run_outcome(run_b)
            n = differing.get((session_id, run_a.run_id), 0)
            if a != b or n:
                rows.append({"session": session_id, "run": run_a.run_id, "calls": len(run_a.calls), "a": a, "b": b,
                             "differences": n, "order": order})
        rows.sort(key=lambda r: (-r["differences"], r["order"]))
        return rows


# Findings counted beside the totals: (row name, test of a Totals.decisions key (kind, rule, action, enforced))
_FINDING_ROWS = (
    ("shadow findings (would have)", lambda kind, rule, action, enforced: not enforced and kind != "fleet"),
    ("fleet breaker blocks", lambda kind, rule, action, enforced: enforced and kind == "fleet"),
    ("fleet breaker would block", lambda kind, rule, action, enforced: not enforced and kind == "fleet"),
    ("perTool exemptions", lambda kind, rule, action, enforced: enforced and action == "allow"),
)
_ALWAYS = ("calls", "warnings emitted", "warnings suppressed", "blocks", "aborts")


def _runs(report: Report):
    for session_id, session in report.sessions.items():
        for run in session.runs.values():
            yield session_id, run


def _run_outcome(run: RunReport | None) -> Counter:
    """A run's calls by status (allow left out), its shadow findings and the fleet breaker's blocks."""
    out: Counter = Counter()
    if run is None:
        return out
    out.update(call.status for call in run.calls if call.status != "allow")
    for row in run.detections:
        if not row.enforced:
            out["shadow"] += 1
        elif row.kind == "fleet":
            out["breaker"] += 1
    return out


def outcome_text(counts: Counter) -> str:
    """``2 warn, 1 block, 3 shadow`` (``-`` for nothing) in :data:`OUTCOME_ORDER`."""
    return ", ".join(f"{counts[k]} {k}" for k in OUTCOME_ORDER if counts[k]) or "-"


OUTCOME_ORDER = ("warn", "suppressed", "block", "abort", "refused", "breaker", "shadow")


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
