"""One self-contained HTML page of a report: inline CSS and JS, no network.

The page has the fleet summary (cards, detections by detector, a table of sessions), a
legend, and per session a timeline per run: one square per tool call coloured by what
happened to it (``allow``, ``suppressed`` warning, emitted ``warn``, ``block``, ``abort``),
with a blue bar where a compaction happened. Hovering a square shows the tool, verdict,
detector, count, message and source line (also in its ``title``). Sessions with many runs
show their runs with detections and fold the others away. Each session ends with its
detection table. A backtest comparison, when given, comes after the summary.

Sized for fleets: the summary comes first (cards, fleet loops, detections by detector,
sessions worst first); timelines are drawn for the ``top`` worst sessions only, at most
:data:`RUNS_DRAWN` runs each (runs with detections first; the others are counted, not
drawn), and a stretch of more than :data:`ALLOWED_RUN` allowed calls in a row is one
grey ``gap`` marker saying how many.

Every string from the recordings goes through :func:`_e`: cut, with invisible and bidi characters
escaped (:mod:`.shown`), then HTML-escaped.

Elements carry ``data-*`` attributes (``data-status``, ``data-tool``, ``data-where``,
``data-metric``) so that tests can read the rendered page.
"""

from __future__ import annotations

import os
from html import escape
from typing import Iterable

from .compare import Comparison, Difference
from .model import Call, Compaction, Report, RunReport, SessionReport
from .shown import LIMIT, MESSAGE_LIMIT, shown

__all__ = ["render_html"]

# A session with more runs than this shows its runs with detections and folds the others.
FOLD_RUNS_ABOVE = 12
# At most this many runs of a session get a timeline (runs with detections first); the rest are counted.
RUNS_DRAWN = 40
# Rows of the sessions table shown open (worst first); the others are folded.
SESSION_ROWS = 25
# Consecutive allowed calls beyond this many are drawn as one gap marker.
ALLOWED_RUN = 24
# A session's detection table starts folded when it has more rows than this.
FOLD_DETECTIONS_ABOVE = 25

_STATUS_TEXT = {
    "allow": "allowed",
    "suppressed": "warning (suppressed by dedupe)",
    "warn": "warning emitted",
    "block": "blocked",
    "abort": "run aborted",
}

