"""Plain-text rendering of a :class:`~streams.report.model.Report` (and of a comparison).

Layout: a header line, then one block per session (runs, calls, detections by detector
and level, then each detection with its run, source line, tool, count and message), then
the fleet summary tables.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Iterable

from .compare import Comparison
from .model import Report, SessionReport, Totals

__all__ = ["render_text", "render_comparison_text", "table"]

_ACTIONS = ("warn", "suppressed", "block", "abort")
_NUMBER = re.compile(r"[+-]?\d*")


def table(header: list[str], rows: Iterable[list[object]], indent: str = "  ") -> list[str]:
    """Columns padded to their widest cell: numeric columns right-aligned, the others left-aligned."""
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    numeric = [len(cells) > 1 and all(_NUMBER.fullmatch(row[i]) for row in cells[1:])
               for i in range(len(header))]
    out = []
    for n, row in enumerate(cells):
        parts = [row[i].rjust(widths[i]) if numeric[i] else row[i].ljust(widths[i]) for i in range(len(row))]
        out.append(indent + "  ".join(parts).rstrip())
        if n == 0:
            out.append(indent + "  ".join("-" * w for w in widths))
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _action_summary(counter: Counter) -> str:
    return ", ".join(f"{counter[a]} {a}" for a in _ACTIONS if counter[a])


def _session_lines(session: SessionReport, relative_to: str | None) -> list[str]:
    t = session.totals
    out = [f"session {session.session_id}"]
    for path in session.files:
        out.append(f"  file: {_rel(path, relative_to)}")
    out.append(f"  {_plural(t.runs, 'run')}, {_plural(t.calls, 'call')}"
               + (f", {_plural(t.compactions, 'compaction')}" if t.compactions else ""))
    if not t.detections:
        out.append("  detections: none")
        return out
    # "Flagged" is what OpenClaw acts on; a suppressed warning is a detection it logs nowhere.
    flagged = t.warnings_emitted + t.blocks + t.aborts
    out.append(f"  detections: {t.detection_count} ({flagged} flagged: warned, blocked or aborted; "
               f"{t.warnings_suppressed} suppressed by OpenClaw's warning dedupe)")
    for detector, level, actions in t.by_detector():
        out.append(f"    {detector:<26} {level:<9} {_action_summary(actions)}")
    for run in session.runs.values():
        if not run.detections:
            continue
        out.append(f"  run {run.run_id} ({_plural(len(run.calls), 'call')})")
        for row in run.detections:
            count = "" if row.count is None else f"count {row.count}"
            out.append(f"    {row.where(relative_to)}  {row.tool}  {row.detector} {row.level} "
                       f"{row.action}  {count}".rstrip())
            if row.message:
                out.append(f"      {row.message}")
    return out


def _rel(path: str, base: str | None) -> str:
    if not base:
        return path
    rel = os.path.relpath(path, base)
    return path if rel.startswith("..") else rel


def _totals_lines(totals: Totals) -> list[str]:
    return table(
        ["sessions", "runs", "calls", "warnings emitted", "warnings suppressed", "blocks", "aborts"],
        [[totals.sessions, totals.runs, totals.calls, totals.warnings_emitted, totals.warnings_suppressed,
          totals.blocks, totals.aborts]],
    )


def _detector_lines(totals: Totals) -> list[str]:
    if not totals.detections:
        return ["  detections: none"]
    rows = [[detector, level] + [actions[a] for a in _ACTIONS] + [sum(actions.values())]
            for detector, level, actions in totals.by_detector()]
    rows.append(["total", ""] + [sum(r[2 + i] for r in rows) for i in range(len(_ACTIONS))]
                + [totals.detection_count])
    return table(["detector", "level", "warned", "suppressed", "blocked", "aborted", "total"], rows)


def _session_table(report: Report) -> list[str]:
    rows = []
    for session in report.sessions.values():
        t = session.totals
        name = session.files[0].rsplit("/", 1)[-1] if len(session.files) == 1 else session.session_id
        rows.append([name, t.runs, t.calls, t.warnings_emitted, t.warnings_suppressed, t.blocks, t.aborts])
    return table(["session", "runs", "calls", "warned", "suppressed", "blocks", "aborts"], rows)


def render_text(report: Report, relative_to: str | None = None) -> str:
    """The whole text report."""
    t = report.totals
    if relative_to is None:
        relative_to = report.base_dir()
    head = f"loopwatch report: {_plural(t.sessions, 'session')}, {_plural(t.runs, 'run')}, {_plural(t.calls, 'call')}"
    if report.config:
        head += f" (config: {report.config})"
    out = [head]
    if relative_to:
        out.append(f"paths relative to {relative_to}")
    if report.bad_records:
        out.append(f"{_plural(report.bad_records, 'bad record')} skipped")
    for session in report.sessions.values():
        out.append("")
        out.extend(_session_lines(session, relative_to))
    out += ["", "fleet summary"]
    out += _totals_lines(t)
    out += ["", "detections by detector"]
    out += _detector_lines(t)
    out += ["", "per session"]
    out += _session_table(report)
    return "\n".join(out) + "\n"


def render_comparison_text(comparison: Comparison, relative_to: str | None = None) -> str:
    """Backtest: totals and detection counts under A and B, then every event whose outcome differs."""
    a, b = comparison.label_a, comparison.label_b
    if relative_to is None:
        relative_to = comparison.a.base_dir()
    out = [f"backtest: A = {a}", f"          B = {b}", ""]
    out += table(["", "A", "B", "B-A"], [[name, va, vb, f"{vb - va:+d}"] for name, va, vb in comparison.total_rows()])
    out += ["", "detections (detector / level / action)"]
    rows = comparison.detection_rows()
    if rows:
        out += table(["detector", "level", "action", "A", "B", "B-A"],
                     [[d, lvl, act, na, nb, f"{nb - na:+d}"] for d, lvl, act, na, nb in rows])
    else:
        out.append("  none under either configuration")
    diffs = comparison.differences
    out += ["", f"events whose verdict differs: {len(diffs)}"]
    for diff in diffs:
        out.append(f"  {diff.where(relative_to)}  {diff.tool}")
        out.append(f"      A: {diff.a}")
        out.append(f"      B: {diff.b}")
    return "\n".join(out) + "\n"
