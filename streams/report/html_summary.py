"""The HTML report's summary: cards, fleet loops, loops over time, detections by detector, what decided,
calls in loops by tool, agent, model and runner (with the wasted calls and tokens), the sessions
table, and a backtest's comparison. Each section is an element with an ``id`` (tests and the
screenshots read them): ``summary``, ``fleet-loops``, ``over-time``, ``by-detector``, ``decided``,
``wasted``, ``by-tool`` (``by-agent``, ``by-model``, ``by-runner`` when records name them),
``sessions``; ``compare-*`` for a backtest.
"""

from __future__ import annotations

from collections import Counter

from .compare import Comparison, Difference, outcome_text
from .model import Report
from .over_time import step_text, utc
from .shown import MESSAGE_LIMIT, esc

__all__ = ["summary", "comparison_section", "over_time_section"]

# Rows of the sessions table shown open (worst first); the others are folded.
SESSION_ROWS = 25


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
        rows.append(f'<tr data-signature="{esc(group["signature"])}" data-runs="{group["runs"]}" '
                    f'data-windows="{group["windows"]}"><td class="mono">{esc(group["signature"])}</td>'
                    f'<td>{group["runs"]}</td><td>{group["windows"]}</td><td>{group["events"]}</td>'
                    f'<td class="l">{esc(", ".join(group["agents"][:5]) or "-")}</td><td class="l mono">{esc(runs)}</td>'
                    f'<td class="l">{esc(minute(group["first_seen"]))} – {esc(minute(group["last_seen"]))}</td>'
                    f'<td class="msg">{esc(group["message"], MESSAGE_LIMIT)}</td></tr>')
    more = len(groups) - len(shown)
    return (f'<h2>Fleet loops ({len(groups)} signature(s), {len(report.fleet_loops)} window(s))</h2>'
            '<table id="fleet-loops"><tr><th>signature</th><th>runs</th><th>windows</th><th>events</th>'
            '<th class="l">agents</th><th class="l">runs (examples)</th><th class="l">seen (UTC)</th>'
            '<th class="l">what (its first record)</th></tr>' + "".join(rows) + "</table>"
            + (f'<p class="empty">{more} more (report --top)</p>' if more else ""))


def summary(report: Report, top: int | None = None) -> str:
    """Every summary section, in page order (see the module docstring)."""
    t = report.totals
    cards = "".join(
        f'<div class="card {cls}" data-metric="{key}"><div class="v">{value:,}</div><div class="k">{label}</div></div>'
        for key, cls, value, label in (
            ("sessions", "", t.sessions, "sessions"), ("runs", "", t.runs, "runs"), ("calls", "", t.calls, "tool calls"),
            ("warnings_emitted", "warn", t.warnings_emitted, "warnings emitted"),
            ("warnings_suppressed", "warn", t.warnings_suppressed, "warnings suppressed"),
            ("blocks", "block", t.blocks, "blocks"), ("aborts", "abort", t.aborts, "aborts"),
            # only when there are any: events of ended runs refused, calls run without a verdict
            *((("refused", "refused", t.refused, "refused after the run ended"),) if t.refused else ()),
            *((("late", "", t.late, "ran without a verdict (late)"),) if t.late else ()),
        ))
    out = [f'<section class="cards" id="summary">{cards}</section>', _fleet_loops(report, top),
           over_time_section(report), "<h2>Detections by detector</h2>"]
    if t.detections:
        rows = []
        # the "exempted" and "ran late" columns only when a perTool rule let a flagged call through, or a
        # refusal came after its runner had run the call
        extra = tuple(a for a in ("allow", "late") if any(action == a for _, _, action in t.detections))
        for detector, level, actions in t.by_detector():
            rows.append(f'<tr data-detector="{esc(detector)}" data-level="{esc(level)}"><td>{esc(detector)}</td>'
                        f'<td class="l">{esc(level)}</td>' + "".join(_num(actions[a]) for a in
                                                                   ("warn", "suppressed", "block", "abort", *extra))
                        + _num(sum(n for a, n in actions.items() if a.startswith("would_")))  # shadow findings
                        + f"<td><b>{sum(actions.values())}</b></td></tr>")
        heads = {"allow": '<th title="calls a perTool rule let through that OpenClaw\'s thresholds flag">exempted</th>',
                 "late": '<th title="blocks and aborts the runner did not wait for: the call ran">ran late</th>'}
        out.append('<table id="by-detector"><tr><th>detector</th><th class="l">level</th><th>warned</th>'
                   '<th>suppressed</th><th>blocked</th><th>aborted</th>' + "".join(heads[a] for a in extra) +
                   '<th title="what shadow mode would have done">'
                   'shadow</th><th>total</th></tr>' + "".join(rows) + "</table>")
    else:
        out.append('<p class="empty">No detections.</p>')
    out.append(_decided(t))
    out.append(_calls_in_loops(report, top))
    out.append("<h2>Sessions</h2>")
    rows = []
    names = report.session_names()
    index = {sid: i for i, sid in enumerate(report.sessions)}
    drawn = len(report.sessions) if top is None else top  # the worst ones have a timeline to link to
    for rank, session in enumerate(report.worst_sessions()):
        i = index[session.session_id]
        s = session.totals
        name = names[session.session_id]
        label = (f'<a href="#session-{i}" title="{esc(session.session_id)}">{esc(name)}</a>' if rank < drawn
                 else f'<span title="{esc(session.session_id)}">{esc(name)}</span>')
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