_CSS = """
:root { --allow:#cbd5e1; --suppressed:#fde68a; --suppressed-edge:#d97706; --warn:#f59e0b;
        --block:#dc2626; --abort:#6d28d9; --compaction:#2563eb; --ink:#1e293b; --muted:#64748b;
        --line:#e2e8f0; --bg:#f8fafc; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--ink); background: var(--bg); }
main { max-width: 1280px; margin: 0 auto; padding: 24px 28px 60px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 17px; margin: 28px 0 10px; }
h3 { font-size: 15px; margin: 0; font-family: ui-monospace, "DejaVu Sans Mono", monospace; word-break: break-all; }
.sub { color: var(--muted); margin: 0 0 18px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(135px, 1fr)); gap: 10px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
.card .v { font-size: 22px; font-weight: 650; }
.card .k { color: var(--muted); font-size: 12px; }
.card.warn .v { color: #b45309; } .card.block .v { color: var(--block); } .card.abort .v { color: var(--abort); }
table { border-collapse: collapse; background: #fff; border: 1px solid var(--line); border-radius: 8px; }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align: right; vertical-align: top; }
th { background: #f1f5f9; font-weight: 600; font-size: 12px; color: #334155; }
td:first-child, th:first-child, td.l, th.l { text-align: left; }
td.msg { text-align: left; color: #334155; max-width: 560px; }
td.src, #compare-differences td, #compare-detection-differences td { white-space: nowrap; }
td.mono, .mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
td.zero { color: #cbd5e1; }
.legend { display: flex; flex-wrap: wrap; gap: 16px; align-items: center; margin: 18px 0 6px; color: #334155; }
.legend span { display: inline-flex; align-items: center; gap: 6px; }
.controls { margin: 6px 0 12px; color: #334155; }
.session { background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; margin: 14px 0; }
.session .meta { color: var(--muted); margin: 2px 0 10px; font-size: 13px; word-break: break-all; }
.session .meta b { color: var(--ink); font-weight: 600; }
.badge { display: inline-block; padding: 1px 7px; border-radius: 10px; font-size: 12px; margin-left: 4px; }
.badge.warn, .badge.suppressed { background: #fef3c7; color: #92400e; }
.badge.block { background: #fee2e2; color: #991b1b; } .badge.abort { background: #ede9fe; color: #5b21b6; }
.badge.clean { background: #dcfce7; color: #166534; } .badge.late { background: #e0f2fe; color: #075985; }
.run { display: grid; grid-template-columns: 250px 1fr; gap: 10px; padding: 4px 0; border-top: 1px dashed #eef2f7; }
.run-label { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; color: #475569;
             display: flex; gap: 8px; white-space: nowrap; padding-top: 1px; }
.run-label .rid { overflow: hidden; text-overflow: ellipsis; flex: 1; }
.run-label .n { color: #94a3b8; min-width: 28px; text-align: right; }
.timeline { display: flex; flex-wrap: wrap; gap: 3px; align-items: center; min-height: 16px; }
.c { width: 14px; height: 14px; border-radius: 3px; background: var(--allow); cursor: default; }
.c.st-suppressed { background: var(--suppressed); box-shadow: inset 0 0 0 2px var(--suppressed-edge); }
.c.st-warn { background: var(--warn); } .c.st-block { background: var(--block); } .c.st-abort { background: var(--abort); }
.c:hover { outline: 2px solid var(--ink); outline-offset: 1px; }
.gap { font-size: 11px; color: var(--muted); background: #f1f5f9; border-radius: 3px; padding: 0 5px; height: 14px;
       line-height: 14px; }
#fleet-loops td.msg { max-width: 420px; }
.cmp { width: 4px; height: 18px; border-radius: 2px; background: var(--compaction); margin: 0 2px; }
details.fold > summary { cursor: pointer; color: var(--muted); margin: 6px 0; }
details.dets { margin-top: 10px; }
details.dets > summary { cursor: pointer; font-weight: 600; margin-bottom: 6px; }
.empty { color: var(--muted); font-style: italic; }
body.only-flagged .run[data-flagged="0"], body.only-flagged details.fold { display: none; }
#tip { position: fixed; z-index: 10; pointer-events: none; max-width: 460px; background: #0f172a; color: #f8fafc;
       padding: 8px 10px; border-radius: 6px; font-size: 12px; line-height: 1.4; display: none; white-space: pre-wrap;
       box-shadow: 0 4px 14px rgba(0,0,0,.25); }
"""

# First in the page: a script error anywhere later is counted on the root element (data-script-errors,
# the first message in data-script-error), for readers and tests of the rendered page.
_ERRORS_JS = """
window.addEventListener('error', function (e) {
  var root = document.documentElement;
  root.setAttribute('data-script-errors', String(Number(root.getAttribute('data-script-errors') || 0) + 1));
  if (!root.hasAttribute('data-script-error')) root.setAttribute('data-script-error', String(e.message));
});
"""

