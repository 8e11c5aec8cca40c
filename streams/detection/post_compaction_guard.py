"""The post-compaction guard (docs/detection-rules.md §7).

One guard per run. A compaction followed by a retry arms it for
``windowSize`` tool outcomes; if every one of them is the same
``(tool, args hash, result hash)`` triple, the run is aborted with
``compaction_loop_persisted``. The guard state lives in
:class:`~streams.detection.state.RunState`; these functions change it.
"""

from __future__ import annotations

from typing import Any

from .state import RunState

__all__ = ["COMPACTION_LOOP_PERSISTED", "arm", "observe", "guard_status", "abort_message"]

COMPACTION_LOOP_PERSISTED = "compaction_loop_persisted"

_MAX_SAFE = 2 ** 53


def abort_message(tool: str, count: int, window_size: int) -> str:
    """The abort message, verbatim (docs/detection-rules.md §5.3)."""
    return (f"CRITICAL: tool {tool} repeated {count} times with identical arguments and identical results "
            f"within {window_size} attempts after auto-compaction. The compaction did not break the loop. "
            "Aborting to prevent runaway resource use.")


def arm(run: RunState) -> None:
    """A successful compaction followed by a retry: watch the next ``window_size`` outcomes.

    Re-arming while armed restarts the window. A disabled guard stays unarmed.
    """
    if run.guard_enabled:
        run.remaining = run.window_size
        run.window = []


def guard_status(run: RunState) -> dict[str, Any]:
    """The ``guard`` field of a verdict for an event the guard did not observe."""
    armed = run.guard_enabled and run.remaining > 0
    return {"enabled": run.guard_enabled, "armed": armed, "observed": False,
            "remaining": run.remaining if armed else 0, "abort": False}


def observe(run: RunState, tool: str, args_hash: str, result_hash: str, ref: Any = None) -> dict[str, Any]:
    """Feed one recorded outcome to the guard and return the verdict's ``guard`` field.

    Sets ``run.aborted`` when all ``window_size`` observations since arming are
    the same triple (docs/detection-rules.md §7). The field then also carries ``detector``,
    ``count``, ``tool_name`` and ``message``.
    """
    if not run.guard_enabled or run.remaining <= 0:
        return guard_status(run)
    # a window beyond 2^53 counts down in double arithmetic, as in JavaScript (docs/detection-rules.md §2.2)
    run.remaining = run.remaining - 1 if run.remaining <= _MAX_SAFE else int(float(run.remaining) - 1)
    observation = (tool, args_hash, result_hash, ref)
    run.window.append(observation)
    count = sum(1 for entry in run.window if entry[:3] == observation[:3])
    status: dict[str, Any] = {"enabled": True, "armed": True, "observed": True,
                              "remaining": run.remaining, "abort": False}
    if count >= run.window_size:
        run.aborted = True
        status.update(abort=True, detector=COMPACTION_LOOP_PERSISTED, count=count, tool_name=tool,
                      message=abort_message(tool, count, run.window_size))
    return status


def abort_evidence(run: RunState, tool: str, args_hash: str, result_hash: str) -> list[Any]:
    """The refs of the window observations behind an abort, oldest first."""
    return [entry[3] for entry in run.window
            if entry[:3] == (tool, args_hash, result_hash) and entry[3] is not None]
