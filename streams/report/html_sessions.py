"""The HTML report's timelines: per session, a row per run with one square per tool call.

A square's colour says what happened to the call (:data:`STATUS_TEXT`: ``allow``, a
``suppressed`` warning, an emitted ``warn``, ``block``, ``abort``, or ``refused``: a call of a run
that had already ended); a blue bar marks a compaction. Hovering a square shows the tool,
verdict, detector, count, message and source line (also in its ``data-tip``). A session with
many runs shows its runs with detections and folds the others away, at most :data:`RUNS_DRAWN`
drawn; a stretch of more than :data:`ALLOWED_RUN` allowed calls in a row is one grey ``gap``
marker saying how many. Each session ends with its detection table (run, source, tool,
detector, level, action, count, message).
"""

from __future__ import annotations

import os

from .items import Call, Compaction
from .model import RunReport, SessionReport
from .records import where
from .shown import MESSAGE_LIMIT, esc, shown

__all__ = ["STATUS_TEXT", "session_section", "legend"]

# A session with more runs than this shows its runs with detections and folds the others.
FOLD_RUNS_ABOVE = 12


# At most this many runs of a session get a timeline (runs with detections first); the rest are counted.
RUNS_DRAWN = 40


# Consecutive allowed calls beyond this many are drawn as one gap marker.
ALLOWED_RUN = 24


# A session's detection table starts folded when it has more rows than this.
FOLD_DETECTIONS_ABOVE = 25


STATUS_TEXT = {
    "allow": "allowed",
    "suppressed": "warning (suppressed by dedupe)",
    "warn": "warning emitted",
    "block": "blocked",
    "abort": "run aborted",
    "refused": "refused (its run had ended)",
}


def _short(run_id: str, keep: int = 22) -> str:
    return run_id if len(run_id) <= keep else "…" + run_id[-(keep - 1):]


def _line_only(source: dict | None) -> str:
    if not source:
        return "-"
    text = f"line {source.get('line', '?')}"
    return text + (f" step {source['step']}" if source.get("step") is not None else "")


def _position(row, single: bool, relative_to: str | None) -> str:
    """Where a detection's call was recorded: its line (its file is in the header), ``file:line``, or the event id."""
    if not row.source:
        return str(row.event_id or "-")
    return _line_only(row.source) if single else row.where(relative_to, basename=True)


def _rel(path: str, base: str | None) -> str:
    if not base:
        return path
    rel = os.path.relpath(path, base)
    return path if rel.startswith("..") else rel


def _call_tip(call: Call, relative_to: str | None) -> str:
    # Each part cut and escaped here (the tip keeps its newlines): esc(tip, None, lines=True) adds no cut.
    lines = [f"{shown(call.tool)} — {STATUS_TEXT[call.status]}"]
    if call.detection:
        lines.append(f"{shown(call.detection.get('detector'))} / {shown(call.detection.get('level'))}, "
                     f"count {shown(call.detection.get('count'))}")
    if call.status in ("abort", "refused") and call.abort:
        count = call.abort.get("count")
        lines.append(f"{shown(call.abort.get('detector'))} / {shown(call.abort.get('level'))}"
                     + ("" if count is None else f", count {shown(count)}"))
    message = call.message
    if message:
        lines.append(shown(message, MESSAGE_LIMIT))
    lines.append(shown(where(call.source, relative_to, basename=True)))
    return "\n".join(lines)


def _timeline(run: RunReport, relative_to: str | None) -> str:
    parts = []
    items = run.items
    index = 0
    while index < len(items):
        # a long stretch of allowed calls is one marker: a fleet's long runs stay a few lines
        end = index
        while end < len(items) and isinstance(items[end], Call) and items[end].status == "allow":
            end += 1
        if end - index > ALLOWED_RUN:
            parts.append(f'<span class="gap" data-allowed="{end - index}">{end - index} allowed</span>')
            index = end
            continue
        item = items[index]
        index += 1
        if isinstance(item, Compaction):
            tip = f"compaction (post-compaction guard armed)\n{shown(where(item.source, relative_to, basename=True))}"
            parts.append(f'<span class="cmp" data-tip="{esc(tip, None, True)}" title="{esc(tip, None, True)}"></span>')
        else:
            tip = _call_tip(item, relative_to)
            parts.append(
                f'<span class="c st-{item.status}" data-status="{item.status}" data-tool="{esc(item.tool)}" '
                f'data-count="{esc(item.count if item.count is not None else "")}" '
                f'data-where="{esc(where(item.source, relative_to, basename=True))}" data-tip="{esc(tip, None, True)}"></span>')
    if not parts:
        parts.append('<span class="empty">no tool calls</span>')
    return "".join(parts)


