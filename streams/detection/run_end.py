"""A run that is over stays over: what ends a run, and the verdict of every later event of it.

OpenClaw ends a run in its own process (the post-compaction guard's abort, docs/detection-rules.md §7; in 2026.9.6 a
terminal block, ``run_terminated``). loopwatch answers runners that may go on calling tools after
they were told to stop (a hook answer a runner ignores, several calls of one model message), so it
keeps the end as state, in the run's :class:`~streams.detection.state.RunState` (the guard's
identity, :func:`~streams.detection.events.guard_key`, docs/detection-rules.md §7), and refuses every later event of
that run.

What ends a run (:func:`ending`), read from the verdict of the event, in this order:

* a loopwatch policy's abort (``policy.verdict == "abort"``: ``escalation``, ``runBudget`` with
  ``action: abort``; not in shadow mode): ``by`` is the policy's detector;
* the post-compaction guard's abort (``guard.abort``): ``by`` = ``compaction_loop_persisted``;
* a terminal block of the 2026.9.6 behaviour profile (``run_terminated: true``): ``by`` is the
  detection's detector.

Every later ``tool_call``, ``tool_result`` and ``compaction_retry`` of the run keeps OpenClaw's own
fields as OpenClaw computes them (so conformance is unchanged), and gets (:func:`refuse`):

* ``verdict: "abort"``;
* ``run_ended: {"by", "reason", "message"}``: what ended the run, that rule's own message, and the
  text for the model (:data:`RUN_ENDED_MESSAGE`), which integrations hand the model in place of
  ``block_reason``/``block_text`` (``streams.runners.verdict.Verdict.message`` does);
* ``evidence``: the reference of the event that ended the run, when it had one.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["RUN_ENDED_MESSAGE", "ending", "refuse", "run_ended_message"]

RUN_ENDED_MESSAGE = ("loopwatch: this run has already ended ({by}); every further tool call of it is refused. "
                     "Stop here and report to the user. Why it ended: {reason}")


def run_ended_message(by: str, reason: str | None) -> str:
    """The text a runner hands the model for an event of an ended run."""
    return RUN_ENDED_MESSAGE.format(by=by, reason=reason or "(no message)")


def ending(verdict: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """``(by, reason)`` when this verdict ends its run (see the module docstring), else None."""
    policy = verdict.get("policy")
    if policy and policy.get("verdict") == "abort" and verdict.get("verdict") == "abort":
        return str(policy.get("detector") or policy.get("name")), policy.get("message")
    guard = verdict.get("guard")
    if guard and guard.get("abort"):
        return str(guard.get("detector") or "compaction_loop_persisted"), guard.get("message")
    if verdict.get("run_terminated") is True:
        detection = verdict.get("detection") or {}
        return (str(detection.get("detector") or "run_terminated"),
                verdict.get("block_text") or verdict.get("block_reason"))
    return None


def refuse(verdict: dict[str, Any], ended: tuple[str, str | None, Any]) -> dict[str, Any]:
    """Turn the verdict of an event of an ended run into the refusal (changed in place and returned).

    Arguments:
        verdict: the engine's verdict (OpenClaw's fields and loopwatch's policies already in it).
        ended: the run's ``RunState.ended``: ``(by, reason, ref of the ending event)``.
    """
    by, reason, ref = ended
    verdict["verdict"] = "abort"
    verdict["run_ended"] = {"by": by, "reason": reason, "message": run_ended_message(by, reason)}
    if ref is not None:
        verdict["evidence"] = [ref]
    return verdict
