"""``loopwatch report`` end to end with click's test runner, on the synthetic fleet (conftest)."""

import json

import pytest

from click.testing import CliRunner

from streams.commands.replay import replay
from streams.commands.report import report


def session_block(lines: list[str], session_id: str) -> list[str]:
    """The lines of one session's block: from its header to the next session's (or the end)."""
    start = lines.index(f"session {session_id}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("session ")), len(lines))
    return lines[start:end]


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
    # only s1's block changes what the runner does; the 10 warnings suppressed under A are allow under both
    i = lines.index("events whose verdict differs: 1")
    assert lines[i + 1:i + 4] == ["  s1.jsonl:20  exec  run r1  event s1:20:0",
                                  "      A: block generic_repeat/critical 5", "      B: allow"]
    j = lines.index("calls with the same verdict but another detection: 10 "
                    "(detector, level, or warned / suppressed by OpenClaw's dedupe)")
    assert j == i + 5
    assert lines[j + 1:j + 4] == ["  s1.jsonl:16  exec  run r1  event s1:16:0",
                                  "      A: allow, suppressed generic_repeat/warning 3", "      B: allow"]
    k = lines.index("  s2.jsonl:7  read  run r3  event s2:7:0")  # the ping-pong warning exists only under A
    assert lines[k + 1:k + 3] == ["      A: allow, suppressed ping_pong/warning 3", "      B: allow"]
    assert len(lines) == j + 1 + 3 * 10


def test_html_file(events_file, sensitive_config, tmp_path):
    page = tmp_path / "r.html"
    res = _run("--format", "events", "--config", sensitive_config, "-q", "--html", page, events_file)
    assert res.exit_code == 0, res.output
    assert res.stdout == ""
    html = page.read_text()
    assert html.count('<span class="c st-') == 26
    assert html.count('data-status="block"') == 1 and html.count('data-status="abort"') == 1
    assert "http://" not in html and "https://" not in html and "<link" not in html  # self-contained


def test_html_names_the_config_only_when_it_replayed_events(events_file, sensitive_config, worker_verdicts,
                                                            tmp_path):
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text("".join(json.dumps(v) + "\n" for v in worker_verdicts))
    subtitles = {}
    for name, args in {"verdicts": [verdicts], "events": ["--format", "events", events_file],
                       "events-config": ["--format", "events", "--config", sensitive_config, events_file]}.items():
        page = tmp_path / f"{name}.html"
        assert _run("-q", "--html", page, *args).exit_code == 0
        html = page.read_text()
        subtitles[name] = html[html.index('<p class="sub">') + 15:].split(" · ")[0].split("</p>")[0]
    assert subtitles == {"verdicts": "verdicts as recorded", "events": "config: OpenClaw defaults",
                         "events-config": f"config: {sensitive_config}"}


def test_config_with_verdict_files_gives_the_fleet_settings(tmp_path):
    """Verdict files are decided already; --config gives the fleet view's options.fleet, as the worker had them."""
    from streams.detection import Engine, OpenClawConfig
    from streams.offline.replay import Replayer

    replayer = Replayer(Engine(OpenClawConfig({})), key_by="run")
    t0 = 1_764_460_800_000
    records = [replayer.apply({"type": "tool_call", "run_id": f"r{n}", "session_id": f"s{n}", "tool_call_id": "c",
                               "tool_name": "web_fetch", "args": {"url": "u"}, "result": None,
                               "error": "HTTP 503", "ts": t0 + n, "event_id": f"e{n}"}) for n in range(3)]
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text("".join(json.dumps(r) + "\n" for r in records))
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({"options": {"fleet": {"minRuns": 3}}}))
    plain = _run(verdicts)
    assert plain.exit_code == 0 and "fleet loops: none" in plain.stdout  # default minRuns 5
    res = _run("--config", config, verdicts)
    assert res.exit_code == 0, res.output
    assert "fleet loops: none" not in res.stdout and "error:web_fetch:" in res.stdout
    assert _run("--compare", config, verdicts).exit_code == 2


