"""``escalation`` and ``runBudget``: rules over a whole run, where OpenClaw looks at one call.

OpenClaw's block freezes the streak that caused it (docs/detection-rules.md §3: a blocked call leaves no trace), so a
model that keeps retrying is blocked forever and the global breaker never fires (openclaw#109435);
and every count is per tool and arguments, so switching tools starts from zero (#79252). Both
rules here watch the verdicts OpenClaw gives in one run (raw run id, as the guard, docs/detection-rules.md §7):

* **escalation** -- this many *consecutive* blocked tool calls (any tool) make the next verdict an
  ``abort``: the model is not changing course;
* **runBudget** -- the run may block at most ``blockedCalls`` distinct tool/args combinations and
  see at most ``noProgressOutcomes`` outcomes identical to the previous outcome of the same call;
  once spent, every later tool call of the run is blocked (or the run aborted), whichever tool.

They only read OpenClaw's verdicts and never change OpenClaw's state: with the rule on, OpenClaw's
own fields of every verdict stay what they would be without it.

Memory: per run a few counters, the distinct blocked calls up to the budget's limit, and the last
outcome of at most :data:`MAX_TRACKED_CALLS` calls (oldest dropped first); at most
:data:`MAX_POLICY_RUNS` runs per state (oldest dropped first), as the state keeps its runs.
"""

from __future__ import annotations

from typing import Any

from .config import Escalation, RunBudget

__all__ = ["RunPolicyState", "escalation_verdict", "budget_verdict", "MAX_TRACKED_CALLS", "MAX_POLICY_RUNS"]

MAX_TRACKED_CALLS = 256  # last outcomes remembered per run for the no-progress count
MAX_POLICY_RUNS = 64  # as streams.detection.state.MAX_RUNS


class RunPolicyState:
    """What the run rules remember of one run (serialisable as a list, :meth:`to_list`)."""

    __slots__ = ("consecutive_blocks", "blocked_calls", "no_progress", "last_results")

    def __init__(self, consecutive_blocks: int = 0, blocked_calls: list[str] | None = None,
                 no_progress: int = 0, last_results: dict[str, str] | None = None) -> None:
        self.consecutive_blocks = consecutive_blocks
        self.blocked_calls = blocked_calls if blocked_calls is not None else []
        self.no_progress = no_progress
        self.last_results = last_results if last_results is not None else {}

    def to_list(self) -> list[Any]:
        """msgpack-friendly form."""
        return [self.consecutive_blocks, self.blocked_calls, self.no_progress, self.last_results]

    @classmethod
    def from_list(cls, data: list[Any]) -> "RunPolicyState":
        """Inverse of :meth:`to_list`. Raises ValueError for anything else."""
        if not isinstance(data, list) or len(data) != 4:
            raise ValueError("not a run policy state")
        blocks, blocked, stalled, last = data
        return cls(int(blocks), [str(x) for x in blocked], int(stalled), {str(k): str(v) for k, v in last.items()})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunPolicyState) and self.to_list() == other.to_list()

    def observe(self, verdict: dict[str, Any], budget: RunBudget | None) -> None:
        """Count one OpenClaw verdict of the run (before any policy changed it)."""
        if verdict.get("type") == "tool_call":
            if verdict.get("blocked"):
                self.consecutive_blocks += 1
                limit = budget.blocked_calls if budget is not None else None
                call = verdict.get("args_hash")
                if limit and call not in self.blocked_calls and len(self.blocked_calls) < limit:
                    self.blocked_calls.append(call)
            else:
                self.consecutive_blocks = 0
        outcome = verdict.get("outcome") or {}
        if budget is not None and budget.no_progress_outcomes and outcome.get("recorded"):
            call, result = verdict.get("args_hash"), outcome.get("result_hash")
            if self.last_results.get(call) == result:
                self.no_progress += 1
            self.last_results.pop(call, None)  # re-inserted last: the newest call is the last evicted
            self.last_results[call] = result
            if len(self.last_results) > MAX_TRACKED_CALLS:
                del self.last_results[next(iter(self.last_results))]


def escalation_verdict(verdict: dict[str, Any], pstate: RunPolicyState, rule: Escalation) -> dict[str, Any] | None:
    """The escalation's decision for this verdict (an abort), or None when it does not fire."""
    if verdict.get("type") != "tool_call" or pstate.consecutive_blocks < rule.consecutive_blocks:
        return None
    count = pstate.consecutive_blocks
    return {
        "name": "escalation", "detector": "escalation", "level": "critical", "verdict": "abort", "count": count,
        "message": (f"CRITICAL: {count} consecutive tool calls in this run were blocked (the last: "
                    f"{verdict.get('tool_name')}, {(verdict.get('detection') or {}).get('detector')}); the agent "
                    f"is not changing course. Aborting the run to prevent runaway loops (loopwatch escalation "
                    f"policy: {rule.consecutive_blocks} consecutive blocks)."),
    }


def budget_verdict(verdict: dict[str, Any], pstate: RunPolicyState, rule: RunBudget) -> dict[str, Any] | None:
    """The run budget's decision for this verdict (block or abort), or None while the budget lasts."""
    spent = []
    if rule.blocked_calls and len(pstate.blocked_calls) >= rule.blocked_calls:
        spent.append(f"{len(pstate.blocked_calls)} distinct tool calls blocked (limit {rule.blocked_calls})")
    if rule.no_progress_outcomes and pstate.no_progress >= rule.no_progress_outcomes:
        spent.append(f"{pstate.no_progress} outcomes without progress (limit {rule.no_progress_outcomes})")
    if not spent:
        return None
    kind = verdict.get("type")
    if rule.action == "block" and kind != "tool_call":
        return None  # only a call can be blocked; the next one will be
    if kind == "compaction_retry":
        return None
    action = rule.action
    what = ("Session execution blocked" if action == "block" else "Aborting the run")
    return {
        "name": "runBudget", "detector": "run_budget", "level": "critical", "verdict": action,
        "count": max(len(pstate.blocked_calls), pstate.no_progress),
        "message": (f"CRITICAL: this run has spent its no-progress budget: {' and '.join(spent)}. Switching "
                    f"tools does not reset it. {what} to prevent runaway loops (loopwatch run budget policy)."),
    }
