"""Fleet loops in a report: the ``fleet_loop`` records grouped by signature, with counts that follow the loop.

A ``fleet_loop`` record (:func:`streams.detection.fleet.fleet_loop_record`) is published the moment
its window reaches ``minRuns`` distinct runs, and carries the counts of that moment: a loop that
goes on in that window (more runs, more failing calls) is not in it. The report therefore counts
each published window again over every observation of its signature in the window
(:class:`Observations`, the same :func:`~streams.detection.fleet.observation` the worker and
replay make), so the runs, agents, events and last time it shows follow the loop to the end of the
window, whatever the record said when it was published. Without observations (a caller that has
the records only) the records' own counts are shown.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["Observations", "fleet_signatures"]


class Observations:
    """Every fleet observation of a report's records, per signature: ``(ts ms, run, agent)`` each.

    Memory: three fields per failing call (thrown errors, unknown tools, critical detections; every
    recorded outcome with ``count: "all"``).
    """

    def __init__(self) -> None:
        self.by_signature: dict[str, list[tuple[float, str, Any]]] = {}

    def add(self, obs: Mapping[str, Any]) -> None:
        self.by_signature.setdefault(obs["sig"], []).append((obs["ts"], obs["run"], obs["agent"]))

    def in_window(self, signature: str, start_ms: float, end_ms: float) -> list[tuple[float, str, Any]]:
        """The observations of ``signature`` with ``start_ms <= ts < end_ms``."""
        return [o for o in self.by_signature.get(signature, ()) if start_ms <= o[0] < end_ms]


def fleet_signatures(loops: Iterable[Mapping[str, Any]], observations: Observations | None = None,
                     top: int | None = None) -> list[dict[str, Any]]:
    """The fleet loops grouped by signature, the most runs first, at most ``top``.

    Each: ``{signature, kind, tool, message (its first record's), windows (records: one per window
    length while the loop lasted), runs (distinct runs), agents, events (failing calls), first_seen,
    last_seen, examples (up to five runs)}``, counted over ``observations`` in the published windows
    when given (see the module docstring), else from the records (runs named by their examples, events
    as counted when each was published).
    """
    groups: dict[str, dict[str, Any]] = {}
    for loop in loops:
        group = groups.get(loop["signature"])
        if group is None:
            group = groups[loop["signature"]] = {
                "signature": loop["signature"], "kind": loop["kind"], "tool": loop["tool"],
                "message": loop["message"], "windows": 0, "run_ids": set(), "agent_ids": set(), "events": 0,
                "first_seen": loop["first_seen"], "last_seen": loop["last_seen"]}
        group["windows"] += 1
        seen = (observations.in_window(loop["signature"], loop["window"]["start"], loop["window"]["end"])
                if observations is not None else [])
        if seen:
            group["run_ids"].update(run for _, run, _ in seen)
            group["agent_ids"].update(str(agent) for _, _, agent in seen if agent is not None)
            group["events"] += len(seen)
            first, last = min(ts for ts, _, _ in seen), max(ts for ts, _, _ in seen)
        else:
            group["run_ids"].update(example["run"] for example in loop["examples"])
            group["events"] += loop["events"]
            first, last = loop["first_seen"], loop["last_seen"]
        group["agent_ids"].update(loop["agents"])
        group["first_seen"] = min(group["first_seen"], first)
        group["last_seen"] = max(group["last_seen"], last)
    out = []
    for group in groups.values():
        runs, agents = group.pop("run_ids"), group.pop("agent_ids")
        out.append({**group, "runs": len(runs), "agents": sorted(agents), "examples": sorted(runs)[:5]})
    out.sort(key=lambda g: (-g["runs"], -g["windows"], g["first_seen"], g["signature"]))
    return out if top is None else out[:top]