@pytest.mark.parametrize("value", ["false", "true"])
def test_config_validate_with_verdict_files_is_said_to_be_ignored(worker_verdicts, tmp_path, value):
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text("".join(json.dumps(v) + "\n" for v in worker_verdicts))
    plain = _run(verdicts)
    res = _run("--config-validate", value, verdicts)
    assert res.exit_code == plain.exit_code == 0, res.output
    assert res.stdout == plain.stdout
    assert res.stderr == plain.stderr + (
        "loopwatch report: --config-validate ignored: verdict files are reported as recorded "
        "(it applies when --format events or a session format replays events)\n")
    # The worker's environment variable is no request of the user's: nothing said.
    from_env = CliRunner().invoke(report, [str(verdicts)], env={"LOOPWATCH_CONFIG_VALIDATE": value})
    assert (from_env.exit_code, from_env.stdout, from_env.stderr) == (0, plain.stdout, plain.stderr)


def test_the_workers_config_variable_does_not_stop_a_report_of_verdict_files(worker_verdicts, tmp_path):
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text("".join(json.dumps(v) + "\n" for v in worker_verdicts))
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({"tools": {"loopDetection": {"enabled": True}}}))
    plain = _run(verdicts)
    from_env = CliRunner().invoke(report, [str(verdicts)], env={"LOOPWATCH_CONFIG": str(config)})
    assert (from_env.exit_code, from_env.stdout) == (0, plain.stdout)
    typed = _run("--config", config, verdicts)  # typed: its fleet settings (none here: the defaults)
    assert (typed.exit_code, typed.stdout) == (0, plain.stdout)


def test_invalid_config_exits_2(events_file, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tools": {"loopDetection": {"warningThreshold": "three"}}}))
    res = _run("--format", "events", "--config", bad, events_file)
    assert res.exit_code == 2
    assert "invalid configuration" in res.stderr


def test_config_validate_false_loads_a_config_strict_validation_refuses(events_file, sensitive_config, tmp_path):
    lenient = tmp_path / "lenient.json"  # criticalThreshold not above warningThreshold: OpenClaw refuses it at load
    lenient.write_text("{tools: {loopDetection: {enabled: true, warningThreshold: 4, criticalThreshold: 4}}}")
    refused = _run("--format", "events", "--config", lenient, events_file)
    assert refused.exit_code == 2 and refused.stdout == ""
    assert refused.stderr == ("loopwatch: invalid configuration:\n"
                              f"{lenient}: tools.loopDetection.criticalThreshold: "
                              "tools.loopDetection.warningThreshold must be lower than criticalThreshold.\n")
    as_b = _run("--format", "events", "--config", sensitive_config, "--compare", lenient, events_file)
    assert as_b.exit_code == 2 and "invalid configuration" in as_b.stderr

    res = _run("--format", "events", "--config", lenient, "--config-validate", "false", events_file)
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0] == f"loopwatch report: 4 sessions, 5 runs, 26 calls (config: {lenient})"
    # criticalThreshold raised to warning + 1 (5), as OpenClaw does at runtime
    assert "    s1.jsonl:20  exec  generic_repeat critical block  count 5" in res.stdout
    assert "    s1.jsonl:18  exec  generic_repeat warning suppressed  count 4" in res.stdout
    rows = [line.split() for line in res.stdout.splitlines()]
    assert ["generic_repeat", "critical", "0", "0", "1", "0", "0", "1"] in rows
    assert ["generic_repeat", "warning", "1", "7", "0", "0", "0", "8"] in rows

    backtest = _run("--format", "events", "--config", sensitive_config, "--compare", lenient,
                    "--config-validate", "false", events_file)
    assert backtest.exit_code == 0, backtest.output
    assert f"backtest: A = {sensitive_config}\n          B = {lenient}\n" in backtest.stdout
    assert "events whose verdict differs: 0" in backtest.stdout.splitlines()


