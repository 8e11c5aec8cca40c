"""The decision record: what decided a verdict, in one field every consumer reads.

Pure (no I/O). :func:`decided_by` reads a verdict record and returns its
``decided_by`` field; :meth:`~streams.detection.engine.Engine.process` sets it
on every verdict, and the fleet breaker (:func:`streams.detection.fleet_breaker.decide`)
sets it again once it has added its part. Anything else that changes a verdict's
decision afterwards calls :func:`decided_by` again: the field is a function of the
record alone (docs/detection-rules.md §12.1).

Shape (``None`` when nothing fired: a plain ``allow``, ``ignore``, or a compaction)::

    {kind, action, detector, level, count, message, rule, enforced,
     [recovery], [late], [others: [<finding>, ...]]}

* ``kind``: what decided, one of :data:`KINDS`:
  ``detection`` (one of OpenClaw's detectors, ``tools.loopDetection``),
  ``guard`` (OpenClaw's post-compaction guard, ``compaction_loop_persisted``),
  ``policy`` (a loopwatch ``perTool`` rule changed the detection),
  ``escalation`` and ``budget`` (loopwatch's run rules),
  ``fleet`` (the fleet breaker) and ``run_end`` (the run had already ended);
* ``action``: what it led to: ``warn`` (warning emitted), ``suppressed`` (a
  deduplicated warning: the verdict stays ``allow``), ``block``, ``abort``, ``allow``
  (a ``perTool`` exemption: the rule let through a call OpenClaw's own thresholds
  flag; detector, level and count are OpenClaw's, ``rule`` the rule), or in
  shadow mode ``would_warn``, ``would_block``, ``would_abort``, ``would_allow``;
* ``detector``, ``level`` (``warning`` or ``critical``), ``count``, ``message``;
* ``rule``: the loopwatch rule's name (``escalation``, ``runBudget``,
  ``perTool[0] tool=exec``) or the fleet loop's signature; None for OpenClaw's own rules;
* ``enforced``: False for a shadow finding (``policies.shadow``, fleet breaker ``shadow``);
* ``recovery``: a 2026.9.6 block's ``tool_loop_recovery`` (``recovery`` or ``terminal``:
  a terminal block is an abort);
* ``late``: the verdict came after the runner had already run the call (``late: true``);
* ``others``: every other finding of the same verdict, same shape, strongest first:
  detections a stricter rule outranked (an escalation abort over a detection's
  block) and shadow findings. Absent when there are none, and for an event of
  an ended run (kind ``run_end``: nothing else about the refused call counts).

The primary finding is the strongest enforced one whose action is the verdict
(precedence: run end, fleet breaker, escalation and budget, the guard, a
detection), else the strongest enforced one (a suppressed warning), else the
strongest shadow one (a shadow finding on an ``allow``).

Loop events, ``loopwatch tail``, reports, the worker's metrics and the runners'
answers all read :func:`findings` (the primary finding and its ``others``) and
nothing else of the record to say what decided.
"""

from __future__ import annotations

from collections.abc import Mapping  # isinstance checks: typing.Mapping is slower
from typing import Any

__all__ = ["KINDS", "ACTIONS", "decided_by", "findings", "set_decided_by", "policy_kind", "correction"]

KINDS = ("detection", "guard", "policy", "escalation", "budget", "fleet", "run_end")
"""Every ``kind`` of a finding, in the order the docs list them."""

ACTIONS = ("warn", "suppressed", "block", "abort", "allow", "would_warn", "would_block", "would_abort", "would_allow")
"""Every ``action`` of a finding."""

_GUARD_DETECTOR = "compaction_loop_persisted"
# a finding's keys, for records of other producers that lack some (a hand-edited file)
_BLANK = {"kind": "unknown", "action": "unknown", "detector": None, "level": None, "count": None, "message": None,
          "rule": None, "enforced": True}
_STRICTNESS = {"allow": 0, "suppressed": 0, "warn": 1, "block": 2, "abort": 3}


