"""What an operator asks of a report: loops over time, what the loops cost in calls and tokens, and a
backtest grouped by run with shadow and fleet breaker results beside the totals."""

from __future__ import annotations

import re

from streams.detection import Engine, OpenClawConfig
from streams.offline.replay import Replayer
from streams.report import build_report, compare, render_comparison_text, render_html, render_text
from streams.report.over_time import OverTime, sparkline
from tests.report.conftest import SENSITIVE

T0 = 1_764_460_800_000  # 2025-11-30 00:00 UTC
MIN = 60_000


def _replay(events, config=SENSITIVE):
    replayer = Replayer(Engine(OpenClawConfig(config)), key_by="run")
    return [replayer.apply(event, event["event_id"]) for event in events]


def _same(i, ts=None, **extra):
    """The i-th identical exec call of run r1 (same args, same result): under SENSITIVE calls 4-5 are
    suppressed warnings, 6 and later blocked."""
    event = {"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": f"c{i}", "tool_name": "exec",
             "args": {"command": "ls"}, "result": "a.txt", "error": None, "event_id": f"e{i}", **extra}
    if ts is not None:
        event["ts"] = ts
    return event


def test_loops_over_time_in_text_and_html():
    # one call every 10 min for 70 min, the last one without ts: 5 min a bucket, every other one empty
    records = _replay([_same(i, T0 + i * 10 * MIN + 5_000) for i in range(8)] + [_same(8)])
    report = build_report(records)
    step, buckets = report.over_time.buckets()
    assert step == 300 and [start for start, _ in buckets] == [T0 + k * 5 * MIN for k in range(15)]
    assert [dict(c) for _, c in buckets[::2]] == [{"calls": 1}] * 3 + [{"calls": 1, "suppressed": 1}] * 2 + [
        {"calls": 1, "block": 1}] * 3
    assert not any(c for _, c in buckets[1::2])
    lines = render_text(report).splitlines()
    i = lines.index("loops over time (UTC 2025-11-30 00:00 to 01:15, one column per 5 min)")
    assert lines[i + 1:i + 6] == ["  calls     █ █ █ █ █ █ █ █  peak 1 at 00:00",
                                  "  in loops        █ █ █ █ █  peak 1 at 00:30",
                                  "  blocked             █ █ █  peak 1 at 00:50",
                                  "  aborted   " + " " * 15 + "  none",  # one column per bucket
                                  "  (1 record without an event time not in it)"]
    page = render_html(report)
    assert '<svg id="over-time" class="chart"' in page and 'data-buckets="15" data-step="300"' in page
    assert [int(part.split('"')[0]) for part in page.split('data-loops="')[1:]] == [0] * 6 + [1, 0] * 4 + [1]
    # a short input gets buckets of seconds
    short = build_report(_replay([_same(i, T0 + i * 1000) for i in range(8)]))
    assert short.over_time.buckets()[0] == 1
    assert "loops over time (UTC 2025-11-30 00:00:00 to 00:00:08, one column per 1 s)" in render_text(short)


def test_over_time_buckets_get_wider_for_longer_spans():
    over = OverTime()
    for minute in (0, 1, 299, 300):
        over.add(T0 + minute * MIN, "block" if minute == 300 else "allow")
    step, buckets = over.buckets()
    assert step == 900 and len(buckets) == 21  # 5 h: 15 min a bucket (5 min would be 61 buckets > 48)
    assert dict(buckets[0][1]) == {"calls": 2} and dict(buckets[-1][1]) == {"calls": 1, "block": 1}
    assert all(not counts for _, counts in buckets[1:-2])  # empty buckets are there, with nothing in them
    over.restatus(T0 + 300 * MIN, "block", "allow")  # a late result: the call ran
    assert dict(over.buckets()[1][-1][1]) == {"calls": 1, "block": 0}
    assert sparkline([0, 1, 4, 8]) == " ▁▄█" and sparkline([0, 0]) == "  "


def test_wasted_tokens_are_shares_of_the_turns_of_wasted_calls():
    usage = {0: ("t0", 1000, 0, 100), 1: ("t0", 1000, 0, 100), 2: ("t2", 100, 50, 10), 3: ("t2", 100, 50, 10),
             4: ("t4", 100, 50, 10), 5: ("t5", 100, 50, 10)}
    events = [_same(i, T0 + i, model="claude-x", **({"usage": {"turn": usage[i][0], "input_tokens": usage[i][1],
                                                                "cached_input_tokens": usage[i][2],
                                                                "output_tokens": usage[i][3]}} if i in usage else {}))
              for i in range(7)]
    records = _replay(events)
    assert [r["verdict"] for r in records] == ["allow"] * 5 + ["block"] * 2
    assert [r.get("usage", {}).get("turn") for r in records] == ["t0", "t0", "t2", "t2", "t4", "t5", None]
    report = build_report(records)
    cost = report.usage.estimate()
    # wasted: call 4 (suppressed; half of t2), call 5 (suppressed; all of t4), call 6 (blocked; all of t5),
    # call 7 (blocked; no usage)
    assert cost == {"turns": 4, "calls": 6, "input": 1300, "cached": 150, "output": 130, "wasted_calls": 3,
                    "tokens": 1430, "wasted": 275, "wasted_input": 250, "wasted_cached": 125, "wasted_output": 25,
                    "wasted_without_usage": 1}
    text = render_text(report)
    assert ("  tokens spent on them: ~275 (19.2 % of 1,430): 25 written, 250 read (125 from the prompt cache); "
            "each call an equal share of its model turn's usage; 1 wasted call(s) carry no usage") in text
    [(model, counts)] = report.totals.breakdown("model")
    assert (model, dict(counts)) == ("claude-x", {"allow": 3, "suppressed": 2, "block": 2})
    page = render_html(report)
    assert '<li id="wasted-tokens" data-tokens="275">' in page and '<table id="by-model" class="by">' in page