def test_bad_verdict_lines_are_reported_and_skipped(tmp_path):
    f = tmp_path / "v.jsonl"
    good = {"type": "tool_call", "session_id": "s", "run_id": "r", "tool_name": "exec", "verdict": "allow",
            "detection": {"stuck": False}, "blocked": False}
    f.write_text(json.dumps(good) + "\nnot json\n" + json.dumps({"no": "verdict"}) + "\n")
    res = _run(f)
    assert res.exit_code == 1
    assert f"{f}:2: skipped: invalid JSON" in res.stderr
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
    assert table.count("<tr>") == 1 + 1
    assert "<td>warnings suppressed</td><td>10</td><td>0</td><td>-10</td>" in html
    assert ('<td class="mono">s1.jsonl:20</td><td class="l">exec</td><td class="l mono">r1</td>'
            '<td class="l mono">s1:20:0</td><td class="l">block generic_repeat/critical 5</td><td class="l">allow</td>'
            ) in table
    assert "<h2>Calls with the same verdict but another detection (10)</h2>" in html
    same = html[html.index('<table id="compare-detection-differences">'):]
    same = same[:same.index("</table>")]
    assert same.count("<tr>") == 1 + 10
    assert '<td class="l">allow, suppressed ping_pong/warning 3</td><td class="l">allow</td>' in same


def _without_source(events_file, tmp_path):
    plain = tmp_path / "fleet.jsonl"
    plain.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "source"}) + "\n"
                             for line in events_file.read_text().splitlines()))
    return plain


def test_event_file_lines_are_shown(events_file, sensitive_config, tmp_path):
    # events without a recorded-session source: each call is shown at its line of the event file
    plain = _without_source(events_file, tmp_path)
    res = _run("--format", "events", "--config", sensitive_config, plain)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[1] == f"paths relative to {tmp_path}"
    s1 = session_block(lines, "s1")
    assert s1[:3] == ["session s1", "  file: fleet.jsonl", "  1 run, 6 calls"]
    assert [line for line in s1 if line.startswith("    fleet.jsonl:")] == [
        "    fleet.jsonl:4  exec  generic_repeat warning suppressed  count 3",
        "    fleet.jsonl:5  exec  generic_repeat warning suppressed  count 4",
        "    fleet.jsonl:6  exec  generic_repeat critical block  count 5",
    ]
    assert "    fleet.jsonl:16  read  compaction_loop_persisted critical abort  count 3" in lines
    # the sessions share the file: the per-session table names them by id
    k = lines.index("per session")
    assert [line.split()[0] for line in lines[k + 3:k + 7]] == ["s3", "s1", "s4", "s2"]  # worst first
    # standard input
    res = CliRunner().invoke(report, ["--format", "events", "--config", str(sensitive_config), "-"],
                             input=plain.read_text())
    assert res.exit_code == 0, res.output
    assert "    <stdin>:6  exec  generic_repeat critical block  count 5" in res.stdout.splitlines()


def test_compare_names_the_event_file_line(events_file, sensitive_config, defaults_on_config, tmp_path):
    plain = _without_source(events_file, tmp_path)
    res = _run("--format", "events", "--config", sensitive_config, "--compare", defaults_on_config, plain)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    i = lines.index("events whose verdict differs: 1")
    assert lines[i + 1] == "  fleet.jsonl:6  exec  run r1  event s1:20:0"


def test_an_event_file_given_as_verdicts_is_said_once(tmp_path, events_file):
    for path in (events_file, tmp_path / "fleet.msgpack"):
        if path.suffix == ".msgpack":
            import msgpack

            path.write_bytes(b"".join(msgpack.packb(json.loads(line)) for line in events_file.read_text().splitlines()))
        res = _run(path)
        assert res.exit_code == 2
        assert "skipped" not in res.output
        assert res.stderr.splitlines()[-1] == (
            f"Error: {path} holds events, not verdicts (its first record is a tool_call event): "
            "give --format events to replay them (with --config for your loop detection)")


