"""Worker verdicts read back with ``loopwatch tail verdicts --json``: one published again after a crash counts once.

The records are the worker's own for the synthetic fleet (conftest ``worker_verdicts``), each
line prefixed as ``tail --json`` does with the verdict's partition, offset and timestamp on the
verdicts topic -- the only bytes that differ when the worker publishes a verdict again (README:
"a verdict may be published again, byte for byte the same").
"""

import json

from click.testing import CliRunner

from streams.commands.replay import replay
from streams.commands.report import report
from streams.report import build_report

REPEATED_NOTE = ("repeated verdict records ignored (published again by the worker after a restart: "
                 "same source topic/partition/offset, same content)")


def published_again(records: list[dict], last: int) -> list[dict]:
    """``records`` then their ``last`` ones again, at the next offsets of the verdicts topic, 5 s later."""
    ends = {}
    for r in records:
        ends[r["partition"]] = max(ends.get(r["partition"], -1), r["offset"])
    again = []
    for r in records[-last:]:
        ends[r["partition"]] += 1
        again.append({**r, "offset": ends[r["partition"]], "timestamp": r["timestamp"] + 5000})
    return records + again


def _write(path, records):
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


def _report(*args):
    return CliRunner().invoke(report, [str(a) for a in args])


def test_a_verdict_published_again_counts_once(tmp_path, worker_verdicts, events_file, sensitive_config):
    records = published_again(worker_verdicts, 9)
    assert len(records) == 27 + 9  # 26 calls and a compaction, 9 of them twice (s4's run: 9 calls)
    res = _report(_write(tmp_path / "v.jsonl", records))
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[:3] == ["loopwatch report: 4 sessions, 5 runs, 26 calls", "paths relative to rec",
                         f"9 {REPEATED_NOTE}"]
    i = lines.index("fleet summary")
    assert lines[i + 3].split() == ["4", "5", "26", "1", "10", "1", "1"]
    # the same report as the fleet's events replayed here with the worker's keying: the worker keeps
    # each event's own source (file:line) in event_source, and that is what the detections show
    replayed = _report("--format", "events", "--key-by", "run", "--config", sensitive_config, events_file)
    assert lines[3:] == replayed.stdout.splitlines()[2:]
    assert "    s1.jsonl:20  exec  generic_repeat critical block  count 5" in lines


def test_repeats_across_two_tail_files(tmp_path, worker_verdicts):
    records = worker_verdicts
    first = _write(tmp_path / "a.jsonl", records[:20])
    second = _write(tmp_path / "b.jsonl", published_again(records, 12)[20:])  # 7 new, then 12 again
    res = _report(first, second)
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[:3] == ["loopwatch report: 4 sessions, 5 runs, 26 calls",
                                           "paths relative to rec", f"12 {REPEATED_NOTE}"]


def test_same_source_other_content_is_counted_and_said(worker_verdicts):
    records = worker_verdicts
    blocked = next(r for r in records if r.get("blocked"))
    # e.g. re-applied after a restart under another configuration: not the same verdict
    other = {**blocked, "offset": blocked["offset"] + 100, "verdict": "allow", "blocked": False,
             "warning": {"emitted": False, "key": "k", "bucket": 0}}
    report_ = build_report(records + [other])
    assert (report_.repeated, report_.conflicting) == (0, 1)
    assert (report_.totals.calls, report_.totals.blocks) == (27, 1)
    assert report_.input_notes() == ["1 verdict record with the source topic/partition/offset of an earlier, "
                                     "different record: counted as well",
                                     "27 records of tool calls and results without an event time (ts): not counted "
                                     "in fleet loops (their windows are event time)"]


def test_replay_output_is_never_merged(tmp_path):
    # the same event twice in an event file: replay applies it twice and writes two identical records
    event = {"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": "c1", "tool_name": "read",
             "args": {"path": "a"}, "result": {"content": [{"type": "text", "text": "a"}]}, "error": None,
             "event_id": "e1"}
    events = _write(tmp_path / "twice.events.jsonl", [event, event])
    verdicts = tmp_path / "twice.verdicts.jsonl"
    res = CliRunner().invoke(replay, ["-o", str(verdicts), str(events)])
    assert res.exit_code == 0, res.output
    assert "events:     2 (2 tool_call)" in res.stderr
    first, second = verdicts.read_text().splitlines()
    assert first.replace('"line":1}', '"line":2}') == second  # the same verdict; each names its own line
    res = _report(verdicts)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "loopwatch report: 1 session, 1 run, 2 calls"
    assert lines[lines.index("session s") + 1:][:2] == [f"  file: {events.name}", "  1 run, 2 calls"]
    assert "repeated" not in res.stdout