def comparison_section(comparison: Comparison, relative_to: str | None) -> str:
    rows = "".join(f"<tr><td>{esc(name)}</td><td>{a}</td><td>{b}</td><td>{b - a:+d}</td></tr>"
                   for name, a, b in comparison.total_rows())
    det = "".join(f'<tr><td>{esc(d)}</td><td class="l">{esc(lvl)}</td><td class="l">{esc(act)}</td>'
                  f"<td>{a}</td><td>{b}</td><td>{b - a:+d}</td></tr>" for d, lvl, act, a, b in comparison.detection_rows())
    return ('<section id="backtest"><h2>Backtest</h2>'
            f'<p class="sub">A = {esc(comparison.label_a)}<br>B = {esc(comparison.label_b)}</p>'
            '<table id="compare-totals"><tr><th></th><th>A</th><th>B</th><th>B−A</th></tr>' + rows + "</table>"
            '<h2>Detections under A and B</h2><table id="compare-detections"><tr><th>detector</th><th class="l">level</th>'
            '<th class="l">action</th><th>A</th><th>B</th><th>B−A</th></tr>' + det + "</table>"
            + _runs_differing(comparison) +
            f"<h2>Events whose verdict differs ({len(comparison.differences)})</h2>"
            + _differences("compare-differences", comparison.differences, relative_to)
            + "<h2>Calls with the same verdict but another detection "
            f"({len(comparison.detection_differences)})</h2>"
            + _differences("compare-detection-differences", comparison.detection_differences, relative_to)
            + "</section>")


def _differences(table_id: str, diffs: list[Difference], relative_to: str | None) -> str:
    if not diffs:
        return '<p class="empty">None.</p>'
    rows = "".join(f'<tr><td class="mono">{esc(d.where(relative_to))}</td><td class="l">{esc(d.tool)}</td>'
                   f'<td class="l mono">{esc(d.run_id or "")}</td><td class="l mono">{esc(d.event_id or "")}</td>'
                   f'<td class="l">{esc(d.a, MESSAGE_LIMIT)}</td><td class="l">{esc(d.b, MESSAGE_LIMIT)}</td></tr>' for d in diffs)
    return (f'<table id="{table_id}"><tr><th>source</th><th class="l">tool</th><th class="l">run</th>'
            '<th class="l">event</th><th class="l">A</th><th class="l">B</th></tr>' + rows + "</table>")


def _decided(totals) -> str:
    """What decided (``decided_by``): per kind and rule, the enforced findings beside the shadow ones."""
    out = ['<h2>What decided</h2><p class="sub">Every finding of the verdicts\' <code>decided_by</code>: '
           "what was enforced, and what shadow mode and the fleet breaker's shadow would have done.</p>"]
    if not totals.decisions:
        return "".join(out) + '<p class="empty" id="decided">Nothing decided but OpenClaw\'s plain allow.</p>'
    grouped: dict[tuple[str, str], tuple[Counter, Counter]] = {}
    for (kind, rule, action, enforced), n in totals.decisions.items():
        grouped.setdefault((kind, rule), (Counter(), Counter()))[0 if enforced else 1][action] += n

    def cell(counter: Counter) -> str:
        return esc(", ".join(f"{n} {action}" for action, n in sorted(counter.items())) or "-")

    rows = "".join(f'<tr data-kind="{esc(kind)}"><td class="l">{esc(kind)}</td><td class="l mono">{esc(rule or "-")}</td>'
                   f'<td class="l">{cell(enforced)}</td><td class="l">{cell(shadow)}</td></tr>'
                   for (kind, rule), (enforced, shadow) in sorted(grouped.items()))
    out.append('<table id="decided"><tr><th class="l">kind</th><th class="l">rule</th><th class="l">enforced</th>'
               '<th class="l">shadow (would have)</th></tr>' + rows + "</table>")
    return "".join(out)