def test_backtest_by_run_with_shadow_and_breaker_beside_the_totals(sensitive_records):
    from streams.detection.decision import set_decided_by
    from tests.report.test_decisions_summary import _records

    # B: the block of r1 became a suppressed warning; r5's last warning a shadow finding that decided nothing
    records_b = [dict(r) for r in sensitive_records]
    blocked = next(i for i, r in enumerate(records_b) if r.get("blocked"))
    records_b[blocked] = {**records_b[blocked], "blocked": False, "verdict": "allow",
                          "detection": {**records_b[blocked]["detection"], "level": "warning"},
                          "warning": {"emitted": False, "key": "k", "bucket": 0}}
    set_decided_by(records_b[blocked])
    comparison = compare(sensitive_records, records_b, "a.json", "b.json")
    rows = comparison.run_rows()
    assert [(r["run"], r["session"], r["calls"], dict(r["a"]), dict(r["b"]), r["differences"]) for r in rows] == [
        ("r1", "s1", 6, {"suppressed": 2, "block": 1}, {"suppressed": 3}, 1)]
    lines = render_comparison_text(comparison).splitlines()
    i = lines.index("runs whose outcome differs: 1 (calls by what happened to them, shadow findings, fleet breaker "
                    "blocks; the most differing events first)")
    assert re.split(r"\s{2,}", lines[i + 3].strip()) == ["r1", "s1", "6", "2 suppressed, 1 block", "3 suppressed", "1"]
    # shadow findings and the fleet breaker's blocks in the same summary as the totals
    records = _records()
    both = compare(records, records, "a", "b")
    assert [row for row in both.total_rows() if row[0] not in ("calls", "warnings emitted", "warnings suppressed",
                                                              "blocks", "aborts")] == [
        ("refused (run ended)", 1, 1), ("shadow findings (would have)", 2, 2), ("fleet breaker blocks", 1, 1)]
    assert both.run_rows() == []
    page = render_html(comparison.a, comparison)
    assert '<table id="compare-runs">' in page and 'data-run="r1" data-differences="1"' in page


def test_recorded_sessions_carry_model_and_usage_into_the_wasted_tokens():
    from pathlib import Path

    from streams.importers import read_files, session_files

    runners = Path(__file__).resolve().parents[1] / "fixtures" / "runners"
    events = list(read_files(session_files("auto", [runners / "codex-compaction.jsonl",
                                                    runners / "claude-code-escalation.jsonl"])))
    calls = [e for e in events if e["type"] == "tool_call"]
    # Codex: the model of the turn context, the usage of the token_count after the call; Claude Code: the
    # message's model and its last record's usage (cache reads and writes in the input)
    assert {(e["runner"], e["model"]) for e in calls} == {("codex", "e2e-model"), ("claude-code", "claude-opus-5-5")}
    codex = [e["usage"] for e in calls if e["runner"] == "codex"]
    assert codex[2] == {"turn": "token_count@24", "input_tokens": 250_000, "cached_input_tokens": 0,
                        "output_tokens": 5}
    assert all(e["usage"]["turn"].startswith("msg_") for e in calls if e["runner"] == "claude-code")
    report = build_report(_replay(events, {}))
    # the guard aborts the Codex run after the compaction, its 4 later calls are refused: 5 wasted calls
    # of one turn each (10 read, 5 written)
    assert report.totals.wasted_calls == {"ran": 0, "blocked": 1, "refused": 4}
    cost = report.usage.estimate()
    assert (cost["wasted"], cost["wasted_input"], cost["wasted_output"], cost["wasted_without_usage"]) == (75, 50, 25, 0)
    assert cost["tokens"] == sum(e["usage"]["input_tokens"] + e["usage"]["output_tokens"] for e in calls)
    spark = {line.split()[0]: line for line in render_text(report).splitlines()
             if line.startswith("  ") and ("peak" in line or line.endswith("none"))}
    assert spark["aborted"].endswith("peak 1 at 08:02") and spark["refused"].endswith("peak 4 at 08:02")
