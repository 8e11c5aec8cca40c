"""`loopwatch produce` without a broker: where each event was read, and the summary of skipped records."""

from streams.commands.produce import FileEvents, ProduceSummary, file_events


def test_file_events_know_the_file_and_line_of_each_event(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text('{"type": "tool_call", "n": 1}\n\n{not json\n{"type": "tool_call", "n": 2}\n')
    second.write_text('[1]\n{"type": "tool_result", "n": 3}\n')
    bad: list = []
    events = file_events([str(first), str(second)], lambda path, position, reason: bad.append((path, position)))
    assert isinstance(events, FileEvents) and (events.path, events.position) == ("<events>", 0)
    seen = [(event["n"], events.path, events.position) for event in events]
    assert seen == [(1, str(first), 1), (2, str(first), 4), (3, str(second), 2)]
    assert bad == [(str(first), 3), (str(second), 1)]


def test_the_summary_counts_records_too_large_for_kafka_apart_from_bad_ones():
    summary = ProduceSummary(sent=1, bad=2, too_large=1, keys={b"r"}, partitions={0}, elapsed_s=0.5)
    assert summary.lines("t") == [
        "produced 1 event(s) to t in 0.50 s (2 events/s); 1 key(s) over 1 partition(s)",
        "2 bad record(s) skipped",
        "1 record(s) too large for Kafka skipped",
    ]
    assert ProduceSummary().lines("t") == [
        "produced 0 event(s) to t in 0.00 s (0 events/s); 0 key(s) over 0 partition(s)"]
