"""Policies beyond OpenClaw: opt-in rules that run around OpenClaw's decision.

Exact parity is the default: with no ``policies`` section in the config file (or with every
policy off) the engine gives OpenClaw's verdicts, byte for byte. Each policy answers a problem
users of OpenClaw report (docs/policies.md has them):

* ``perTool`` (:mod:`.per_tool`) -- other thresholds for some tools, or a tool exempt from a detector;
* ``escalation``, ``runBudget`` (:mod:`.run_rules`) -- rules over a whole run: blocks that go on
  forever become an abort; a run that switches tools to evade the counts still spends one budget;
* ``normalizeResults`` (:mod:`.normalize`) -- nonces, timestamps and durations masked before an
  outcome is hashed, so identical outcomes hash identically.

A policy may only make a verdict stricter (``block``, ``abort``) or mark it. When one decides, the
verdict's ``verdict`` is the policy's and its ``policy`` field says which rule decided and why
(``name``, ``detector``, ``level``, ``count``, ``message``); OpenClaw's own fields (``decision``,
``detection``, ``blocked``, ...) stay what OpenClaw decided. In **shadow** mode (``policies.shadow``
for all, or ``shadow`` on one policy) a policy decides nothing and the verdict's ``shadow`` list
says what it would have done. Consumers read both through the verdict's ``decided_by``
(:mod:`streams.detection.decision`). ``normalizeResults`` has no shadow form: it changes the hashes
OpenClaw's rules see; backtest it with ``loopwatch report --compare``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..config import LoopDetectionSettings
from .config import PolicyConfig, parse_policies
from .normalize import normalize_event
from .per_tool import apply_rule, match_rule
from .run_rules import MAX_POLICY_RUNS, RunPolicyState, budget_verdict, escalation_verdict

__all__ = ["Policies", "PolicyConfig", "parse_policies", "RunPolicyState", "STRICTNESS"]

STRICTNESS = {"allow": 0, "warn": 1, "ignore": 1, "block": 2, "abort": 3}

Detect = Callable[[LoopDetectionSettings], Any]


class Policies:
    """The active policies of one config, applied by :class:`~streams.detection.engine.Engine`.

    Arguments:
        config: the parsed ``policies`` section (:func:`parse_policies`).
    """

    __slots__ = ("config",)

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config

    # ------------------------------------------------------------------ before the engine
    def prepare(self, event: Mapping[str, Any]) -> Mapping[str, Any]:
        """The event as the engine should hash it (``normalizeResults``)."""
        norm = self.config.normalize
        return normalize_event(event, norm) if norm is not None and not self.config.shadow else event

    # ------------------------------------------------------------- inside the engine's call
    def detect_for_tool(self, tool: str, settings: LoopDetectionSettings, detect: Detect,
                        ) -> tuple[Any, dict[str, Any] | None, dict[str, Any] | None]:
        """OpenClaw's detection of a call, with the ``perTool`` rule of ``tool`` if one matches.

        Arguments:
            tool: the normalised tool name.
            settings: the agent's settings.
            detect: runs the detectors with the given settings (read-only).
        Returns:
            ``(detection to decide with, policy mark, shadow entry)``; the mark (the rule decided:
            its detection differs from the plain one) or the shadow entry (the rule is in shadow
            mode and would have decided otherwise) is None when there is nothing to say. A rule
            under which nothing fires where OpenClaw's own thresholds fire (an exemption) says
            what it let through: ``exempted: {detector, level, count}``.
        """
        rule = match_rule(self.config.per_tool, tool)
        plain = detect(settings)
        if rule is None:
            return plain, None, None
        ruled = detect(apply_rule(settings, rule))
        if _detection_view(ruled) == _detection_view(plain):
            return plain, None, None
        entry = {"name": rule.name, **_detection_entry(ruled)}
        if ruled is None:  # an exemption: what OpenClaw's own thresholds made of the call
            entry["exempted"] = {"detector": plain.detector, "level": plain.level, "count": plain.count}
        if rule.shadow or self.config.shadow:
            return plain, None, entry
        return ruled, entry, None

    # ------------------------------------------------------------------- after the engine
    def decide(self, verdict: dict[str, Any], runs: dict[str, list], raw_run: str | None) -> dict[str, Any]:
        """Apply the run rules to OpenClaw's ``verdict`` (changed in place and returned).

        Arguments:
            verdict: the engine's verdict record for one event.
            runs: the state's per-run policy memory (``SessionState.policy_runs``), updated.
            raw_run: the event's raw run id (the run rules' identity, as the guard's, docs/detection-rules.md §7).
        """
        cfg = self.config
        if cfg.escalation is None and cfg.run_budget is None:
            return verdict
        key = raw_run or ""
        data = runs.get(key)
        pstate = RunPolicyState.from_list(data) if data is not None else RunPolicyState()
        pstate.observe(verdict, cfg.run_budget)
        decisions = []
        if cfg.escalation is not None:
            decisions.append((escalation_verdict(verdict, pstate, cfg.escalation), cfg.escalation.shadow))
        if cfg.run_budget is not None:
            decisions.append((budget_verdict(verdict, pstate, cfg.run_budget), cfg.run_budget.shadow))
        runs.pop(key, None)  # re-inserted last: the most recent run is evicted last
        runs[key] = pstate.to_list()
        if len(runs) > MAX_POLICY_RUNS:
            del runs[next(iter(runs))]
        for decision, shadow in decisions:
            if decision is None or STRICTNESS[decision["verdict"]] <= STRICTNESS.get(verdict["verdict"], 0):
                continue
            if shadow or cfg.shadow:
                verdict.setdefault("shadow", []).append(decision)
            elif "policy" not in verdict or STRICTNESS[decision["verdict"]] > STRICTNESS[verdict["verdict"]]:
                verdict["policy"] = decision
                verdict["verdict"] = decision["verdict"]
        return verdict


def _detection_view(detection: Any) -> tuple | None:
    return None if detection is None else (detection.level, detection.detector, detection.count)


def _detection_entry(detection: Any) -> dict[str, Any]:
    """A policy mark or shadow entry from a detection (None: the rule would let the call through)."""
    if detection is None:
        return {"detector": None, "level": None, "verdict": "allow", "count": None, "message": None}
    return {"detector": detection.detector, "level": detection.level,
            "verdict": "block" if detection.level == "critical" else "warn",
            "count": detection.count, "message": detection.message}


def build(raw: Mapping[str, Any]) -> Policies | None:
    """The active policies of a parsed config file, or None when none is on (lenient: bad parts off)."""
    issues: list[tuple[str, str]] = []
    config = parse_policies(raw, issues)
    return Policies(config) if config.active else None
