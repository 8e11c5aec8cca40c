"""The HTML report in a real headless Chromium (``make test-browser``; marker ``browser``, not in ``make test``).

The pages of bench/report_pages.py (examples/events.jsonl, 104 events; the synthetic fleet,
about 100,000 events; the backtest of examples/events.jsonl under two OpenClaw releases) load, their scripts run without an error, and the rendered DOM holds
every section; a small fleet's timeline holds one element per call with the right statuses.

Needs a Chromium binary (Debian package ``chromium``, or ``LOOPWATCH_CHROMIUM``); skipped with the
reason when there is none. tests/report/test_page_size.py checks the fleet page's size without a browser.
"""

from html.parser import HTMLParser

import pytest

from bench.report_pages import HTML_BYTES, find_browser, load, pages
from streams.report import build_report, render_html

BROWSER = find_browser()

pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    BROWSER is None, reason="no Chromium binary (install Debian's 'chromium' package, or set LOOPWATCH_CHROMIUM)")]


class _Dom(HTMLParser):
    """Start tags with their attributes, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


def _dump_dom(path) -> str:
    res = load(BROWSER, path, "--dump-dom", timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Uncaught" not in res.stderr, res.stderr[-2000:]  # the page's console (--enable-logging)
    return res.stdout


def _elements(dom: str) -> list[tuple[str, dict]]:
    parser = _Dom()
    parser.feed(dom)
    return parser.elements


def test_timeline_in_headless_chromium(sensitive_records, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_html(build_report(sensitive_records, "sensitive.json")), encoding="utf-8")
    dom = _dump_dom(page)
    elements = _elements(dom)

    html_attrs = next(a for t, a in elements if t == "html")
    # set by the page's own script: it ran in the browser and counted the timeline squares
    assert html_attrs.get("data-ready") == "1"
    assert (html_attrs["data-timeline-calls"], html_attrs["data-timeline-allow"], html_attrs["data-timeline-suppressed"],
            html_attrs["data-timeline-warn"], html_attrs["data-timeline-block"], html_attrs["data-timeline-abort"]) == (
        "26", "13", "10", "1", "1", "1")

    calls = [a for t, a in elements if t == "span" and a.get("data-status")]
    assert len(calls) == 26
    blocked = [a for a in calls if a["data-status"] == "block"]
    assert [(a["data-tool"], a["data-count"], a["data-where"]) for a in blocked] == [("exec", "5", "s1.jsonl:20")]
    assert "CRITICAL: Called exec with identical arguments and identical outcomes 5 times" in blocked[0]["data-tip"]
    aborted = [a for a in calls if a["data-status"] == "abort"]
    assert [(a["data-tool"], a["data-where"]) for a in aborted] == [("read", "s3.jsonl:5")]
    assert [a["data-count"] for a in calls if a["data-status"] == "warn"] == ["10"]
    assert len([a for t, a in elements if t == "span" and a.get("class") == "cmp"]) == 1

    runs = [a for t, a in elements if t == "div" and a.get("class") == "run"]
    assert [(a["data-run"], a["data-calls"], a["data-flagged"]) for a in runs] == [  # worst sessions first
        ("r4", "3", "1"), ("r1", "6", "1"), ("r5", "11", "1"), ("r2", "3", "0"), ("r3", "3", "1")]
    metrics = [a["data-metric"] for t, a in elements if a.get("data-metric")]
    assert metrics == ["sessions", "runs", "calls", "warnings_emitted", "warnings_suppressed", "blocks", "aborts"]
    assert '<div class="v">26</div><div class="k">tool calls</div>' in dom
    assert '<div class="v">10</div><div class="k">warnings suppressed</div>' in dom
    sessions = [(a["data-session"], a["data-detections"]) for t, a in elements if t == "section" and a.get("data-session")]
    assert sessions == [("s3", "1"), ("s1", "3"), ("s4", "8"), ("s2", "1")]


# Every section of a page, by element id, in page order (the fleet-loops table only when there are fleet loops).
SECTIONS = ["summary", "over-time", "by-detector", "decided", "wasted", "by-tool", "by-agent", "sessions", "timelines"]


@pytest.fixture(scope="module")
def built():
    return pages()


@pytest.mark.parametrize("name", ["small", "fleet", "backtest"])
def test_page_renders_every_section_without_script_errors(built, name, tmp_path):
    html = built[name]
    page = tmp_path / f"report-{name}.html"
    page.write_text(html, encoding="utf-8")
    elements = _elements(_dump_dom(page))
    root = next(a for t, a in elements if t == "html")
    assert root.get("data-ready") == "1"  # the page's script ran to its end
    assert "data-script-errors" not in root, root.get("data-script-error")
    ids = [a["id"] for t, a in elements if a.get("id") in SECTIONS + ["fleet-loops", "backtest", "compare-runs"]]
    expected = SECTIONS[:1] + (["fleet-loops"] if name == "fleet" else []) + SECTIONS[1:-1] + (
        ["backtest", "compare-runs"] if name == "backtest" else []) + SECTIONS[-1:]
    assert ids == expected
    sessions = [a for t, a in elements if t == "section" and a.get("data-session")]
    assert len(sessions) == (10 if name == "fleet" else 7)  # --top 10: the fleet's ten worst sessions
    drawn = int(root["data-timeline-calls"])
    assert drawn == sum(int(root[f"data-timeline-{s}"])
                        for s in ("allow", "suppressed", "warn", "block", "abort", "refused"))
    if name == "small":
        assert drawn == 97  # every call of examples/events.jsonl (compactions aside)
        assert (root["data-timeline-block"], root["data-timeline-abort"]) == ("6", "1")
    elif name == "backtest":  # A's timelines; B (OpenClaw 2026.9.6's rules) differs in two runs
        assert drawn == 97
        runs = [(a["data-run"], a["data-differences"]) for t, a in elements if t == "tr" and "data-differences" in a]
        assert runs == [("run-ops", "4"), ("run-generic", "1")]
    else:
        assert 0 < drawn < 10_000 and len(html.encode()) < HTML_BYTES