_JS = """
(function () {
  var tip = document.getElementById('tip');
  document.addEventListener('mouseover', function (e) {
    var t = e.target.closest ? e.target.closest('.c, .cmp') : null;
    if (!t) { tip.style.display = 'none'; return; }
    tip.textContent = t.getAttribute('data-tip');
    tip.style.display = 'block';
  });
  document.addEventListener('mousemove', function (e) {
    if (tip.style.display !== 'block') return;
    var x = e.clientX + 14, y = e.clientY + 14;
    if (x + tip.offsetWidth > window.innerWidth - 8) x = e.clientX - tip.offsetWidth - 14;
    if (y + tip.offsetHeight > window.innerHeight - 8) y = e.clientY - tip.offsetHeight - 14;
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  });
  // For readers and tests of the rendered page: the script ran, and what the timelines hold.
  var calls = document.querySelectorAll('#timelines .timeline .c');
  var root = document.documentElement;
  root.setAttribute('data-ready', '1');
  root.setAttribute('data-timeline-calls', String(calls.length));
  ['allow', 'suppressed', 'warn', 'block', 'abort'].forEach(function (s) {
    root.setAttribute('data-timeline-' + s, String(document.querySelectorAll('#timelines .timeline .c.st-' + s).length));
  });
  var box = document.getElementById('only-flagged');
  if (box) box.addEventListener('change', function () { document.body.classList.toggle('only-flagged', box.checked); });
})();
"""


def _e(value: object, limit: int | None = LIMIT, lines: bool = False) -> str:
    """``value`` as HTML text or attribute: cut and with invisible characters escaped
    (:func:`~streams.report.shown.shown`), then HTML-escaped."""
    return escape(shown(value, limit, lines), quote=True)


def _short(run_id: str, keep: int = 22) -> str:
    return run_id if len(run_id) <= keep else "…" + run_id[-(keep - 1):]


def _line_only(source: dict | None) -> str:
    if not source:
        return "-"
    text = f"line {source.get('line', '?')}"
    return text + (f" step {source['step']}" if source.get("step") is not None else "")


def _rel(path: str, base: str | None) -> str:
    if not base:
        return path
    rel = os.path.relpath(path, base)
    return path if rel.startswith("..") else rel


def _call_tip(call: Call, relative_to: str | None) -> str:
    from .model import where

    # Each part cut and escaped here (the tip keeps its newlines): _e(tip, None, lines=True) adds no cut.
    lines = [f"{shown(call.tool)} — {_STATUS_TEXT[call.status]}"]
    if call.detection:
        lines.append(f"{shown(call.detection.get('detector'))} / {shown(call.detection.get('level'))}, "
                     f"count {shown(call.detection.get('count'))}")
    if call.status == "abort" and call.abort:
        lines.append(f"compaction_loop_persisted / critical, count {shown(call.abort.get('count'))}")
    message = call.message
    if message:
        lines.append(shown(message, MESSAGE_LIMIT))
    lines.append(shown(where(call.source, relative_to, basename=True)))
    return "\n".join(lines)


def _timeline(run: RunReport, relative_to: str | None) -> str:
    from .model import where

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
            parts.append(f'<span class="cmp" data-tip="{_e(tip, None, True)}" title="{_e(tip, None, True)}"></span>')
        else:
            tip = _call_tip(item, relative_to)
            parts.append(
                f'<span class="c st-{item.status}" data-status="{item.status}" data-tool="{_e(item.tool)}" '
                f'data-count="{_e(item.count if item.count is not None else "")}" '
                f'data-where="{_e(where(item.source, relative_to, basename=True))}" data-tip="{_e(tip, None, True)}"></span>')
    if not parts:
        parts.append('<span class="empty">no tool calls</span>')
    return "".join(parts)


def _run_row(run: RunReport, relative_to: str | None) -> str:
    flagged = "1" if run.detections else "0"
    calls = len(run.calls)
    return (f'<div class="run" data-run="{_e(run.run_id)}" data-flagged="{flagged}" data-calls="{calls}">'
            f'<div class="run-label" title="run {_e(run.run_id)}: {calls} call(s)"><span class="rid">{_e(_short(run.run_id))}</span>'
            f'<span class="n">{calls}</span></div>'
            f'<div class="timeline">{_timeline(run, relative_to)}</div></div>')


def _badges(session: SessionReport) -> str:
    t = session.totals
    out = []
    for cls, n, word in (("warn", t.warnings_emitted, "warned"), ("suppressed", t.warnings_suppressed, "suppressed"),
                         ("block", t.blocks, "blocked"), ("abort", t.aborts, "aborted"),
                         ("abort", t.refused, "refused after the run ended"), ("late", t.late, "late")):
        if n:
            out.append(f'<span class="badge {cls}">{n} {word}</span>')
    return "".join(out) or '<span class="badge clean">no detections</span>'


