"""One self-contained HTML page of a report: inline CSS and JS, no network.

The summary first (:mod:`.html_summary`: cards, fleet loops, loops over time, detections by
detector, what decided, the calls in loops with their cost and by tool, agent, model and
runner, the sessions worst first), a backtest's comparison when given, then the timelines of the
``top`` worst sessions (:mod:`.html_sessions`). Sized for fleets: the page follows ``top``, not
the input (bench/report_pages.py: about 0.5 MB for 100,000 events).

Every string from the recordings goes through :func:`~.shown.esc`: cut, with invisible and bidi
characters escaped (:mod:`.shown`), then HTML-escaped.

The page's script sets ``data-ready`` on the root element when it has run and counts the
timeline squares by status (``data-timeline-<status>``); an inline script ahead of everything
counts script errors (``data-script-errors``, the first message in ``data-script-error``), so a
test (tests/report/test_html_browser.py) can read a rendered page. Elements carry ``data-*``
attributes and section ids for the same reason.
"""

from __future__ import annotations

from typing import Iterable

from .compare import Comparison
from .html_sessions import legend, session_section
from .html_summary import comparison_section, summary
from .model import Report
from .shown import esc

__all__ = ["render_html"]

_CSS = """
:root { --allow:#cbd5e1; --suppressed:#fde68a; --suppressed-edge:#d97706; --warn:#f59e0b;
        --block:#dc2626; --abort:#6d28d9; --refused:#c4b5fd; --compaction:#2563eb; --ink:#1e293b; --muted:#64748b;
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
.card.refused .v { color: #7c3aed; }
svg.chart { width: 100%; height: auto; background: #fff; border: 1px solid var(--line); border-radius: 8px; }
svg.chart text { font-size: 11px; fill: var(--muted); } svg.chart text.calls { fill: #94a3b8; }
svg.chart g.bucket:hover rect:first-child { fill: #f1f5f9; }
.legend.small { font-size: 12px; margin: 6px 0 0; gap: 12px; } .legend .c { width: 11px; height: 11px; }
.legend i.line { display: inline-block; width: 16px; height: 2px; background: #94a3b8; }
ul.facts { margin: 0 0 12px; padding-left: 20px; } ul.facts li { margin: 2px 0; }
table.by { display: inline-table; margin: 0 14px 14px 0; vertical-align: top; }
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
.badge.refused { background: #f5f3ff; color: #6d28d9; box-shadow: inset 0 0 0 1px var(--refused); }
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
.c.st-refused { background: var(--refused); box-shadow: inset 0 0 0 2px var(--abort); }
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
  ['allow', 'suppressed', 'warn', 'block', 'abort', 'refused'].forEach(function (s) {
    root.setAttribute('data-timeline-' + s, String(document.querySelectorAll('#timelines .timeline .c.st-' + s).length));
  });
  var box = document.getElementById('only-flagged');
  if (box) box.addEventListener('change', function () { document.body.classList.toggle('only-flagged', box.checked); });
})();
"""


def render_html(report: Report, comparison: Comparison | None = None, relative_to: str | None = None,
                title: str = "loopwatch report", top: int | None = None) -> str:
    """The report as one self-contained HTML document; timelines of the ``top`` worst sessions (None: all)."""
    if relative_to is None:
        relative_to = report.base_dir()
    # Verdict files do not say which config produced them: no config is named then.
    sub = f"config: {esc(report.config)}" if report.config else "verdicts as recorded"
    if relative_to:
        sub += f" · paths relative to {esc(relative_to)}"
    for note in report.input_notes():
        sub += f" · {esc(note)}"
    index = {sid: i for i, sid in enumerate(report.sessions)}
    worst = report.worst_sessions()
    drawn = worst if top is None else worst[:top]
    sessions: Iterable[str] = (session_section(index[s.session_id], s, relative_to) for s in drawn)
    undrawn = len(worst) - len(drawn)
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{_CSS}</style><script>{_ERRORS_JS}</script></head><body><main>",
        f"<h1>{esc(title)}</h1><p class=\"sub\">{sub}</p>",
        summary(report, top),
        comparison_section(comparison, relative_to) if comparison is not None else "",
        '<section id="timeline-section"><h2>Timelines</h2>',
        legend(),
        '<div class="controls"><label><input type="checkbox" id="only-flagged"> only runs with detections</label></div>',
        f'<p class="sub">Timelines of the {len(drawn)} worst sessions of {len(worst)} (report --top N; 0 = all).</p>'
        if undrawn else "",
        '<div id="timelines">', *sessions, "</div></section>",
        '</main><div id="tip"></div>',
        f"<script>{_JS}</script></body></html>\n",
    ])
