"""The report's summary of what decided (enforced and shadow, the fleet breaker included) and of the calls the
loops cost per tool, from the verdicts' decided_by; and events without ts counted, not silently left out."""

from __future__ import annotations

from streams.detection import Engine, OpenClawConfig
from streams.offline.replay import Replayer
from streams.report import build_report, render_text
from tests.worker.test_decisions_chain import CONFIG, call, scenario

T0 = 1_764_460_800_000


def _records() -> list[dict]:
    replayer = Replayer(Engine(OpenClawConfig(CONFIG)), key_by="run")
    events = scenario(T0) + [call("run-f9", 0, "web_fetch", {"url": "https://api/x"}, T0 + 2000, None, "HTTP 503")]
    return [replayer.apply(event) for event in events]


def _section(lines: list[str], title: str) -> list[list[str]]:
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = lines.index("", start)
    return [line.split("  ") for line in lines[start + 1:end]]


def test_what_decided_by_kind_and_rule_enforced_beside_shadow():
    records = _records()
    signature = next(r["decided_by"]["rule"] for r in records if r["run_id"] == "run-f9")
    report = build_report(records)
    decisions = report.totals.decisions
    assert decisions[("escalation", "escalation", "abort", True)] == 1
    assert decisions[("guard", "", "abort", True)] == 1
    assert decisions[("fleet", signature, "block", True)] == 1
    assert decisions[("policy", "perTool[1] tool=grep", "would_block", False)] == 1
    assert decisions[("policy", "perTool[1] tool=grep", "would_warn", False)] == 1
    assert not any(kind == "run_end" for kind, *_ in decisions)  # refusals are counted apart
    lines = render_text(report).splitlines()
    rows = {(cells[0], cells[1]): cells[2:] for cells in
            ([cell.strip() for cell in row if cell.strip()] for row in _section(lines, "what decided"))}
    assert rows[("escalation", "escalation")] == ["1 abort", "-"]
    assert rows[("policy", "perTool[1] tool=grep")] == ["-", "1 would_block, 1 would_warn"]
    assert rows[("fleet", signature)] == ["1 block", "-"]


def test_calls_in_loops_by_tool():
    report = build_report(_records())
    assert report.totals.wasted_calls == {"ran": 1, "blocked": 11, "refused": 1}
    tools = dict(report.totals.breakdown("tool"))
    assert tools["read"] == {"allow": 3, "block": 4, "abort": 1, "refused": 1}
    assert tools["web_fetch"] == {"allow": 3, "block": 1}
    lines = render_text(report).splitlines()
    i = lines.index("calls in loops, by tool, agent, model and runner (--top N each)")
    assert lines[i + 1] == "  1 call ran while a detector flagged them (warned or suppressed);"
    assert lines[i + 2] == "  11 tried and blocked or aborted; 1 tried after their run had ended"
    assert lines[i + 3] == "  tokens: the input carries no usage (Claude Code and Codex sessions do)"
    assert lines[i + 6].split() == ["read", "9", "0", "0", "4", "1", "1"]  # the most calls in loops first


def test_records_without_ts_are_counted_and_said():
    records = _records()
    untimed = [{k: v for k, v in r.items() if k != "event_ts"} if r["run_id"] == "run-f0" else r for r in records]
    report = build_report(untimed)
    assert report.without_ts == 1
    assert report.input_notes() == ["1 record of tool calls and results without an event time (ts): not counted "
                                    "in fleet loops (their windows are event time)"]
    assert build_report(records).without_ts == 0


def test_html_detector_table_has_the_shadow_column():
    from streams.report import render_html

    page = render_html(build_report(_records()))
    table = page[page.index('<table id="by-detector">'):]
    table = table[:table.index("</table>")]
    assert "<th>aborted</th><th title=\"what shadow mode would have done\">shadow</th><th>total</th>" in table
    row = table[table.index('data-detector="generic_repeat" data-level="critical"'):]
    row = row[:row.index("</tr>")]
    assert row.count("<td") == 8 and "<b>5</b>" in row  # 3 detection blocks, 1 perTool block, 1 would_block


def test_calls_in_loops_by_agent_and_runner_when_records_name_them():
    replayer = Replayer(Engine(OpenClawConfig(CONFIG)), key_by="run")
    records = []
    for agent, runner, run in (("ops", "openclaw", "r1"), ("ops", "openclaw", "r2"), ("dev", "codex", "r3")):
        for i in range(6):
            event = {**call(run, i, "read", {"path": "/a"}, T0 + i), "agent_id": agent, "runner": runner}
            records.append(replayer.apply(event))
    assert records[0]["agent_id"] == "ops" and records[0]["runner"] == "openclaw"
    totals = build_report(records).totals
    agents = dict(totals.breakdown("agent"))
    assert agents["ops"] == {"allow": 6, "block": 6} and agents["dev"] == {"allow": 3, "block": 3}
    assert dict(totals.breakdown("runner"))["codex"] == {"allow": 3, "block": 3}
    lines = render_text(build_report(records)).splitlines()
    i = lines.index("  by agent:")
    assert lines[i + 3].split() == ["ops", "12", "0", "0", "6", "0", "0"]
    assert "  by runner:" in lines
    assert "  by agent:" not in render_text(build_report(_records()))  # no record names an agent


def test_fleet_loops_of_verdict_files_name_the_agents():
    from streams.detection.fleet import FleetSettings

    replayer = Replayer(Engine(OpenClawConfig({})), key_by="run")
    records = [replayer.apply({**call(f"f{n}", 0, "web_fetch", {"url": "u"}, T0 + n, None, "HTTP 503"),
                               "agent_id": f"agent-{n % 2}"}) for n in range(3)]
    [loop] = build_report(records, fleet=FleetSettings(min_runs=3)).fleet_loops
    assert loop["agents"] == ["agent-0", "agent-1"]