def _session_section(index: int, session: SessionReport, relative_to: str | None) -> str:
    t = session.totals
    files = "<br>".join(f'<span title="{_e(f)}">{_e(_rel(f, relative_to))}</span>' for f in session.files) or "—"
    head = (f'<section class="session" id="session-{index}" data-session="{_e(session.session_id)}" '
            f'data-detections="{t.detection_count}">'
            f'<h3>{_e(session.session_id)} {_badges(session)}</h3>'
            f'<div class="meta">{files}<br><b>{t.runs}</b> run(s) · <b>{t.calls}</b> call(s)'
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
            f'<tr data-action="{_e(r.action)}"><td class="mono src" title="{_e(r.where(relative_to))}">'
            f'{_e(_line_only(r.source) if single else r.where(relative_to, basename=True))}</td>'
            f'<td class="l">{_e(r.tool)}</td><td class="l">{_e(r.detector)}</td><td class="l">{_e(r.level)}</td>'
            f'<td class="l">{_e(r.action)}</td><td>{_e("" if r.count is None else r.count)}</td>'
            f'<td class="msg">{_e(r.message, MESSAGE_LIMIT)}</td></tr>' for r in rows)
        opened = " open" if len(rows) <= FOLD_DETECTIONS_ABOVE else ""
        body.append(f'<details class="dets"{opened}><summary>{len(rows)} detection(s)</summary>'
                    '<table class="detections"><tr><th>source</th><th class="l">tool</th><th class="l">detector</th>'
                    '<th class="l">level</th><th class="l">action</th><th>count</th><th class="l">message</th></tr>'
                    f"{table_rows}</table></details>")
    return head + "".join(body) + "</section>"


def _num(n: int) -> str:
    return '<td class="zero">0</td>' if n == 0 else f"<td>{n}</td>"


def _fleet_loops(report: Report, top: int | None) -> str:
    from datetime import datetime, timezone

    def minute(ms: float) -> str:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M")

    groups = report.fleet_signatures()
    if not groups:
        return '<h2>Fleet loops</h2><p class="empty">No fleet loop: no failing call seen in enough runs within a window.</p>'
    shown = groups if top is None else groups[:top]
    rows = []
    for group in shown:
        runs = ", ".join(group["examples"]) + (" …" if group["runs"] > len(group["examples"]) else "")
        rows.append(f'<tr data-signature="{_e(group["signature"])}" data-runs="{group["runs"]}" '
                    f'data-windows="{group["windows"]}"><td class="mono">{_e(group["signature"])}</td>'
                    f'<td>{group["runs"]}</td><td>{group["windows"]}</td><td>{group["events"]}</td>'
                    f'<td class="l">{_e(", ".join(group["agents"][:5]) or "-")}</td><td class="l mono">{_e(runs)}</td>'
                    f'<td class="l">{_e(minute(group["first_seen"]))} – {_e(minute(group["last_seen"]))}</td>'
                    f'<td class="msg">{_e(group["message"], MESSAGE_LIMIT)}</td></tr>')
    more = len(groups) - len(shown)
    return (f'<h2>Fleet loops ({len(groups)} signature(s), {len(report.fleet_loops)} window(s))</h2>'
            '<table id="fleet-loops"><tr><th>signature</th><th>runs</th><th>windows</th><th>events</th>'
            '<th class="l">agents</th><th class="l">runs (examples)</th><th class="l">seen (UTC)</th>'
            '<th class="l">what</th></tr>' + "".join(rows) + "</table>"
            + (f'<p class="empty">{more} more (report --top)</p>' if more else ""))


