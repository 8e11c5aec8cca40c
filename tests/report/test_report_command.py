"""``loopwatch report`` end to end with click's test runner, on the synthetic fleet (conftest)."""

import json

from click.testing import CliRunner

from streams.commands.replay import replay
from streams.commands.report import report


def _run(*args):
    return CliRunner().invoke(report, [str(a) for a in args])


def test_over_replay_output_equals_over_events(events_file, sensitive_config, tmp_path):
    verdicts = tmp_path / "verdicts.jsonl"
    res = CliRunner().invoke(replay, ["-q", "--config", str(sensitive_config), "-o", str(verdicts), str(events_file)])
    assert res.exit_code == 0, res.output
    from_verdicts = _run(verdicts)
    from_events = _run("--format", "events", "--config", sensitive_config, events_file)
    assert from_verdicts.exit_code == from_events.exit_code == 0, from_verdicts.output + from_events.output
    # same body; only the header's config label differs
    assert from_verdicts.stdout.splitlines()[1:] == from_events.stdout.splitlines()[1:]
    assert from_events.stdout.splitlines()[0] == (
        f"loopwatch report: 4 sessions, 5 runs, 26 calls (config: {sensitive_config})")
    assert "    s1.jsonl:20  exec  generic_repeat critical block  count 5" in from_events.stdout


def test_default_config_has_rolling_detectors_off(events_file):
    res = _run("--format", "events", events_file)
    assert res.exit_code == 0, res.output
    # only the post-compaction guard (on by default) fires
    assert "compaction_loop_persisted  critical  1 abort" in res.stdout
    assert "generic_repeat" not in res.stdout and "ping_pong" not in res.stdout


def test_compare(events_file, sensitive_config, defaults_on_config):
    res = _run("--format", "events", "--config", sensitive_config, "--compare", defaults_on_config, events_file)
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert f"backtest: A = {sensitive_config}\n          B = {defaults_on_config}\n" in out
    lines = out.splitlines()
    rows = [line.split() for line in lines]
    assert ["blocks", "1", "0", "-1"] in rows
    assert ["warnings", "suppressed", "10", "0", "-10"] in rows
    assert ["generic_repeat", "warning", "warn", "1", "1", "+0"] in rows  # count 10 warns under both
    assert "events whose verdict differs: 11" in lines
    i = lines.index("  s1.jsonl:20  exec")
    assert lines[i + 1:i + 3] == ["      A: block generic_repeat/critical 5", "      B: allow"]
    assert "  s2.jsonl:7  read" in lines  # the ping-pong warning exists only under A


def test_html_file(events_file, sensitive_config, tmp_path):
    page = tmp_path / "r.html"
    res = _run("--format", "events", "--config", sensitive_config, "-q", "--html", page, events_file)
    assert res.exit_code == 0, res.output
    assert res.stdout == ""
    html = page.read_text()
    assert html.count('<span class="c st-') == 26
    assert html.count('data-status="block"') == 1 and html.count('data-status="abort"') == 1
    assert "http://" not in html and "https://" not in html and "<link" not in html  # self-contained


def test_config_with_verdict_files_is_a_usage_error(events_file, sensitive_config):
    res = _run("--config", sensitive_config, events_file)
    assert res.exit_code == 2
    assert "--config and --compare replay events" in res.output


def test_invalid_config_exits_2(events_file, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tools": {"loopDetection": {"warningThreshold": "three"}}}))
    res = _run("--format", "events", "--config", bad, events_file)
    assert res.exit_code == 2
    assert "invalid configuration" in res.stderr


def test_bad_verdict_lines_are_reported_and_skipped(tmp_path):
    f = tmp_path / "v.jsonl"
    good = {"type": "tool_call", "session_id": "s", "run_id": "r", "tool_name": "exec", "verdict": "allow",
            "detection": {"stuck": False}, "blocked": False}
    f.write_text(json.dumps(good) + "\nnot json\n" + json.dumps({"no": "verdict"}) + "\n")
    res = _run(f)
    assert res.exit_code == 0
    assert f"{f}:2: skipped: not JSON" in res.stderr
    assert f"{f}:3: skipped: not a verdict record" in res.stderr
    assert res.stdout.splitlines()[:2] == ["loopwatch report: 1 session, 1 run, 1 call", "2 bad records skipped"]


def test_session_format_runs_the_importer():
    from pathlib import Path

    fixture = Path(__file__).resolve().parents[1] / "importers" / "fixtures" / "swe-agent"
    res = _run("--format", "swe-agent", fixture)
    assert res.exit_code == 0, res.output
    assert "loopwatch report: 1 session, 1 run, 3 calls" in res.stdout
    assert "demo__repo-1.traj" in res.stdout


def test_html_with_backtest(events_file, sensitive_config, defaults_on_config, tmp_path):
    page = tmp_path / "cmp.html"
    res = _run("--format", "events", "--config", sensitive_config, "--compare", defaults_on_config, "-q",
               "--html", page, events_file)
    assert res.exit_code == 0, res.output
    html = page.read_text()
    table = html[html.index('<table id="compare-differences">'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 1 + 11
    assert "<td>warnings suppressed</td><td>10</td><td>0</td><td>-10</td>" in html
    assert '<td class="l">block generic_repeat/critical 5</td><td class="l">allow</td>' in table