def policy_kind(name: str) -> str:
    """The ``kind`` of a loopwatch policy decision by its rule name (``escalation``, ``runBudget``, ``perTool[<n>] ...``)."""
    if name == "escalation":
        return "escalation"
    if name == "runBudget":
        return "budget"
    return "policy"


def _finding(kind: str, action: str, detector: Any, level: Any, count: Any, message: Any, rule: Any = None,
             enforced: bool = True) -> dict[str, Any]:
    return {"kind": kind, "action": action, "detector": detector, "level": level, "count": count,
            "message": message, "rule": rule, "enforced": enforced}


def _detection_finding(verdict: Mapping[str, Any], detection: Mapping[str, Any]) -> dict[str, Any]:
    if verdict.get("blocked"):
        recovery = verdict.get("tool_loop_recovery")
        action = "abort" if recovery == "terminal" else "block"
    else:
        warning = verdict.get("warning")
        action = "warn" if warning and warning.get("emitted") else "suppressed"
    policy = verdict.get("policy")
    if policy and str(policy.get("name", "")).startswith("perTool"):
        found = _finding("policy", action, detection.get("detector"), detection.get("level"),
                         detection.get("count"), detection.get("message"), policy.get("name"))
    else:
        found = _finding("detection", action, detection.get("detector"), detection.get("level"),
                         detection.get("count"), detection.get("message"))
    if verdict.get("tool_loop_recovery") is not None:
        found["recovery"] = verdict["tool_loop_recovery"]
    if detection.get("liveness_signal") is not None:
        found["liveness_signal"] = detection["liveness_signal"]
    return found


def _exemption_finding(policy: Mapping[str, Any]) -> dict[str, Any]:
    """A ``perTool`` exemption: OpenClaw's thresholds flag the call, the rule's let it through (action allow)."""
    exempted = policy["exempted"]
    would = "blocked" if exempted.get("level") == "critical" else "warned"
    return _finding("policy", "allow", exempted.get("detector"), exempted.get("level"), exempted.get("count"),
                    f"{policy.get('name')}: allowed a call OpenClaw's own thresholds would have {would} "
                    f"({exempted.get('detector')} {exempted.get('level')}, count {exempted.get('count')})",
                    policy.get("name"))