def _verdict_file_with_bad_lines(tmp_path, good_lines, bad_lines, name="v.jsonl"):
    f = tmp_path / name
    good = {"type": "tool_call", "session_id": "s", "run_id": "r", "tool_name": "exec", "verdict": "allow",
            "detection": {"stuck": False}, "blocked": False}
    f.write_text("".join(json.dumps({**good, "event_id": f"e{n}"}) + "\n" for n in range(good_lines))
                 + "".join(json.dumps({"line": n}) + "\n" for n in range(bad_lines)))
    return f


@pytest.mark.parametrize("good, bad", [(1, 12), (3, 15)])
def test_only_the_first_bad_lines_of_a_file_are_listed(tmp_path, good, bad):
    f = _verdict_file_with_bad_lines(tmp_path, good, bad)
    res = _run(f)
    assert res.exit_code == 1, res.output
    assert res.stderr.splitlines() == [
        *(f"loopwatch report: {f}:{n}: skipped: not a verdict record (an object with a 'verdict' field)"
          for n in range(good + 1, good + 11)),
        f"loopwatch report: {bad - 10} more skipped record(s) not listed",
    ]
    calls = "1 call" if good == 1 else f"{good} calls"
    assert res.stdout.splitlines()[:2] == [f"loopwatch report: 1 session, 1 run, {calls}",
                                           f"{bad} bad records skipped"]


def test_skipped_records_across_files_share_one_cap(tmp_path):
    b = _verdict_file_with_bad_lines(tmp_path, 1, 8, "a.jsonl")
    c = _verdict_file_with_bad_lines(tmp_path, 1, 8, "b.jsonl")
    res = _run(b, c)
    assert res.exit_code == 1, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 11 and lines[-1] == "loopwatch report: 6 more skipped record(s) not listed"
    assert lines[7] == f"loopwatch report: {b}:9: skipped: not a verdict record (an object with a 'verdict' field)"
    assert lines[8] == f"loopwatch report: {c}:2: skipped: not a verdict record (an object with a 'verdict' field)"


def test_a_bad_event_line_exits_1_with_the_report(events_file, sensitive_config, tmp_path):
    f = tmp_path / "events.jsonl"
    f.write_text(events_file.read_text() + "not json\n")
    res = _run("--format", "events", "--config", sensitive_config, f)
    assert res.exit_code == 1, res.output
    line, settings = res.stderr.splitlines()  # the events are read, then replayed
    assert settings.startswith(f"loopwatch report: config {sensitive_config}: loopDetection enabled=true, ")
    assert line.startswith(f"loopwatch report: {f}:{len(events_file.read_text().splitlines()) + 1}: "
                           "skipped: invalid JSON")
    assert "1 bad record skipped" in res.stdout


def _loop_events(path):
    """A read loop (22 identical calls) and a fetch whose two URLs fail alike (5 + 6 thrown errors)."""
    events = [{"type": "tool_call", "event_id": f"read-{n}", "run_id": "r1", "session_id": "s1",
               "tool_call_id": f"c{n}", "tool_name": "read", "args": {"path": "/a"},
               "result": {"content": [{"type": "text", "text": "same"}]}, "error": None} for n in range(22)]
    events += [{"type": "tool_call", "event_id": f"fetch-{n}", "run_id": "r2", "session_id": "s2",
                "tool_call_id": f"f{n}", "tool_name": "web_fetch", "args": {"url": "https://a" if n < 5 else "https://b"},
                "result": None, "error": "HTTP 503"} for n in range(11)]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_compare_profile_backtests_2026_9_6_on_the_same_events(defaults_on_config, tmp_path):
    events = _loop_events(tmp_path / "loops.jsonl")
    res = _run("--format", "events", "--config", defaults_on_config, "--compare-profile", "openclaw-2026.9.6", events)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert f"backtest: A = {defaults_on_config} [openclaw-2026.7]" in lines
    assert f"          B = {defaults_on_config} [openclaw-2026.9.6]" in lines
    rows = [line.split() for line in lines]
    assert ["aborts", "0", "1", "+1"] in rows  # the second critical ends the run under 2026.9.6
    assert ["argument_churn", "warning", "warn", "0", "1", "+1"] in rows
    i = lines.index("events whose verdict differs: 2")
    assert lines[i + 1:i + 7] == [
        "  loops.jsonl:22  read  run r1  event read-21",
        "      A: block generic_repeat/critical 20", "      B: abort generic_repeat/critical 21 (run stopped)",
        "  loops.jsonl:33  web_fetch  run r2  event fetch-10",
        "      A: allow", "      B: warn argument_churn/warning 10"]


