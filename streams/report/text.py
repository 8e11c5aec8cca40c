"""Plain-text rendering of a :class:`~streams.report.model.Report` (and of a comparison).

Strings from the recordings are shown cut and with invisible characters escaped (:mod:`.shown`).

Layout, summary first so that the top fits one screen whatever the fleet's size:
a header line; the fleet summary table; the fleet loops (the ``top`` with the most
runs); detections by detector; the sessions worst first (by aborts, blocks, emitted
warnings; the ``top`` of them); then one block per session for those ``top`` sessions
(runs, calls, detections by detector and level, then each detection with its source
line, tool, count and message: at most :data:`ROWS_PER_RUN` per run and
:data:`RUNS_PER_SESSION` runs, the rest counted).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Iterable

from .compare import Comparison, Difference, outcome_text
from .model import Report, SessionReport, Totals, plural
from .shown import MESSAGE_LIMIT, shown as visible
from .over_time import sparkline, step_text, utc
from .totals import DIMENSIONS

__all__ = ["render_text", "render_comparison_text", "table"]

# allow: a perTool exemption (the rule let through a call OpenClaw's thresholds flag); late: a block or abort
# the runner did not wait for (the call ran); shadow: every would_* action (not enforced)
_ACTIONS = ("warn", "suppressed", "block", "abort", "allow", "late", "shadow")
_HEADS = ("warned", "suppressed", "blocked", "aborted", "exempted", "ran late", "shadow")


def _count(actions: Counter, action: str) -> int:
    if action == "shadow":
        return sum(n for name, n in actions.items() if name.startswith("would_"))
    return actions[action]


TOP = 10  # sessions and fleet loops shown by default (report --top)
RUN_ROWS = 50  # runs listed in a backtest's by-run table
ROWS_PER_RUN = 10  # detection lines per run in a session block
RUNS_PER_SESSION = 5  # runs with detections listed per session block
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


def _action_summary(counter: Counter) -> str:
    return ", ".join(f"{_count(counter, a)} {a}" for a in _ACTIONS if _count(counter, a))


def _session_lines(session: SessionReport, relative_to: str | None) -> list[str]:
    t = session.totals
    out = [f"session {visible(session.session_id)}"]
    for path in session.files:
        out.append(f"  file: {visible(_rel(path, relative_to))}")
    out.append(f"  {plural(t.runs, 'run')}, {plural(t.calls, 'call')}"
               + (f", {plural(t.compactions, 'compaction')}" if t.compactions else ""))
    if not t.detections:
        out.append("  detections: none")
        return out
    # "Flagged" is what OpenClaw acts on; a suppressed warning is a detection it logs nowhere.
    flagged = t.warnings_emitted + t.blocks + t.aborts
    out.append(f"  detections: {t.detection_count} ({flagged} flagged: warned, blocked or aborted; "
               f"{t.warnings_suppressed} suppressed by OpenClaw's warning dedupe)")
    for detector, level, actions in t.by_detector():
        out.append(f"    {detector:<26} {level:<9} {_action_summary(actions)}")
    flagged = [run for run in session.runs.values() if run.detections]
    for run in flagged[:RUNS_PER_SESSION]:
        out.append(f"  run {visible(run.run_id)} ({plural(len(run.calls), 'call')})")
        for row in run.detections[:ROWS_PER_RUN]:
            count = "" if row.count is None else f"count {visible(row.count)}"
            out.append(f"    {visible(row.where(relative_to))}  {visible(row.tool)}  {row.detector} {row.level} "
                       f"{row.action}  {count}".rstrip())
            if row.message:
                out.append(f"      {visible(row.message, MESSAGE_LIMIT)}")
        if len(run.detections) > ROWS_PER_RUN:
            out.append(f"    ... {plural(len(run.detections) - ROWS_PER_RUN, 'more detection')} in this run")
    if len(flagged) > RUNS_PER_SESSION:
        out.append(f"  ... {plural(len(flagged) - RUNS_PER_SESSION, 'more run')} with detections")
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
    # the "exempted" and "ran late" columns only when a perTool rule let a flagged call through, or a refusal
    # came after its runner had run the call
    shown = [(a, h) for a, h in zip(_ACTIONS, _HEADS)
             if a not in ("allow", "late") or any(action == a for _, _, action in totals.detections)]
    rows = [[detector, level] + [_count(actions, a) for a, _ in shown] + [sum(actions.values())]
            for detector, level, actions in totals.by_detector()]
    rows.append(["total", ""] + [sum(r[2 + i] for r in rows) for i in range(len(shown))]
                + [totals.detection_count])
    return table(["detector", "level", *(h for _, h in shown), "total"], rows)


def _decision_lines(totals: Totals) -> list[str]:
    """Findings by kind and rule: enforced actions, and shadow ones (would_*), side by side."""
    if not totals.decisions:
        return ["  nothing decided but OpenClaw's plain allow"]
    grouped: dict[tuple[str, str], tuple[Counter, Counter]] = {}
    for (kind, rule, action, enforced), n in totals.decisions.items():
        grouped.setdefault((kind, rule), (Counter(), Counter()))[0 if enforced else 1][action] += n

    def summary(counter: Counter) -> str:
        return ", ".join(f"{n} {action}" for action, n in sorted(counter.items())) or "-"

    rows = [[kind, rule or "-", summary(enforced), summary(shadow)]
            for (kind, rule), (enforced, shadow) in sorted(grouped.items())]
    return table(["kind", "rule", "enforced", "shadow"], rows)


def _tool_lines(report: Report, top: int | None) -> list[str]:
    """Calls the loops cost and their tokens (where the input has usage), then per tool, agent, model and
    runner: calls and what happened to them."""
    totals = report.totals
    wasted = totals.wasted_calls
    out = [f"  {plural(wasted['ran'], 'call')} ran while a detector flagged them (warned or suppressed);",
           f"  {wasted['blocked']} tried and blocked or aborted; {wasted['refused']} tried after their run had ended"]
    cost = report.usage.estimate()
    if cost["turns"]:
        share = f" ({100 * cost['wasted'] / cost['tokens']:.1f} % of {cost['tokens']:,})" if cost["tokens"] else ""
        out.append(f"  tokens spent on them: ~{cost['wasted']:,}{share}: {cost['wasted_output']:,} written, "
                   f"{cost['wasted_input']:,} read ({cost['wasted_cached']:,} from the prompt cache); each call an "
                   "equal share of its model turn's usage"
                   + (f"; {cost['wasted_without_usage']:,} wasted call(s) carry no usage"
                      if cost["wasted_without_usage"] else ""))
    else:
        out.append("  tokens: the input carries no usage (Claude Code and Codex sessions do)")
    statuses = ("warn", "suppressed", "block", "abort", "refused")
    for dimension, _ in DIMENSIONS:
        groups = totals.breakdown(dimension)
        if not groups:
            continue  # no record named an agent (or a runner)
        shown = groups if top is None else groups[:top]
        if dimension != "tool":
            out.append(f"  by {dimension}:")
        out += table([dimension, "calls", "warned", "suppressed", "blocked", "aborted", "refused"],
                     [[visible(name), sum(counts.values())] + [counts[st] for st in statuses]
                      for name, counts in shown])
        if len(shown) < len(groups):
            out.append(f"  ... {plural(len(groups) - len(shown), 'more ' + dimension)}")
    return out


def _over_time_lines(report: Report) -> list[str]:
    """Loops over time as sparklines, one column per bucket of event time (at most 48)."""
    step, buckets = report.over_time.buckets()
    if not buckets:
        return ["loops over time: no call has an event time (ts)"]
    secs = step < 60
    end = buckets[-1][0] + step * 1000
    start = utc(buckets[0][0], seconds=secs)
    out = [f"loops over time (UTC {start} to {utc(end, with_date=utc(end)[:10] != start[:10], seconds=secs)}"
           f", one column per {step_text(step)})"]
    rows = [("calls", ("calls",)), ("in loops", ("warn", "suppressed", "block", "abort", "refused")),
            ("blocked", ("block",)), ("aborted", ("abort",))]
    if any(counts["refused"] for _, counts in buckets):  # calls of runs that had ended
        rows.append(("refused", ("refused",)))
    for name, series in rows:
        values = [sum(counts[k] for k in series) for _, counts in buckets]
        peak = max(values)
        at = buckets[values.index(peak)][0]
        out.append(f"  {name:<9} {sparkline(values)}  " + (f"peak {peak:,} at {utc(at, with_date=False, seconds=secs)}" if peak else "none"))
    if report.without_ts:
        out.append(f"  ({plural(report.without_ts, 'record')} without an event time not in it)")
    return out


def _session_table(report: Report, sessions: list[SessionReport]) -> list[str]:
    rows = []
    names = report.session_names()
    for session in sessions:
        t = session.totals
        rows.append([visible(names[session.session_id]), t.runs, t.calls, t.warnings_emitted, t.warnings_suppressed,
                     t.blocks, t.aborts])
    return table(["session", "runs", "calls", "warned", "suppressed", "blocks", "aborts"], rows)


def _fleet_lines(report: Report, top: int | None) -> list[str]:
    from datetime import datetime, timezone

    def minute(ms: float) -> str:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M")

    loops = report.fleet_loops
    if not loops:
        return ["fleet loops: none (no failing call seen in enough runs within a window)"]
    groups = report.fleet_signatures()
    shown = groups if top is None else groups[:top]
    out = [f"fleet loops: {len(groups)} signature(s) in {plural(len(loops), 'window')} (the same failing call in "
           "many runs within a window)" + (f"; the {len(shown)} with the most runs" if len(shown) < len(groups) else "")]
    rows = []
    for group in shown:
        agents = ",".join(visible(agent) for agent in group["agents"][:3]) + (",..." if len(group["agents"]) > 3 else "")
        rows.append([visible(group["signature"]), group["runs"], group["windows"], group["events"], agents or "-",
                     minute(group["first_seen"]), minute(group["last_seen"])])
    out += table(["signature", "runs", "windows", "events", "agents", "first seen (UTC)", "last seen"], rows)
    out.append(f"  {visible(shown[0]['message'], MESSAGE_LIMIT)}")
    return out


def render_text(report: Report, relative_to: str | None = None, top: int | None = TOP) -> str:
    """The whole text report: the summary (one screen), then the ``top`` worst sessions (None: all)."""
    t = report.totals
    if relative_to is None:
        relative_to = report.base_dir()
    head = f"loopwatch report: {plural(t.sessions, 'session')}, {plural(t.runs, 'run')}, {plural(t.calls, 'call')}"
    if report.config:
        head += f" (config: {report.config})"
    out = [head]
    if relative_to:
        out.append(f"paths relative to {relative_to}")
    out += report.input_notes()
    out += ["", "fleet summary"]
    out += _totals_lines(t)
    if t.refused or t.late:
        out.append(f"  after their run ended: {plural(t.refused, 'event')} refused (run_ended); "
                   f"{plural(t.late, 'call')} the runner ran without a verdict (late)")
    out += [""] + _fleet_lines(report, top)
    out += ["", "detections by detector"]
    out += _detector_lines(t)
    out += ["", "what decided (decided_by: enforced, and what shadow mode and the fleet breaker's shadow would have done)"]
    out += _decision_lines(t)
    out += [""] + _over_time_lines(report)
    out += ["", "calls in loops, by tool, agent, model and runner (--top N each)"]
    out += _tool_lines(report, top)
    worst = report.worst_sessions()
    shown = worst if top is None else worst[:top]
    out += ["", "per session" + (f" (the {len(shown)} worst of {len(worst)}: by aborts, blocks, warnings emitted; "
                                 "--top N for more)" if len(shown) < len(worst) else "")]
    out += _session_table(report, shown)
    for session in shown:
        out.append("")
        out.extend(_session_lines(session, relative_to))
    return _visible("\n".join(out) + "\n")


def render_comparison_text(comparison: Comparison, relative_to: str | None = None) -> str:
    """Backtest: totals and detection counts under A and B, the events whose verdict differs, then the
    calls whose verdict is the same but whose detection differs (each with file:line, tool, run and event id)."""
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
    runs = comparison.run_rows()
    out += ["", f"runs whose outcome differs: {len(runs)} (calls by what happened to them, shadow findings, "
                "fleet breaker blocks; the most differing events first)"]
    if runs:
        shown = runs[:RUN_ROWS]
        out += table(["run", "session", "calls", "A", "B", "events that differ"],
                     [[visible(r["run"]), visible(r["session"]), r["calls"], outcome_text(r["a"]), outcome_text(r["b"]),
                       r["differences"]] for r in shown])
        if len(shown) < len(runs):
            out.append(f"  ... {plural(len(runs) - len(shown), 'more run')}")
    out += ["", f"events whose verdict differs: {len(comparison.differences)}"]
    out += _difference_lines(comparison.differences, relative_to)
    out += ["", f"calls with the same verdict but another detection: {len(comparison.detection_differences)}"
                " (detector, level, or warned / suppressed by OpenClaw's dedupe)"]
    out += _difference_lines(comparison.detection_differences, relative_to)
    return _visible("\n".join(out) + "\n")


def _visible(text: str) -> str:
    """The whole report with any invisible character left (in a config path, a note) escaped; the fields
    that come from recordings are cut and escaped where they are written (:mod:`streams.report.shown`)."""
    return visible(text, None, lines=True)


def _difference_lines(diffs: list[Difference], relative_to: str | None) -> list[str]:
    out = []
    for diff in diffs:
        out.append(f"  {visible(diff.where(relative_to))}  {visible(diff.tool)}  {visible(diff.ids())}")
        out.append(f"      A: {visible(diff.a, MESSAGE_LIMIT)}")
        out.append(f"      B: {visible(diff.b, MESSAGE_LIMIT)}")
    return out