_BY_STATUS = (("warn", "warned"), ("suppressed", "suppressed"), ("block", "blocked"), ("abort", "aborted"),
              ("refused", "refused"))


def _calls_in_loops(report: Report, top: int | None) -> str:
    """The calls the loops cost (and their tokens, where the input has usage), then calls by tool, agent,
    model and runner."""
    t = report.totals
    wasted = t.wasted_calls
    cost = report.usage.estimate()
    items = [f"<li><b>{wasted['ran']:,}</b> ran while a detector flagged them (warned or suppressed)</li>",
             f"<li><b>{wasted['blocked']:,}</b> tried and blocked or aborted</li>",
             f"<li><b>{wasted['refused']:,}</b> tried after their run had ended</li>"]
    if cost["turns"]:
        share = f" ({100 * cost['wasted'] / cost['tokens']:.1f} % of {cost['tokens']:,})" if cost["tokens"] else ""
        items.append(f'<li id="wasted-tokens" data-tokens="{cost["wasted"]}">≈ <b>{cost["wasted"]:,}</b> tokens'
                     f'{share} spent on them: {cost["wasted_output"]:,} written, {cost["wasted_input"]:,} read '
                     f'({cost["wasted_cached"]:,} of those from the prompt cache); each call costs an equal share of '
                     "its model turn's usage"
                     + (f"; {cost['wasted_without_usage']:,} of the wasted calls carry no usage"
                        if cost["wasted_without_usage"] else "") + "</li>")
    else:
        items.append('<li class="empty">tokens: the input carries no usage (Claude Code and Codex sessions do)</li>')
    out = ['<h2>Calls in loops</h2><ul id="wasted" class="facts">' + "".join(items) + "</ul>"]
    for dimension in ("tool", "agent", "model", "runner"):
        groups = t.breakdown(dimension)
        if not groups:
            continue  # no record named an agent (a model, a runner)
        shown = groups if top is None else groups[:top]
        rows = "".join(f'<tr data-{dimension}="{esc(name)}"><td class="l mono">{esc(name)}</td>'
                       f"<td>{sum(counts.values()):,}</td>" + "".join(_num(counts[st]) for st, _ in _BY_STATUS) + "</tr>"
                       for name, counts in shown)
        more = len(groups) - len(shown)
        out.append(f'<table id="by-{dimension}" class="by"><tr><th class="l">{dimension}</th><th>calls</th>'
                   + "".join(f"<th>{head}</th>" for _, head in _BY_STATUS) + "</tr>" + rows + "</table>"
                   + (f'<p class="empty">{more} more {dimension}(s) (report --top)</p>' if more else ""))
    return "".join(out)


# The chart's series, bottom up, with their colours (CSS variables of the page).
_CHART = (("warn", "--warn"), ("suppressed", "--suppressed-edge"), ("block", "--block"), ("abort", "--abort"),
          ("refused", "--refused"))
_W, _H, _PAD = 1200, 170, 34