def test_profile_option_refuses_threshold_keys_under_2026_9_6(sensitive_config, events_file):
    res = _run("--format", "events", "--config", sensitive_config, "--profile", "openclaw-2026.9.6", events_file)
    assert res.exit_code == 2
    assert "profile openclaw-2026.9.6 reads only 'enabled'" in res.output


def test_compare_profile_says_which_keys_it_ignores(sensitive_config, events_file):
    res = _run("--format", "events", "--config", sensitive_config, "--compare-profile", "openclaw-2026.9.6",
               events_file)
    assert res.exit_code == 0, res.output
    assert "under openclaw-2026.9.6 the keys warningThreshold, criticalThreshold" in res.stderr


def test_profile_options_need_events(events_file):
    res = _run("--compare-profile", "openclaw-2026.9.6", events_file)
    assert res.exit_code == 2 and "--compare replays events (so do --profile and --compare-profile)" in res.output


def test_the_gateways_readyz_probes_are_left_out_and_said(events_file, sensitive_config, tmp_path):
    """A verdicts topic holds the gateway's /readyz probes (a compaction_retry of run and session
    loopwatch-gateway-readyz, streams.wire.verdicts.PROBE_RUN) among the agents' verdicts: no agent's work."""
    plain = tmp_path / "verdicts.jsonl"
    res = CliRunner().invoke(replay, ["-q", "--config", str(sensitive_config), "-o", str(plain), str(events_file)])
    assert res.exit_code == 0, res.output
    probe = {"type": "compaction_retry", "run_id": "loopwatch-gateway-readyz",
             "session_id": "loopwatch-gateway-readyz", "agent_id": "loopwatch-gateway"}
    probes = tmp_path / "probes.jsonl"
    probes.write_text(json.dumps({**probe, "event_id": "p1"}) + "\n" + json.dumps({**probe, "event_id": "p2"}) + "\n")
    with_probes = tmp_path / "with-probes.jsonl"
    res = CliRunner().invoke(replay, ["-q", "--config", str(sensitive_config), "-o", str(with_probes),
                                      str(probes), str(events_file)])
    assert res.exit_code == 0, res.output
    assert sum("loopwatch-gateway-readyz" in line for line in with_probes.read_text().splitlines()) == 2
    without, mixed = _run(plain), _run(with_probes)
    assert without.exit_code == mixed.exit_code == 0, mixed.output
    note = "2 verdicts of the gateway's /readyz probes (run loopwatch-gateway-readyz) left out: no agent's work"
    assert [line for line in mixed.stdout.splitlines() if "readyz" in line] == [note]
    assert mixed.stdout.splitlines()[0] == without.stdout.splitlines()[0] == (
        "loopwatch report: 4 sessions, 5 runs, 26 calls")
    from_events = _run("--format", "events", probes, events_file)
    assert from_events.stdout.splitlines()[0].startswith("loopwatch report: 4 sessions, 5 runs, 26 calls")
    assert note in from_events.stdout
    html = tmp_path / "report.html"
    assert _run("--html", html, with_probes).exit_code == 0
    assert html.read_text().count("loopwatch-gateway-readyz") == 1  # the note; no session of it
