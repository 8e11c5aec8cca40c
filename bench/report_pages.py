"""The HTML report at two sizes, and its screenshots in docs/img/ (``make docs-screenshots``).

    .venv/bin/python bench/report_pages.py [--out docs/img] [--runs 3800] [--browser /usr/bin/chromium]

Two pages:

* ``small``: examples/events.jsonl (104 events, eight runs) replayed under examples/openclaw.json,
  as ``loopwatch report --format events --config examples/openclaw.json examples/events.jsonl``;
* ``fleet``: the synthetic fleet of bench/workload.py (``--runs 3800``: about 100,000 events, a
  third of the runs hitting a fleet-wide failure, five agents, events 50 ms apart) replayed with
  OpenClaw's detectors on and the default ``options.fleet``, ``--top 10``.

The pages are written beside the screenshots' folder in a temporary directory, loaded in
headless Chromium (Debian's ``chromium``; never a downloaded browser) and photographed:
``report-small.png`` (the whole page), ``report-fleet.png`` (its summary: the first screens),
``report-fleet-timelines.png`` (the timelines alone) and ``report-backtest.png`` (the backtest of
examples/events.jsonl under OpenClaw 2026.7's rules and 2026.9.6's: ``--compare-profile``). The page sizes are printed
beside the 5 MB ceiling. tests/report/test_page_size.py (in ``make test``) and
tests/report/test_html_browser.py (``make test-browser``) build the same pages.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script, as the other benchmarks

from bench.workload import generate  # noqa: E402
from streams.detection import Engine, OpenClawConfig, load_config  # noqa: E402
from streams.offline.replay import Replayer  # noqa: E402
from streams.report import Report, build_report, compare, render_html  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HTML_BYTES = 5_000_000  # the fleet page's ceiling
FLEET_RUNS = 3800  # about 100,000 events
FLEET_T0 = 1_764_460_800_000
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                 "--hide-scrollbars", "--mute-audio")
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """``LOOPWATCH_CHROMIUM``, else the first Chromium on PATH, else None."""
    return os.environ.get("LOOPWATCH_CHROMIUM") or next((b for b in map(shutil.which, BROWSERS) if b), None)


def _replay(events: list[dict[str, Any]], config: OpenClawConfig) -> tuple[list[dict], list[dict]]:
    replayer = Replayer(Engine(config), key_by="run")
    records = [replayer.apply(event, event.get("event_id")) for event in events]
    return records, replayer.fleet_loops


def _example_events() -> list[dict[str, Any]]:
    """examples/events.jsonl, each event's file line as its source."""
    events = []
    path = ROOT / "examples" / "events.jsonl"
    for line, text in enumerate(path.read_text().splitlines(), 1):
        if text.strip():
            events.append({**json.loads(text), "source": {"path": "examples/events.jsonl", "line": line}})
    return events


def small_report() -> Report:
    """examples/events.jsonl under examples/openclaw.json."""
    records, loops = _replay(_example_events(), load_config(ROOT / "examples" / "openclaw.json"))
    return build_report(records, "examples/openclaw.json", fleet_loops=loops)


def backtest_page() -> str:
    """examples/events.jsonl under examples/openclaw.json (A) and the same file judged as OpenClaw 2026.9.6 judges
    it (B), as ``loopwatch report --format events --config examples/openclaw.json --compare-profile
    openclaw-2026.9.6 examples/events.jsonl --html``."""
    config_a = load_config(ROOT / "examples" / "openclaw.json")
    config_b = OpenClawConfig(config_a.raw, profile="openclaw-2026.9.6")
    records_a, loops = _replay(_example_events(), config_a)
    records_b, _ = _replay(_example_events(), config_b)
    comparison = compare(records_a, records_b, "examples/openclaw.json [openclaw-2026.7]",
                         "examples/openclaw.json [openclaw-2026.9.6]", fleet=config_a.fleet)
    comparison.a.fleet_loops = loops
    return render_html(comparison.a, comparison, top=10)