def _summary(report: Report, top: int | None = None) -> str:
    t = report.totals
    cards = "".join(
        f'<div class="card {cls}" data-metric="{key}"><div class="v">{value}</div><div class="k">{label}</div></div>'
        for key, cls, value, label in (
            ("sessions", "", t.sessions, "sessions"), ("runs", "", t.runs, "runs"), ("calls", "", t.calls, "tool calls"),
            ("warnings_emitted", "warn", t.warnings_emitted, "warnings emitted"),
            ("warnings_suppressed", "warn", t.warnings_suppressed, "warnings suppressed"),
            ("blocks", "block", t.blocks, "blocks"), ("aborts", "abort", t.aborts, "aborts"),
            # only when there are any: events of ended runs refused, calls run without a verdict
            *((("refused", "abort", t.refused, "refused after the run ended"),) if t.refused else ()),
            *((("late", "", t.late, "ran without a verdict (late)"),) if t.late else ()),
        ))
    out = [f'<section class="cards" id="summary">{cards}</section>', _fleet_loops(report, top), "<h2>Detections by detector</h2>"]
    if t.detections:
        rows = []
        # the "ran late" column only when a refusal came after its runner had run the call
        late = ("late",) if any(action == "late" for _, _, action in t.detections) else ()
        for detector, level, actions in t.by_detector():
            rows.append(f'<tr data-detector="{_e(detector)}" data-level="{_e(level)}"><td>{_e(detector)}</td>'
                        f'<td class="l">{_e(level)}</td>' + "".join(_num(actions[a]) for a in
                                                                   ("warn", "suppressed", "block", "abort", *late))
                        + _num(sum(n for a, n in actions.items() if a.startswith("would_")))  # shadow findings
                        + f"<td><b>{sum(actions.values())}</b></td></tr>")
        out.append('<table id="by-detector"><tr><th>detector</th><th class="l">level</th><th>warned</th>'
                   '<th>suppressed</th><th>blocked</th><th>aborted</th>'
                   + ('<th title="blocks and aborts the runner did not wait for: the call ran">ran late</th>'
                      if late else "") +
                   '<th title="what shadow mode would have done">'
                   'shadow</th><th>total</th></tr>' + "".join(rows) + "</table>")
    else:
        out.append('<p class="empty">No detections.</p>')
    out.append("<h2>Sessions</h2>")
    rows = []
    names = report.session_names()
    index = {sid: i for i, sid in enumerate(report.sessions)}
    drawn = len(report.sessions) if top is None else top  # the worst ones have a timeline to link to
    for rank, session in enumerate(report.worst_sessions()):
        i = index[session.session_id]
        s = session.totals
        name = names[session.session_id]
        label = (f'<a href="#session-{i}" title="{_e(session.session_id)}">{_e(name)}</a>' if rank < drawn
                 else f'<span title="{_e(session.session_id)}">{_e(name)}</span>')
        rows.append(f'<tr><td class="mono">{label}</td>'
                    f"<td>{s.runs}</td><td>{s.calls}</td>" + _num(s.warnings_emitted) + _num(s.warnings_suppressed)
                    + _num(s.blocks) + _num(s.aborts) + "</tr>")
    head = ('<tr><th>session</th><th>runs</th><th>calls</th><th>warned</th><th>suppressed</th><th>blocks</th>'
            '<th>aborts</th></tr>')
    shown = max(drawn, SESSION_ROWS)  # worst first; the rest folded, a screen's worth stays open
    out.append('<table id="sessions">' + head + "".join(rows[:shown]) + "</table>")
    if len(rows) > shown:
        out.append(f'<details class="fold"><summary>{len(rows) - shown} more session(s)</summary>'
                   '<table id="more-sessions">' + head + "".join(rows[shown:]) + "</table></details>")
    return "".join(out)


