"""The HTML report of the ~100,000-event fleet stays under 5 MB (no browser needed; in ``make test``).

The fleet of bench/report_pages.py with short payloads (``light``: the report shows none of
them, the verdicts have the same shape): the page draws the ten worst sessions' timelines and
folds the rest, so its size follows ``--top``, not the fleet. ``make test-browser`` loads the
full page in Chromium; ``make docs-screenshots`` photographs it.
"""

from bench.report_pages import HTML_BYTES, fleet_report
from streams.report import render_html


def test_fleet_page_of_100k_events_stays_under_5_mb():
    report = fleet_report(light=True)
    calls = report.totals.calls
    assert 95_000 < calls + report.totals.compactions < 105_000 and report.totals.sessions == 500
    html = render_html(report, top=10)
    size = len(html.encode())
    assert size < HTML_BYTES, f"{size:,} bytes"
    assert html.count('<section class="session"') == 10
    # the summary lists every session; their timelines are drawn for the top ten only
    assert html.count('<tr><td class="mono">') >= 25