def over_time_section(report: Report) -> str:
    """Loops over time: per bucket of event time, the calls flagged, blocked, aborted and refused (stacked bars,
    left scale) and all calls (grey line, right scale); an inline SVG, no script."""
    step, buckets = report.over_time.buckets()
    head = "<h2>Loops over time</h2>"
    if not buckets:
        return head + '<p class="empty" id="over-time">No call has an event time (ts).</p>'
    size, secs = step_text(step), step < 60
    loops = [sum(c[name] for name, _ in _CHART) for _, c in buckets]
    calls = [c["calls"] for _, c in buckets]
    top_loops, top_calls = max(max(loops), 1), max(max(calls), 1)
    width = (_W - 2 * _PAD) / len(buckets)
    parts = []
    for i, (start, counts) in enumerate(buckets):
        x = _PAD + i * width
        y = _H - 20
        bars = []
        for name, colour in _CHART:
            if counts[name]:
                h = (_H - 40) * counts[name] / top_loops
                y -= h
                bars.append(f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(width - 2, 1):.1f}" height="{h:.1f}" '
                            f'fill="var({colour})"/>')
        when = f"{utc(start, seconds=secs)} UTC ({size})"
        tip = (f"{when}: {counts['calls']:,} calls; " + ", ".join(f"{counts[name]} {name}" for name, _ in _CHART
                                                                  if counts[name])
               if loops[i] else f"{when}: {counts['calls']:,} calls, none in a loop")
        parts.append(f'<g class="bucket" data-start="{start}" data-calls="{counts["calls"]}" data-loops="{loops[i]}">'
                     f"<title>{esc(tip)}</title>"
                     f'<rect x="{x:.1f}" y="20" width="{width:.1f}" height="{_H - 40}" fill="transparent"/>'
                     + "".join(bars) + "</g>")
    line = " ".join(f"{_PAD + (i + 0.5) * width:.1f},{_H - 20 - (_H - 40) * n / top_calls:.1f}"
                    for i, n in enumerate(calls))
    # the first and the last bucket's start under the chart's ends, the middle one under its bucket
    labels = [(_PAD, "start", buckets[0][0]), (_W - _PAD, "end", buckets[-1][0])]
    if len(buckets) > 2:
        middle = len(buckets) // 2
        labels.append((_PAD + (middle + 0.5) * width, "middle", buckets[middle][0]))
    ticks = "".join(f'<text x="{x:.1f}" y="{_H - 4}" text-anchor="{anchor}">{esc(utc(ms, seconds=secs))}</text>'
                    for x, anchor, ms in (labels if len(buckets) > 1 else labels[:1]))
    svg = (f'<svg id="over-time" class="chart" viewBox="0 0 {_W} {_H}" role="img" data-buckets="{len(buckets)}" '
           f'data-step="{step}" aria-label="calls in loops per {size} of event time">'
           f'<text x="{_PAD - 4}" y="26" text-anchor="end">{top_loops:,}</text>'
           f'<text x="{_PAD - 4}" y="{_H - 20}" text-anchor="end">0</text>'
           f'<text x="{_W - _PAD + 4}" y="26" class="calls">{top_calls:,}</text>'
           f'<line x1="{_PAD}" y1="{_H - 20}" x2="{_W - _PAD}" y2="{_H - 20}" stroke="#cbd5e1"/>'
           + "".join(parts) + f'<polyline points="{line}" fill="none" stroke="#94a3b8" stroke-width="1.5"/>'
           + ticks + "</svg>")
    legend = "".join(f'<span><i class="c st-{name}"></i>{name}</span>' for name, _ in _CHART)
    note = f" {report.without_ts:,} record(s) without an event time are not in it." if report.without_ts else ""
    return (head + f'<p class="sub">Calls in loops per {size} of event time (UTC), stacked, left scale; all calls '
            f'as the grey line, right scale.{note}</p>' + svg + f'<div class="legend small">{legend}'
            '<span><i class="line"></i>all calls</span></div>')


RUN_ROWS = 50  # runs listed in a backtest's by-run table (the most differing events first)


def _runs_differing(comparison: Comparison) -> str:
    """The runs whose outcome differs under A and B, with shadow findings and the fleet breaker's blocks."""
    rows = comparison.run_rows()
    head = f"<h2>Runs whose outcome differs ({len(rows)})</h2>"
    if not rows:
        return head + '<p class="empty" id="compare-runs">None.</p>'
    body = "".join(f'<tr data-run="{esc(r["run"])}" data-differences="{r["differences"]}">'
                   f'<td class="l mono">{esc(r["run"])}</td><td class="l mono">{esc(r["session"])}</td>'
                   f'<td>{r["calls"]}</td><td class="l">{esc(outcome_text(r["a"]))}</td>'
                   f'<td class="l">{esc(outcome_text(r["b"]))}</td><td>{r["differences"]}</td></tr>'
                   for r in rows[:RUN_ROWS])
    more = len(rows) - RUN_ROWS
    return (head + '<table id="compare-runs"><tr><th class="l">run</th><th class="l">session</th><th>calls</th>'
            '<th class="l">A</th><th class="l">B</th><th>events that differ</th></tr>' + body + "</table>"
            + (f'<p class="empty">{more} more run(s)</p>' if more > 0 else ""))
