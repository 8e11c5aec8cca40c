"""Fleet view at fleet size: the windowed table's memory, and the report on ~100,000 events.

    .venv/bin/python bench/fleet.py [--runs 3000] [--fleet-share 0.3] [--agents 5] [--spacing-ms 50]
                                     [--html /tmp/fleet.html] [--browser chromium]

Replays a synthetic fleet (bench/workload.py with fleet-wide failures; events
``--spacing-ms`` apart in event time) with OpenClaw's detectors on
(``tools.loopDetection.enabled``) and the default ``options.fleet``, and prints,
beside their floors:

* the fleet windowed table: windows (keys) and bytes (JSON key + value, what its
  changelog and store hold) at the end and at the peak, with expiry as the worker's
  table does it (``expiresSeconds`` behind the latest event time);
* the text report: total lines and the lines before the first session block (the
  summary, which must fit one screen);
* the HTML report: bytes, and the time headless Chromium takes to load and render it
  (``--dump-dom``, the page's script sets ``data-ready``), when a browser is found.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script, as the other benchmarks

from bench.workload import generate  # noqa: E402
from streams.detection import Engine, OpenClawConfig  # noqa: E402
from streams.offline.replay import Replayer  # noqa: E402
from streams.report import build_report, render_html, render_text  # noqa: E402

SCREEN_LINES = 60  # a terminal screen, the summary's floor
HTML_BYTES = 5_000_000
RENDER_S = 5.0


def table_bytes(store: dict) -> int:
    return sum(len(json.dumps([sig, list(window)])) + len(json.dumps(value, separators=(",", ":")))
               for (sig, window), value in store.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--fleet-share", type=float, default=0.3)
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--spacing-ms", type=int, default=50)
    parser.add_argument("--html", default=os.path.join(tempfile.gettempdir(), "loopwatch-fleet-report.html"))
    parser.add_argument("--browser", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = parser.parse_args()

    events = generate(runs=args.runs, fleet_share=args.fleet_share, agents=args.agents, seed=11)
    for number, event in enumerate(events):
        event["ts"] = 1_764_460_800_000 + number * args.spacing_ms
    replayer = Replayer(Engine(OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}})), key_by="run")
    store = replayer.fleet.store
    peak_keys = peak_bytes = 0
    started = time.perf_counter()
    records = []
    for number, event in enumerate(events):
        records.append(replayer.apply(event, event["event_id"]))
        if number % 5000 == 4999:
            replayer.fleet.expire()
            peak_keys = max(peak_keys, len(store))
            peak_bytes = max(peak_bytes, table_bytes(store))
    replay_s = time.perf_counter() - started
    span_min = (events[-1]["ts"] - events[0]["ts"]) / 60_000
    print(f"events {len(events):,} over {span_min:.0f} min of event time, runs {args.runs:,}, "
          f"replay {replay_s:.1f} s ({len(events) / replay_s:,.0f} events/s, fleet view on)")
    settings = replayer.fleet.settings
    bound = len({k[0] for k in store}) * (settings.expires + settings.window_s) // settings.step_s
    print(f"fleet loops: {len(replayer.fleet_loops)} records, "
          f"{len({loop['signature'] for loop in replayer.fleet_loops})} signatures")
    print(f"windowed table: {len(store):,} windows, {table_bytes(store):,} bytes at the end; "
          f"peak {peak_keys:,} windows, {peak_bytes:,} bytes (bound: signatures x (expires + size) / step "
          f"= {bound:,} windows; runs kept per window <= {settings.run_cap})")

    started = time.perf_counter()
    report = build_report(records, "detectors on, fleet defaults", fleet_loops=replayer.fleet_loops)
    text = render_text(report)
    with open(os.path.splitext(args.html)[0] + ".txt", "w", encoding="utf-8") as handle:
        handle.write(text)
    html = render_html(report, top=10)
    build_s = time.perf_counter() - started
    lines = text.splitlines()
    summary = next((i for i, line in enumerate(lines) if line.startswith("session ")), len(lines))
    print(f"text report: {len(lines):,} lines, summary {summary} lines (floor: one screen, {SCREEN_LINES})")
    with open(args.html, "w", encoding="utf-8") as handle:
        handle.write(html)
    print(f"html report: {len(html.encode()):,} bytes (floor {HTML_BYTES:,}), built with the text in {build_s:.1f} s")
    if args.browser:
        with tempfile.TemporaryDirectory() as profile:
            started = time.perf_counter()
            dom = subprocess.run([args.browser, "--headless", "--no-sandbox", "--disable-gpu",
                                  f"--user-data-dir={profile}", "--dump-dom", f"file://{args.html}"],
                                 capture_output=True, text=True, timeout=120).stdout
            render_s = time.perf_counter() - started
        ran = 'data-ready="1"' in dom
        print(f"chromium load+render: {render_s:.2f} s (floor {RENDER_S} s), script ran: {ran}")
    else:
        print("chromium: not found (apt-get install chromium), render time not measured")


if __name__ == "__main__":
    main()
