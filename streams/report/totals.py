"""Counts for a session or the fleet (:class:`Totals`): calls and what happened to them, detections by
detector, what decided (``decided_by``, shadow findings included), and calls by tool, agent and runner."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from .records import call_status

if TYPE_CHECKING:
    from .items import Call, DetectionRow

__all__ = ["Totals", "DIMENSIONS", "dimensions"]

# What calls are broken down by: (dimension, the record field naming it). Agent, model and runner only
# for records that carry them (verdict records copy them from the event, streams.wire.verdicts).
DIMENSIONS = (("tool", "tool_name"), ("agent", "agent_id"), ("model", "model"), ("runner", "runner"))


def dimensions(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``[(dimension, value), ...]`` of a record: always its tool (``tool`` when unnamed), then the others it names."""
    out = [("tool", str(record.get("tool_name") or "tool"))]
    out += [(dim, str(record[name])) for dim, name in DIMENSIONS[1:] if record.get(name) is not None]
    return out


@dataclass
class Totals:
    """Counts for a session or the fleet."""

    sessions: int = 0
    runs: int = 0
    calls: int = 0
    warnings_emitted: int = 0
    warnings_suppressed: int = 0
    blocks: int = 0
    aborts: int = 0
    compactions: int = 0
    refused: int = 0  # events of a run that had already ended (run_ended), not counted in aborts
    late: int = 0  # results of calls the runner ran without their verdict (late: true)
    # (detector, level, action) -> count
    detections: Counter = field(default_factory=Counter)
    # what decided: (kind, rule or "", action, enforced) -> findings (decided_by, shadow included)
    decisions: Counter = field(default_factory=Counter)
    # (dimension: tool, agent, model or runner; its value; status) -> tool calls (status: one of STATUSES,
    # or "refused" for a call of an ended run); agent, model and runner only for records that carry them
    by: Counter = field(default_factory=Counter)

    @property
    def detection_count(self) -> int:
        return sum(self.detections.values())

    def by_detector(self) -> list[tuple[str, str, Counter]]:
        """``(detector, level, Counter(action -> n))`` sorted by detector then level."""
        grouped: dict[tuple[str, str], Counter] = {}
        for (detector, level, action), n in self.detections.items():
            grouped.setdefault((detector, level), Counter())[action] += n
        return [(d, lvl, c) for (d, lvl), c in sorted(grouped.items())]

    def add_record(self, record: Mapping[str, Any], rows: list[DetectionRow]) -> None:
        kind = record.get("type")
        if kind == "tool_call":
            self.calls += 1
            if record.get("verdict") == "block":
                self.blocks += 1
            status = call_status(record)
            for key in dimensions(record):
                self.by[(*key, status)] += 1
            if status == "warn":
                self.warnings_emitted += 1
            elif status == "suppressed":
                self.warnings_suppressed += 1
        elif kind == "compaction_retry":
            self.compactions += 1
        if "run_ended" in record:
            self.refused += 1
        elif record.get("verdict") == "abort":
            self.aborts += 1
        if record.get("late"):
            self.late += 1
        for row in rows:
            self.detections[(row.detector, row.level, row.action)] += 1
            self.decisions[(row.kind, row.rule or "", row.action, row.enforced)] += 1

    def restatus(self, record: Mapping[str, Any], old: str | None, new: str) -> None:
        """A call's status changed from ``old`` to ``new`` after it was counted (an abort on its
        ``tool_result``): move it in the breakdowns (``record``: the result, which names the call's tool,
        agent, model and runner). ``old`` None: a call not seen before, counted once under ``new``."""
        for key in dimensions(record):
            if old is not None and self.by[(*key, old)] > 0:
                self.by[(*key, old)] -= 1
                if not self.by[(*key, old)]:
                    del self.by[(*key, old)]
            self.by[(*key, new)] += 1

    def ran_late(self, call: "Call", result: Mapping[str, Any], rows: list[DetectionRow]) -> None:
        """Count ``call`` (refused by its verdict, status ``block`` or ``abort``) as run: its ``result`` came
        back ``late`` (docs/events-and-verdicts.md, Late calls). Its findings that refused it (in
        ``rows``, the run's) count under action ``late`` instead; agent and runner are the result's."""
        if call.status == "refused":
            self.refused -= 1
        elif call.status == "abort":
            self.aborts -= 1
        else:
            self.blocks -= 1
        for dimension, value in dimensions({**result, "tool_name": call.tool}):
            if self.by[(dimension, value, call.status)] > 0:
                self.by[(dimension, value, call.status)] -= 1
                self.by[(dimension, value, "allow")] += 1
        for row in rows:
            if row.event_id == call.event_id and row.enforced and row.action in ("block", "abort"):
                self.detections[(row.detector, row.level, row.action)] -= 1
                self.detections[(row.detector, row.level, "late")] += 1
                self.decisions[(row.kind, row.rule or "", row.action, True)] -= 1
                self.decisions[(row.kind, row.rule or "", "late", True)] += 1
        for counter in (self.by, self.detections, self.decisions):
            for key in [key for key, n in counter.items() if n <= 0]:
                del counter[key]  # a table shows no action nothing took

    def breakdown(self, dimension: str = "tool") -> list[tuple[str, Counter]]:
        """``(tool, agent or runner, Counter(status -> calls))``, the most calls in loops first (then by calls);
        empty for an agent or runner no record named."""
        grouped: dict[str, Counter] = {}
        for (dim, value, status), n in self.by.items():
            if dim == dimension:
                grouped.setdefault(value, Counter())[status] += n
        return sorted(grouped.items(), key=lambda item: (-sum(n for st, n in item[1].items() if st != "allow"),
                                                         -sum(item[1].values()), item[0]))

    @property
    def wasted_calls(self) -> dict[str, int]:
        """Calls the loops cost: ``ran`` (run while a detector flagged them: warned or suppressed), ``blocked``
        (tried and blocked), ``refused`` (tried after their run had ended)."""
        counts: Counter = Counter()
        for (dim, _, status), n in self.by.items():
            if dim == "tool":
                counts[status] += n
        return {"ran": counts["warn"] + counts["suppressed"], "blocked": counts["block"] + counts["abort"],
                "refused": counts["refused"]}


