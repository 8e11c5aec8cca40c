"""`loopwatch produce` without a broker: where each event was read, and the summary of skipped records."""

import asyncio
import socket

import pytest
from aiokafka.errors import KafkaConnectionError
from click.testing import CliRunner

from streams.commands import loopwatch
from streams.commands import produce as produce_module
from streams.commands.produce import FileEvents, ProduceSummary, file_events, publish_events


def test_file_events_know_the_file_and_line_of_each_event(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text('{"type": "tool_call", "session_id": "s", "n": 1}\n\n{not json\n'
                     '{"type": "tool_call", "session_id": "s", "n": 2}\n')
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


def _publish_without_kafka(bootstrap, topic, events, *, summary, on_bad, **options):
    """publish_events' stand-in: the events the reader yields are sent, the last one refused as too large."""
    async def publish():
        read = list(events)
        if read:
            summary.sent += len(read) - 1
            summary.too_large += 1
            on_bad(events.path, events.position, "too large")
        return summary
    return publish()


def test_produce_lists_the_first_ten_skipped_records_then_counts_the_rest(tmp_path, monkeypatch):
    monkeypatch.setattr(produce_module, "publish_events", _publish_without_kafka)
    events = tmp_path / "mixed.jsonl"
    call = '{"type": "tool_call", "session_id": "s"}\n'
    events.write_text("".join(["not json\n"] * 9 + [call] + ["[1]\n"] * 2990 + [call]), encoding="utf-8")
    result = CliRunner().invoke(loopwatch, ["produce", "--bootstrap", "127.0.0.1:1", str(events)])
    assert result.exit_code == 1, result.output  # records were skipped
    lines = result.stderr.splitlines()
    assert lines[:10] == [
        *(f"loopwatch produce: {events}:{n}: skipped: invalid JSON at column 1: Expecting value"
          for n in range(1, 10)),
        f"loopwatch produce: {events}:11: skipped: an event must be an object, got list",
    ]
    # the too-large one comes after the reader's 2,990 bad records: counted, not listed
    assert lines[10:] == [
        "loopwatch produce: 2990 more skipped record(s) not listed",
        "loopwatch produce: produced 1 event(s) to loopwatch.events in 0.00 s (0 events/s); "
        "0 key(s) over 0 partition(s)",
        "loopwatch produce: 2999 bad record(s) skipped",
        "loopwatch produce: 1 record(s) too large for Kafka skipped",
    ]


def test_produce_of_a_binary_file_stays_short_and_exits_1(tmp_path, monkeypatch):
    monkeypatch.setattr(produce_module, "publish_events", _publish_without_kafka)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff" * 5000)  # msgpack: 5,000 integers -1, none an event
    result = CliRunner().invoke(loopwatch, ["produce", "-q", "--bootstrap", "127.0.0.1:1", str(binary)])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        *(f"loopwatch produce: {binary}:{n}: skipped: an event must be a map, got int" for n in range(1, 11)),
        "loopwatch produce: 4990 more skipped record(s) not listed",
    ]


def test_publish_events_takes_a_kafka_prefix_as_its_docstring_says():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(KafkaConnectionError) as raised:
        asyncio.run(publish_events(f"kafka://127.0.0.1:{port}", "t", []))
    assert f"('127.0.0.1', {port}," in str(raised.value) and "kafka://" not in str(raised.value)


def test_produce_skips_events_replay_would_reject_with_file_and_line(tmp_path, monkeypatch):
    """An unknown ``type`` (or another schema error) is reported before anything is sent, as replay
    reports it; ``--no-validate`` sends it for the worker to dead-letter."""
    sent: list = []

    def publish(bootstrap, topic, events, *, summary, **options):
        async def run():
            for event in events:
                sent.append(event)
                summary.sent += 1
            return summary
        return run()

    monkeypatch.setattr(produce_module, "publish_events", publish)
    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "tool_call", "session_id": "s", "tool_name": "read"}\n'
                    '{"type": "toolcall", "session_id": "s"}\n'
                    '{"type": "tool_call", "tool_name": "read"}\n')
    result = CliRunner().invoke(loopwatch, ["produce", "-q", "--bootstrap", "127.0.0.1:1", str(path)])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        f"loopwatch produce: {path}:2: skipped: invalid event: type must be one of tool_call, tool_result, "
        "compaction_retry, got 'toolcall'",
        f"loopwatch produce: {path}:3: skipped: invalid event: an event needs a session_id (or a session_key)",
    ]
    assert [e["type"] for e in sent] == ["tool_call"]
    replayed = CliRunner().invoke(loopwatch, ["replay", str(path)])
    assert f"{path}:2: skipped: invalid event: type must be one of" in replayed.stderr  # the same words
    sent.clear()
    result = CliRunner().invoke(loopwatch, ["produce", "-q", "--no-validate", "--bootstrap", "127.0.0.1:1", str(path)])
    assert result.exit_code == 0, result.output
    assert [e["type"] for e in sent] == ["tool_call", "toolcall", "tool_call"]