def _comparison(comparison: Comparison, relative_to: str | None) -> str:
    rows = "".join(f"<tr><td>{_e(name)}</td><td>{a}</td><td>{b}</td><td>{b - a:+d}</td></tr>"
                   for name, a, b in comparison.total_rows())
    det = "".join(f'<tr><td>{_e(d)}</td><td class="l">{_e(lvl)}</td><td class="l">{_e(act)}</td>'
                  f"<td>{a}</td><td>{b}</td><td>{b - a:+d}</td></tr>" for d, lvl, act, a, b in comparison.detection_rows())
    return ("<h2>Backtest</h2>"
            f'<p class="sub">A = {_e(comparison.label_a)}<br>B = {_e(comparison.label_b)}</p>'
            '<table id="compare-totals"><tr><th></th><th>A</th><th>B</th><th>B−A</th></tr>' + rows + "</table>"
            '<h2>Detections under A and B</h2><table id="compare-detections"><tr><th>detector</th><th class="l">level</th>'
            '<th class="l">action</th><th>A</th><th>B</th><th>B−A</th></tr>' + det + "</table>"
            f"<h2>Events whose verdict differs ({len(comparison.differences)})</h2>"
            + _differences("compare-differences", comparison.differences, relative_to)
            + "<h2>Calls with the same verdict but another detection "
            f"({len(comparison.detection_differences)})</h2>"
            + _differences("compare-detection-differences", comparison.detection_differences, relative_to))


def _differences(table_id: str, diffs: list[Difference], relative_to: str | None) -> str:
    if not diffs:
        return '<p class="empty">None.</p>'
    rows = "".join(f'<tr><td class="mono">{_e(d.where(relative_to))}</td><td class="l">{_e(d.tool)}</td>'
                   f'<td class="l mono">{_e(d.run_id or "")}</td><td class="l mono">{_e(d.event_id or "")}</td>'
                   f'<td class="l">{_e(d.a, MESSAGE_LIMIT)}</td><td class="l">{_e(d.b, MESSAGE_LIMIT)}</td></tr>' for d in diffs)
    return (f'<table id="{table_id}"><tr><th>source</th><th class="l">tool</th><th class="l">run</th>'
            '<th class="l">event</th><th class="l">A</th><th class="l">B</th></tr>' + rows + "</table>")


def _legend() -> str:
    items = [f'<span><i class="c st-{s}"></i>{_e(_STATUS_TEXT[s])}</span>' for s in
             ("allow", "suppressed", "warn", "block", "abort")]
    items.append('<span><i class="cmp"></i>compaction</span>')
    return '<div class="legend">' + "".join(items) + "</div>"


def render_html(report: Report, comparison: Comparison | None = None, relative_to: str | None = None,
                title: str = "loopwatch report", top: int | None = None) -> str:
    """The report as one self-contained HTML document; timelines of the ``top`` worst sessions (None: all)."""
    if relative_to is None:
        relative_to = report.base_dir()
    # Verdict files do not say which config produced them: no config is named then.
    sub = f"config: {_e(report.config)}" if report.config else "verdicts as recorded"
    if relative_to:
        sub += f" · paths relative to {_e(relative_to)}"
    for note in report.input_notes():
        sub += f" · {_e(note)}"
    index = {sid: i for i, sid in enumerate(report.sessions)}
    worst = report.worst_sessions()
    drawn = worst if top is None else worst[:top]
    sessions: Iterable[str] = (_session_section(index[s.session_id], s, relative_to) for s in drawn)
    undrawn = len(worst) - len(drawn)
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style><script>{_ERRORS_JS}</script></head><body><main>",
        f"<h1>{_e(title)}</h1><p class=\"sub\">{sub}</p>",
        _summary(report, top),
        _comparison(comparison, relative_to) if comparison is not None else "",
        '<section id="timeline-section"><h2>Timelines</h2>',
        _legend(),
        '<div class="controls"><label><input type="checkbox" id="only-flagged"> only runs with detections</label></div>',
        f'<p class="sub">Timelines of the {len(drawn)} worst sessions of {len(worst)} (report --top N; 0 = all).</p>'
        if undrawn else "",
        '<div id="timelines">', *sessions, "</div></section>",
        '</main><div id="tip"></div>',
        f"<script>{_JS}</script></body></html>\n",
    ])
