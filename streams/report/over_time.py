"""Loops over time: tool calls and what happened to them, per bucket of event time.

:class:`OverTime` counts each tool call in the second of its event time (``event_ts``, epoch ms,
UTC) under its status (:data:`SERIES`: every call, then ``warn``, ``suppressed``, ``block``,
``abort``, ``refused``); :meth:`OverTime.buckets` groups the seconds into at most ``most``
buckets of a round size (:data:`STEPS_S`: 1, 5, 15 s, 1, 5, 15 min, 1 h, 6 h, 1 day, 1 week: the
smallest that fits), empty buckets included, for the HTML chart and the text sparklines. Calls
without an event time are not in it (the report counts them, ``Report.without_ts``).

Memory: one small counter per second that holds a call (at most one per call).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

__all__ = ["SERIES", "STEPS_S", "OverTime", "sparkline", "step_text", "utc"]

SERIES = ("calls", "warn", "suppressed", "block", "abort", "refused")
STEPS_S = (1, 5, 15, 60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400)
_SECOND_MS = 1000
_BARS = "▁▂▃▄▅▆▇█"


def utc(ms: float, with_date: bool = True, seconds: bool = False) -> str:
    """``2025-11-30 00:05`` (or ``00:05``; ``00:05:10`` with ``seconds``) for an epoch-ms time, UTC."""
    time = "%H:%M:%S" if seconds else "%H:%M"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime(f"%Y-%m-%d {time}" if with_date else time)


def step_text(step_s: int) -> str:
    """``5 s``, ``15 min``, ``6 h``, ``1 day``: a bucket size."""
    if step_s >= 86400:
        return f"{step_s // 86400} day"
    if step_s >= 3600:
        return f"{step_s // 3600} h"
    return f"{step_s // 60} min" if step_s >= 60 else f"{step_s} s"


class OverTime:
    """Tool calls per second of event time, by status."""

    def __init__(self) -> None:
        self.seconds: dict[int, Counter] = {}

    def add(self, ts: float, status: str) -> None:
        """Count one call at ``ts`` (epoch ms) with ``status`` (``allow`` counts in ``calls`` only)."""
        counts = self.seconds.setdefault(int(ts // _SECOND_MS), Counter())
        counts["calls"] += 1
        if status != "allow":
            counts[status] += 1

    def restatus(self, ts: float, old: str, new: str) -> None:
        """A call counted at ``ts`` with ``old`` has status ``new`` now."""
        counts = self.seconds.get(int(ts // _SECOND_MS))
        if counts is None:
            return
        if old != "allow" and counts[old] > 0:
            counts[old] -= 1
        if new != "allow":
            counts[new] += 1

    def __bool__(self) -> bool:
        return bool(self.seconds)

    def buckets(self, most: int = 48) -> tuple[int, list[tuple[int, Counter]]]:
        """``(bucket size in seconds, [(bucket start epoch ms, Counter(series -> calls)), ...])``, oldest
        first, at most ``most`` buckets (more only when even a week per bucket does not fit); empty when
        no call had an event time."""
        if not self.seconds:
            return STEPS_S[0], []
        first, last = min(self.seconds), max(self.seconds)
        step = next((s for s in STEPS_S if last // s - first // s < most), STEPS_S[-1])
        grouped: dict[int, Counter] = {}
        for second, counts in self.seconds.items():
            grouped.setdefault(second // step, Counter()).update(counts)
        return step, [(b * step * 1000, grouped.get(b, Counter())) for b in range(first // step, last // step + 1)]


def sparkline(values: list[int]) -> str:
    """One character per value, ``▁`` (0 is a space) to ``█`` (the largest)."""
    top = max(values, default=0)
    if top <= 0:
        return " " * len(values)
    return "".join(" " if v <= 0 else _BARS[min(len(_BARS) - 1, (v * len(_BARS) - 1) // top)] for v in values)
