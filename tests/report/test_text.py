"""Text rendering of the synthetic fleet (conftest) and of a backtest comparison."""

from streams.detection.decision import set_decided_by
from streams.report import build_report, compare, render_comparison_text, render_text
from streams.report.text import table


def session_block(lines: list[str], session_id: str) -> list[str]:
    """The lines of one session's block: from its header to the next session's (or the end)."""
    start = lines.index(f"session {session_id}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("session ")), len(lines))
    return lines[start:end]


def test_table_aligns_numbers_right_and_text_left():
    assert table(["name", "n"], [["a", 1], ["bbb", 22]]) == [
        "  name   n", "  ----  --", "  a      1", "  bbb   22"]


def test_session_blocks(sensitive_records):
    text = render_text(build_report(sensitive_records, "sensitive.json"), relative_to="rec")
    lines = text.splitlines()
    assert lines[0] == "loopwatch report: 4 sessions, 5 runs, 26 calls (config: sensitive.json)"
    assert lines[1] == "paths relative to rec"
    s1 = session_block(lines, "s1")
    assert s1[:4] == ["session s1", "  file: s1.jsonl", "  1 run, 6 calls", "  detections: 3 (1 flagged: warned, blocked or aborted; 2 suppressed by OpenClaw's warning dedupe)"]
    assert "    generic_repeat             critical  1 block" in s1
    assert "    generic_repeat             warning   2 suppressed" in s1
    assert "    s1.jsonl:20  exec  generic_repeat critical block  count 5" in s1
    assert ("      CRITICAL: Called exec with identical arguments and identical outcomes 5 times. "
            "Session execution blocked to prevent runaway loops.") in s1
    assert "  1 run, 3 calls, 1 compaction" in lines
    assert "    s3.jsonl:5  read  compaction_loop_persisted critical abort  count 3" in lines
    assert "    generic_repeat             warning   1 warn, 7 suppressed" in lines
    assert "    s4.jsonl:11  exec  generic_repeat warning warn  count 10" in lines


def test_clean_session_says_none():
    records = [{"type": "tool_call", "session_id": "ok", "run_id": "r", "tool_name": "exec", "verdict": "allow",
                "detection": {"stuck": False}, "blocked": False}]
    text = render_text(build_report(records))
    assert "session ok\n  1 run, 1 call\n  detections: none\n" in text
    assert "detections by detector\n  detections: none\n" in text


def test_fleet_summary_tables(sensitive_records):
    lines = render_text(build_report(sensitive_records), relative_to="rec").splitlines()
    i = lines.index("fleet summary")
    assert lines[i + 1].split() == ["sessions", "runs", "calls", "warnings", "emitted", "warnings", "suppressed",
                                    "blocks", "aborts"]
    assert lines[i + 3].split() == ["4", "5", "26", "1", "10", "1", "1"]
    j = lines.index("detections by detector")
    body = [line.split() for line in lines[j + 3:j + 8]]
    assert body == [
        ["compaction_loop_persisted", "critical", "0", "0", "0", "1", "0", "1"],
        ["generic_repeat", "critical", "0", "0", "1", "0", "0", "1"],
        ["generic_repeat", "warning", "1", "9", "0", "0", "0", "10"],
        ["ping_pong", "warning", "0", "1", "0", "0", "0", "1"],
        ["total", "1", "10", "1", "1", "0", "13"],
    ]
    k = lines.index("per session")  # worst first: aborts, blocks, warnings emitted
    assert [line.split() for line in lines[k + 3:k + 7]] == [
        ["s3.jsonl", "1", "3", "0", "0", "0", "1"],
        ["s1.jsonl", "1", "6", "0", "2", "1", "0"],
        ["s4.jsonl", "1", "11", "1", "7", "0", "0"],
        ["s2.jsonl", "2", "6", "0", "1", "0", "0"],
    ]
    assert "fleet loops: none (no failing call seen in enough runs within a window)" in lines
    # the session blocks follow the summary, in the same order
    assert [line for line in lines if line.startswith("session ")] == ["session s3", "session s1", "session s4",
                                                                        "session s2"]
    assert lines.index("session s3") > k


def test_comparison_text(sensitive_records):
    # B: the same verdicts except that s1's block became a suppressed warning
    records_b = [dict(r) for r in sensitive_records]
    blocked = next(i for i, r in enumerate(records_b) if r.get("blocked"))
    records_b[blocked] = {**records_b[blocked], "blocked": False, "verdict": "allow",
                          "detection": {**records_b[blocked]["detection"], "level": "warning", "detector": "generic_repeat"},
                          "warning": {"emitted": False, "key": "k", "bucket": 0}}
    set_decided_by(records_b[blocked])  # what decided follows the record
    text = render_comparison_text(compare(sensitive_records, records_b, "a.json", "b.json"), relative_to="rec")
    lines = text.splitlines()
    assert lines[:2] == ["backtest: A = a.json", "          B = b.json"]
    assert lines[3:10] == [
        "                        A   B  B-A",
        "  -------------------  --  --  ---",
        "  calls                26  26   +0",
        "  warnings emitted      1   1   +0",
        "  warnings suppressed  10  11   +1",
        "  blocks                1   0   -1",
        "  aborts                1   1   +0",
    ]
    assert ["generic_repeat", "critical", "block", "1", "0", "-1"] in [line.split() for line in lines]
    assert lines[-6:] == ["events whose verdict differs: 1", "  s1.jsonl:20  exec  run r1  event s1:20:0",
                          "      A: block generic_repeat/critical 5",
                          "      B: allow, suppressed generic_repeat/warning 5", "",
                          "calls with the same verdict but another detection: 0 "
                          "(detector, level, or warned / suppressed by OpenClaw's dedupe)"]