def fleet_events(runs: int = FLEET_RUNS, light: bool = False) -> list[dict[str, Any]]:
    """The synthetic fleet (bench/workload.py), events 50 ms apart in event time; ``light``: short payloads
    (the report shows none of them; several times faster to make and replay)."""
    events = generate(runs=runs, fleet_share=0.3, agents=5, seed=11, light=light)
    for number, event in enumerate(events):
        event["ts"] = FLEET_T0 + number * 50
    return events


def fleet_report(runs: int = FLEET_RUNS, light: bool = False) -> Report:
    records, loops = _replay(fleet_events(runs, light), OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}}))
    return build_report(records, "detectors on, fleet defaults", fleet_loops=loops)


def pages(runs: int = FLEET_RUNS) -> dict[str, str]:
    """``{"small": html, "fleet": html, "backtest": html}``, with ``--top 10``."""
    return {"small": render_html(small_report(), top=10), "fleet": render_html(fleet_report(runs), top=10),
            "backtest": backtest_page()}


def load(browser: str, path: str | os.PathLike, *extra: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Chromium headless on ``file://path`` with ``extra`` flags (``--dump-dom``, ``--screenshot=...``) in a
    fresh profile; stdout and stderr captured (stderr carries the page's console with ``--enable-logging``)."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([browser, *BROWSER_FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr",
                               *extra, f"file://{os.path.abspath(path)}"],
                              capture_output=True, text=True, timeout=timeout)


def screenshot(browser: str, page: str | os.PathLike, png: str | os.PathLike, width: int, height: int,
               only: str = "") -> None:
    """``png``: the first ``width`` x ``height`` CSS pixels of ``page``; with ``only`` (an element id), of the
    page's title and that element alone (a copy of the page with the rest hidden: headless Chromium's
    ``--screenshot`` does not follow a ``#fragment`` scroll)."""
    target = os.path.abspath(page)
    if only:
        with open(target, encoding="utf-8") as handle:
            html = handle.read()
        target = f"{os.path.splitext(target)[0]}-{only}.html"
        hide = (f"<style>main > :not(h1):not(#{only}) {{ display: none; }} main > h1 + .sub {{ display: block !important; }}"
                "</style></head>")
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(html.replace("</head>", hide, 1))
    res = load(browser, target, f"--screenshot={os.path.abspath(png)}", f"--window-size={width},{height}")
    if res.returncode != 0 or not os.path.exists(png):
        raise SystemExit(f"report_pages.py: chromium failed on {page}: {res.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"), help="folder of the screenshots")
    parser.add_argument("--runs", type=int, default=FLEET_RUNS, help="runs of the synthetic fleet")
    parser.add_argument("--browser", default=find_browser())
    args = parser.parse_args()
    if not args.browser:
        raise SystemExit("report_pages.py: no Chromium found (apt-get install chromium, or set LOOPWATCH_CHROMIUM)")
    os.makedirs(args.out, exist_ok=True)
    built = pages(args.runs)
    with tempfile.TemporaryDirectory() as work:
        for name, html in built.items():
            path = os.path.join(work, f"report-{name}.html")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(html)
            size = len(html.encode())
            print(f"{name}: {size:,} bytes (ceiling {HTML_BYTES:,})")
        screenshot(args.browser, os.path.join(work, "report-small.html"), os.path.join(args.out, "report-small.png"),
                   1280, 2400)
        screenshot(args.browser, os.path.join(work, "report-fleet.html"), os.path.join(args.out, "report-fleet.png"),
                   1280, 2400)
        screenshot(args.browser, os.path.join(work, "report-fleet.html"),
                   os.path.join(args.out, "report-fleet-timelines.png"), 1280, 1400, only="timeline-section")
        screenshot(args.browser, os.path.join(work, "report-backtest.html"),
                   os.path.join(args.out, "report-backtest.png"), 1280, 1600, only="backtest")
    for name in ("report-small.png", "report-fleet.png", "report-fleet-timelines.png", "report-backtest.png"):
        print(f"wrote {os.path.join(args.out, name)}")


if __name__ == "__main__":
    main()