def _run_row(run: RunReport, relative_to: str | None) -> str:
    flagged = "1" if run.detections else "0"
    calls = len(run.calls)
    return (f'<div class="run" data-run="{esc(run.run_id)}" data-flagged="{flagged}" data-calls="{calls}">'
            f'<div class="run-label" title="run {esc(run.run_id)}: {calls} call(s)"><span class="rid">{esc(_short(run.run_id))}</span>'
            f'<span class="n">{calls}</span></div>'
            f'<div class="timeline">{_timeline(run, relative_to)}</div></div>')


def _badges(session: SessionReport) -> str:
    t = session.totals
    out = []
    for cls, n, word in (("warn", t.warnings_emitted, "warned"), ("suppressed", t.warnings_suppressed, "suppressed"),
                         ("block", t.blocks, "blocked"), ("abort", t.aborts, "aborted"),
                         ("refused", t.refused, "refused after the run ended"), ("late", t.late, "late")):
        if n:
            out.append(f'<span class="badge {cls}">{n} {word}</span>')
    return "".join(out) or '<span class="badge clean">no detections</span>'


def session_section(index: int, session: SessionReport, relative_to: str | None) -> str:
    t = session.totals
    files = "".join(f'<span title="{esc(f)}">{esc(_rel(f, relative_to))}</span><br>' for f in session.files)
    head = (f'<section class="session" id="session-{index}" data-session="{esc(session.session_id)}" '
            f'data-detections="{t.detection_count}">'
            f'<h3>{esc(session.session_id)} {_badges(session)}</h3>'
            f'<div class="meta">{files}<b>{t.runs}</b> run(s) · <b>{t.calls}</b> call(s)'
            + (f' · <b>{t.compactions}</b> compaction(s)' if t.compactions else "") + "</div>")
    runs = list(session.runs.values())
    body = []
    if len(runs) <= FOLD_RUNS_ABOVE:
        body.extend(_run_row(run, relative_to) for run in runs)
    else:
        flagged = [run for run in runs if run.detections][:RUNS_DRAWN]
        clean = [run for run in runs if not run.detections][:max(0, RUNS_DRAWN - len(flagged))]
        body.extend(_run_row(run, relative_to) for run in flagged)
        if clean:
            body.append(f'<details class="fold"><summary>{len(clean)} run(s) without detections</summary>'
                        + "".join(_run_row(run, relative_to) for run in clean) + "</details>")
        left = len(runs) - len(flagged) - len(clean)
        if left:
            body.append(f'<p class="empty" data-undrawn-runs="{left}">{left} more run(s) not drawn '
                        "(the detection table below lists all of this session's detections)</p>")
    rows = session.detections
    single = len(session.files) == 1  # the header names the file: the table shows line numbers
    if rows:
        table_rows = "".join(
            f'<tr data-action="{esc(r.action)}"><td class="mono l src" title="run {esc(r.run_id)}">{esc(_short(r.run_id))}</td>'
            f'<td class="mono src" title="{esc(r.where(relative_to))}">'
            f'{esc(_position(r, single, relative_to))}</td><td class="l">{esc(r.tool)}</td><td class="l">{esc(r.detector)}</td><td class="l">{esc(r.level)}</td>'
            f'<td class="l">{esc(r.action)}</td><td>{esc("" if r.count is None else r.count)}</td>'
            f'<td class="msg">{esc(r.message, MESSAGE_LIMIT)}</td></tr>' for r in rows)
        opened = " open" if len(rows) <= FOLD_DETECTIONS_ABOVE else ""
        body.append(f'<details class="dets"{opened}><summary>{len(rows)} detection(s)</summary>'
                    '<table class="detections"><tr><th class="l">run</th><th>source</th><th class="l">tool</th><th class="l">detector</th>'
                    '<th class="l">level</th><th class="l">action</th><th>count</th><th class="l">message</th></tr>'
                    f"{table_rows}</table></details>")
    return head + "".join(body) + "</section>"


def legend() -> str:
    items = [f'<span><i class="c st-{s}"></i>{esc(STATUS_TEXT[s])}</span>' for s in
             ("allow", "suppressed", "warn", "block", "abort", "refused")]
    items.append('<span><i class="cmp"></i>compaction</span>')
    return '<div class="legend">' + "".join(items) + "</div>"
