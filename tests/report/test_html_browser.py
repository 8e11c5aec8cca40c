"""The HTML report in a real headless Chromium: the page loads, its script runs, and the DOM
holds the summary and one timeline element per call with the right statuses.

Needs a Chromium binary (Debian package ``chromium``); skipped with the reason when there is none.
"""

import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser

import pytest

from streams.report import build_report, render_html

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = os.environ.get("LOOPWATCH_CHROMIUM") or next((b for b in map(shutil.which, BROWSERS) if b), None)

pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no Chromium binary (install Debian's 'chromium' package, or set LOOPWATCH_CHROMIUM)")


class _Dom(HTMLParser):
    """Start tags with their attributes, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


def _dump_dom(path) -> str:
    with tempfile.TemporaryDirectory() as profile:
        res = subprocess.run(
            [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--dump-dom", f"file://{path}"],
            capture_output=True, text=True, timeout=90,
        )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def test_timeline_in_headless_chromium(sensitive_records, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_html(build_report(sensitive_records, "sensitive.json")), encoding="utf-8")
    dom = _dump_dom(page)
    parser = _Dom()
    parser.feed(dom)
    elements = parser.elements

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
