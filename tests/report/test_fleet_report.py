"""Fleet loops in the report: grouped by signature on top of the text and HTML reports; --top."""

from __future__ import annotations

from streams.detection import Engine, OpenClawConfig
from streams.offline.replay import Replayer
from streams.report import build_report, render_html, render_text

T0 = 1_764_460_800_000


def _call(run: int, ts: int, tool: str) -> dict:
    return {"type": "tool_call", "run_id": f"run-{run}", "session_id": f"s-{run % 7}", "agent_id": f"a{run % 2}",
            "tool_call_id": f"c{run}-{ts}", "tool_name": tool, "args": {"q": 1}, "result": None,
            "error": "HTTP 503", "ts": ts, "event_id": f"e{run}-{ts}"}


def _records():
    replayer = Replayer(Engine(OpenClawConfig({"options": {"fleet": {"minRuns": 2}}})), key_by="run")
    records = []
    for minute in range(30):  # web_fetch fails in a new run every minute for 30 min; exec in 3 runs once
        records.append(replayer.apply(_call(minute, T0 + minute * 60_000, "web_fetch")))
    for run in range(100, 103):
        records.append(replayer.apply(_call(run, T0 + 5_000 + run, "exec")))
    return records, replayer.fleet_loops


def test_fleet_loops_grouped_by_signature_on_top_of_the_text_report():
    records, loops = _records()
    report = build_report(records, "c.json", fleet_loops=loops)
    groups = report.fleet_signatures()
    # each record was published when its window reached 2 runs; the report follows the loop to the end of
    # each published window: all 30 runs of web_fetch (one a minute for 30 min, in 4 windows of 10 min) and
    # the 3 of exec, not the 2 a record counted when it was published
    assert [(g["tool"], g["windows"], g["runs"], g["events"]) for g in groups] == [
        ("web_fetch", 4, 30, 30), ("exec", 1, 3, 3)]
    assert [(loop["runs"], loop["events"]) for loop in loops if loop["tool"] == "exec"] == [(2, 2)]
    assert groups[0]["last_seen"] == T0 + 29 * 60_000
    lines = render_text(report).splitlines()
    start = lines.index("fleet loops: 2 signature(s) in 5 windows (the same failing call in many runs within a window)")
    assert start < lines.index("detections by detector") < lines.index("per session")
    assert lines[start + 3].split()[1:4] == ["30", "4", "30"]  # runs, windows, events of web_fetch
    top = render_text(report, top=1).splitlines()
    assert any(line.startswith("fleet loops: 2 signature(s)") and "the 1 with the most runs" in line for line in top)
    assert not any("error:exec:" in line for line in top)


def test_fleet_loops_from_verdict_files_are_computed_with_the_same_code():
    records, loops = _records()
    # verdict records name no agent: the same loops but for their agents
    computed = build_report(records, fleet=OpenClawConfig({"options": {"fleet": {"minRuns": 2}}}).fleet).fleet_loops
    strip = lambda loop: {k: v for k, v in loop.items() if k not in ("agents", "examples", "message")}
    assert [strip(x) for x in computed] == [strip(x) for x in loops]


def test_html_report_shows_the_fleet_loops_first():
    records, loops = _records()
    page = render_html(build_report(records, fleet_loops=loops), top=10)
    assert page.index('id="fleet-loops"') < page.index('Detections by detector') < page.index('id="timelines"')
    assert page.count('<tr data-signature="') == 2 and 'data-windows="4"' in page


def test_fleet_counts_of_verdict_files_follow_the_loop_after_its_first_publication():
    records, _ = _records()
    fleet = OpenClawConfig({"options": {"fleet": {"minRuns": 2}}}).fleet
    report = build_report(records, fleet=fleet)  # the loops computed from the records, as for a worker's files
    assert [(g["tool"], g["windows"], g["runs"], g["events"]) for g in report.fleet_signatures()] == [
        ("web_fetch", 4, 30, 30), ("exec", 1, 3, 3)]
    # the records themselves keep the counts of the moment they were published
    assert sorted(loop["runs"] for loop in report.fleet_loops) == [2, 2, 2, 2, 2]
    # without observations (records only), the records' own counts are what can be shown
    from streams.report.fleet_view import fleet_signatures
    assert [g["runs"] for g in fleet_signatures(report.fleet_loops)] == [8, 2]