def _all_findings(verdict: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every finding of ``verdict``, in precedence order (enforced and shadow mixed)."""
    out: list[dict[str, Any]] = []
    ended = verdict.get("run_ended")
    if isinstance(ended, Mapping):
        # message: the text for the model (says the run has ended, and why); reason: the ending rule's own
        out.append(_finding("run_end", "abort", ended.get("by"), "critical", None,
                            ended.get("message") or ended.get("reason")))
    fleet = verdict.get("fleet")
    detection = verdict.get("detection") or {}
    fleet_blocked = isinstance(fleet, Mapping) and bool(fleet.get("blocked"))
    if fleet_blocked:
        out.append(_finding("fleet", "block", detection.get("detector"), "critical", fleet.get("runs"),
                            detection.get("message") or fleet.get("reason"), fleet.get("signature")))
    policy = verdict.get("policy")
    if policy and not str(policy.get("name", "")).startswith("perTool"):
        out.append(_finding(policy_kind(policy["name"]), policy.get("verdict"), policy.get("detector"),
                            policy.get("level"), policy.get("count"), policy.get("message"), policy["name"]))
    guard = verdict.get("guard")
    if guard and guard.get("abort"):
        out.append(_finding("guard", "abort", guard.get("detector") or _GUARD_DETECTOR, "critical",
                            guard.get("count"), guard.get("message")))
    if detection.get("stuck") and not fleet_blocked:
        out.append(_detection_finding(verdict, detection))
    elif policy and isinstance(policy.get("exempted"), Mapping):  # a perTool rule let the call through
        out.append(_exemption_finding(policy))
    for entry in verdict.get("shadow") or ():
        out.append(_finding(policy_kind(str(entry.get("name"))), "would_" + str(entry.get("verdict")),
                            entry.get("detector"), entry.get("level"), entry.get("count"), entry.get("message"),
                            entry.get("name"), enforced=False))
    if isinstance(fleet, Mapping) and fleet.get("would_block"):
        out.append(_finding("fleet", "would_block", "fleet_loop", "critical", fleet.get("runs"),
                            fleet.get("reason"), fleet.get("signature"), enforced=False))
    return out


_DECIDING_FIELDS = frozenset({"policy", "shadow", "fleet", "run_ended"})  # any of them present: a finding


def _fired(verdict: Mapping[str, Any]) -> bool:
    """Whether anything may have decided ``verdict`` (False for the usual allow: a cheap test first)."""
    detection = verdict.get("detection")
    if detection and detection.get("stuck"):
        return True
    guard = verdict.get("guard")
    if guard and guard.get("abort"):
        return True
    return not verdict.keys().isdisjoint(_DECIDING_FIELDS)


def decided_by(verdict: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``decided_by`` field of a verdict record (see the module docstring); None when nothing fired.

    Reads only the record's own decision fields (``verdict``, ``detection``, ``warning``,
    ``blocked``, ``guard``, ``policy``, ``shadow``, ``fleet``, ``run_ended``,
    ``tool_loop_recovery``, ``late``); never raises for a record of another shape
    (missing fields read as absent).
    """
    return _decided_by(verdict) if _fired(verdict) else None


def _decided_by(verdict: Mapping[str, Any]) -> dict[str, Any] | None:
    """:func:`decided_by` of a verdict :func:`_fired` says something may have decided."""
    found = _all_findings(verdict)
    if not found:
        return None
    if found[0]["kind"] == "run_end":
        found = found[:1]  # a refused call of an ended run: what OpenClaw or a policy says of it decides nothing
    final = verdict.get("verdict")
    primary = next((f for f in found if f["enforced"] and f["action"] == final), None)
    if primary is None:
        primary = next((f for f in found if f["enforced"]), found[0])
    others = [f for f in found if f is not primary]
    out = dict(primary)
    if verdict.get("late") is True:
        out["late"] = True
    if others:
        others.sort(key=lambda f: (not f["enforced"], -_STRICTNESS.get(f["action"].removeprefix("would_"), 0)))
        out["others"] = others
    return out


def set_decided_by(verdict: dict[str, Any]) -> dict[str, Any]:
    """Set ``verdict["decided_by"]`` from the record (:func:`decided_by`); returns ``verdict``.

    The engine calls it for every event: the usual verdict, where nothing fired, costs one test.
    """
    verdict["decided_by"] = _decided_by(verdict) if _fired(verdict) else None
    return verdict


def findings(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The findings of a verdict record: its ``decided_by`` and that field's ``others`` (empty when none).

    A record without the field (one written before it existed) has it computed
    from the record. Each finding is returned without its ``others``.
    """
    top = record["decided_by"] if "decided_by" in record else decided_by(record)
    if not isinstance(top, Mapping):
        return []
    first = {**_BLANK, **{name: value for name, value in top.items() if name != "others"}}
    others = top.get("others")
    if not isinstance(others, list):
        return [first]
    return [first, *({**_BLANK, **other} for other in others if isinstance(other, Mapping))]


def correction(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The correction a late result publishes beside its findings, or None.

    A ``tool_result`` with ``ran_without_verdict`` whose call loopwatch had refused carries
    ``corrects: {event_id, tool_call_id, verdict, by}`` (:class:`~streams.detection.engine.Engine`):
    the runner ran the call without waiting for that ``block``/``abort``. Returned in a finding's
    shape (kind ``correction``, action ``ran``, ``detector``: what had refused it, ``corrects``,
    ``message``) so loop-event consumers read it as they read findings; it is no finding of
    ``decided_by``: nothing was decided, an earlier verdict did not take effect.
    """
    corrects = record.get("corrects")
    if not isinstance(corrects, Mapping):
        return None
    by = corrects.get("by")
    message = (f"the runner ran call {corrects.get('tool_call_id')} without waiting for its verdict: "
               f"its {corrects.get('verdict')}{f' ({by})' if by else ''} did not stop it")
    return {**_finding("correction", "ran", by, None, None, message), "corrects": dict(corrects)}
