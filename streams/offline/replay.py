"""Offline replay: events through the engine with no broker.

:class:`Replayer` feeds events to the engine with the same keying as the
worker (``run`` or ``session``, see :mod:`streams.wire.keys`) and turns each
verdict into the record the worker would publish (:func:`streams.wire.verdicts.verdict_record`); :class:`ReplaySummary`
counts what happened for the human summary.

Fleet loops (``options.fleet`` of the config, :mod:`streams.detection.fleet`)
are computed with the same code as the worker's, in event time: each verdict
is an observation for the :class:`~streams.detection.fleet.FleetCorrelator`,
whose ``fleet_loop`` records are kept in :attr:`Replayer.fleet_loops` and fed
to the fleet breaker at once (the worker learns of them a broker round trip
later, so a backtest may block a few calls the worker lets through).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping

from streams.detection import Engine, SessionState, SessionStore
from streams.detection.decision import findings
from streams.detection.fleet import FleetCorrelator, observation
from streams.detection.fleet_breaker import FleetBreaker, decide
from streams.wire.keys import partition_key
from streams.wire.verdicts import verdict_record

__all__ = ["Replayer", "ReplaySummary", "fleet_lines"]


@dataclass
class ReplaySummary:
    """Counts for the end-of-replay summary."""

    events: Counter = field(default_factory=Counter)
    verdicts: Counter = field(default_factory=Counter)
    detections: Counter = field(default_factory=Counter)  # (detector, level, action)
    policies: Counter = field(default_factory=Counter)  # (policy rule name, "decided" | "would")
    runs: set = field(default_factory=set)
    sessions: set = field(default_factory=set)
    bad: int = 0
    refused: int = 0  # events of an ended run (run_ended)
    late: int = 0  # results of calls run without a verdict (late)
    fleet_loops: list = field(default_factory=list)  # fleet_loop records, in publication order
    fleet_blocks: Counter = field(default_factory=Counter)  # "blocked" / "would_block" -> calls
    runners: dict = field(default_factory=dict)  # event's runner -> (events, {(session, run)}), when events have one

    def add(self, event: Mapping[str, Any], verdict: Mapping[str, Any]) -> None:
        self.events[event.get("type")] += 1
        self.verdicts[verdict["verdict"]] += 1
        run = (event.get("session_id"), event.get("run_id"))
        self.runs.add(run)
        runner = event.get("runner")
        if runner is not None:
            counts = self.runners.setdefault(runner, [0, set()])
            counts[0] += 1
            counts[1].add(run)
        self.sessions.add(event.get("session_key") or event.get("session_id"))
        self.refused += "run_ended" in verdict
        self.late += bool(verdict.get("late"))
        for finding in findings(verdict):
            if finding["kind"] == "run_end":
                continue  # counted in refused
            self.detections[(finding["detector"], finding["level"], finding["action"])] += 1
            if finding["kind"] in ("policy", "escalation", "budget"):
                self.policies[(finding["rule"], "decided" if finding["enforced"] else "would")] += 1
            elif finding["kind"] == "fleet":
                self.fleet_blocks["blocked" if finding["enforced"] else "would_block"] += 1

    def lines(self) -> list[str]:
        total = sum(self.events.values())
        by_type = ", ".join(f"{n} {t}" for t, n in sorted(self.events.items())) or "none"
        out = [
            f"events:     {total} ({by_type}); {self.bad} bad record(s) skipped",
            f"sessions:   {len(self.sessions)}, runs: {len(self.runs)}",
            "verdicts:   " + (", ".join(f"{n} {v}" for v, n in sorted(self.verdicts.items())) or "none"),
            f"blocks:     {self.verdicts['block']}, aborts: {self.verdicts['abort'] - self.refused}",
        ]
        if self.runners:
            out.insert(2, "runners:    " + ", ".join(f"{name} {n} event(s) {len(runs)} run(s)" for name, (n, runs)
                                                      in sorted(self.runners.items(), key=lambda kv: str(kv[0]))))
        if self.refused or self.late:
            out.append(f"run ended:  {self.refused} later event(s) refused; late: {self.late} call(s) run "
                       "without a verdict")
        if self.detections:
            out.append("detections (detector / level / action: count):")
            for (detector, level, action), n in sorted(self.detections.items()):
                out.append(f"  {detector:<26} {level:<9} {action:<10} {n}")
        else:
            out.append("detections: none")
        if self.policies:
            out.append("policies (rule / decided or would have, in shadow mode: verdicts):")
            for (name, how), n in sorted(self.policies.items()):
                out.append(f"  {name:<36} {how:<10} {n}")
        if self.fleet_loops or self.fleet_blocks:
            out.extend(fleet_lines(self.fleet_loops, self.fleet_blocks))
        return out


def fleet_lines(loops: list[Mapping[str, Any]], blocks: Mapping[str, int] | None = None, top: int = 10
                ) -> list[str]:
    """Fleet loops for a summary: how many, then the ``top`` with the most runs (one line each)."""
    signatures = {loop["signature"] for loop in loops}
    out = [f"fleet loops: {len(loops)} record(s), {len(signatures)} signature(s)"]
    if blocks:
        out[0] += "; fleet breaker: " + ", ".join(f"{n} {what.replace('_', ' ')}" for what, n in sorted(blocks.items()))
    for loop in sorted(loops, key=lambda item: (-item["runs"], item["first_seen"]))[:top]:
        agents = ",".join(loop["agents"][:3]) + ("..." if len(loop["agents"]) > 3 else "")
        out.append(f"  {loop['signature']:<34} runs {loop['runs']:>3}  events {loop['events']:>4}  "
                   f"agents {agents or '-'}  window {_iso(loop['window']['start'])}")
    return out


def _iso(ms: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


class Replayer:
    """Applies events to per-key states, as the worker would.

    Arguments:
        engine: the engine (with the config to replay under).
        key_by: ``session``: every state and guard in one
            :class:`~streams.detection.SessionStore`, found as OpenClaw finds
            them (docs/detection-rules.md §7, §8.1), so OpenClaw's exact verdicts; ``run``: one
            state per run key, guards inside it, as the worker keeps them
            (:mod:`streams.wire.keys` says when the two agree).
    """

    def __init__(self, engine: Engine, key_by: str = "session") -> None:
        self.engine = engine
        self.key_by = key_by
        self._sessions = SessionStore(engine)
        self._states: dict[str, SessionState] = {}
        self.summary = ReplaySummary()
        fleet = engine.config.fleet
        self.fleet = FleetCorrelator(fleet) if fleet.enabled else None
        self.breaker = FleetBreaker(fleet) if fleet.breaker != "off" else None
        self.fleet_loops = self.summary.fleet_loops
        self._observed = 0

    def apply(self, event: Mapping[str, Any], ref: Any = None) -> dict[str, Any]:
        """Apply one event; returns its verdict record.

        Raises :class:`~streams.detection.EventError` for an event that does not fit the schema.
        """
        key = partition_key(event, self.key_by)
        if self.key_by == "session":
            verdict = decide(self.breaker, event, lambda: self._sessions.process(event, ref),
                             lambda: self._sessions.state_for(event).history,
                             lambda: self.engine.run_end(event, None, self._sessions.guards))
        else:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = SessionState()
            verdict = decide(self.breaker, event, lambda: self.engine.process(event, state, ref),
                             lambda: state.history, lambda: self.engine.run_end(event, state))
        self.summary.add(event, verdict)
        record = verdict_record(verdict, event, key)
        if self.fleet is not None:
            self._observe(record, event.get("agent_id"))
        return record

    def _observe(self, record: Mapping[str, Any], agent_id: Any) -> None:
        obs = observation(record, self.fleet.settings, agent_id)
        if obs is None:
            return
        for loop in self.fleet.observe(obs):
            self.fleet_loops.append(loop)
            if self.breaker is not None:
                self.breaker.add(loop)
        self._observed += 1
        if self._observed % 4096 == 0:
            self.fleet.expire()

    def skip(self) -> None:
        """Count a record that could not be applied (reported by the caller)."""
        self.summary.bad += 1

