"""`loopwatch produce` and `loopwatch tail` against the real broker (no worker needed)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import time

import msgpack
import pytest
from click.testing import CliRunner

from streams.commands import loopwatch
from streams.wire.keys import verdict_partition
from tests.worker_harness import consume_all, create_topics, whole_topic

pytestmark = [pytest.mark.kafka]

EVENTS = Path(__file__).resolve().parents[2] / "examples" / "events.jsonl"


@pytest.mark.timeout(120)
def test_produce_keys_by_run_skips_bad_lines_and_tail_reads_back(kafka_bootstrap, unique_topic, tmp_path):
    asyncio.run(create_topics(kafka_bootstrap, [unique_topic], 3))
    source = tmp_path / "events.jsonl"
    lines = EVENTS.read_text().splitlines()[:10]
    lines.insert(3, "{not json")
    lines.insert(6, "[1, 2]")
    source.write_text("\n".join(lines) + "\n")
    runner = CliRunner()
    result = runner.invoke(loopwatch, ["produce", "--bootstrap", kafka_bootstrap, "--topic", unique_topic,
                                  "--rate", "200", str(source)])
    assert result.exit_code == 1, result.output  # two lines skipped: the topic lacks part of the file
    assert f"{source}:4: skipped: invalid JSON" in result.output
    assert f"{source}:7: skipped: an event must be an object" in result.output
    assert f"produced 10 event(s) to {unique_topic}" in result.output
    assert "2 bad record(s) skipped" in result.output

    records = asyncio.run(consume_all(kafka_bootstrap, unique_topic, 10, timeout=60))
    events = [json.loads(line) for line in EVENTS.read_text().splitlines()[:10]]
    by_id = {msgpack.unpackb(r.value)["event_id"]: r for r in records}
    assert set(by_id) == {e["event_id"] for e in events}
    for event in events:
        record = by_id[event["event_id"]]
        assert record.key == event["run_id"].encode()
        assert record.partition == verdict_partition(record.key, 3)
        published = msgpack.unpackb(record.value)
        # ts is the send time (producer time), unless --keep-ts
        assert abs(published.pop("ts") - time.time() * 1000) < 120_000
        assert published == {k: v for k, v in event.items() if k != "ts"}

    tailed = runner.invoke(loopwatch, ["tail", "verdicts", "--topic", unique_topic, "--bootstrap", kafka_bootstrap,
                                  "--from-beginning", "--json", "--max", "10"])
    assert tailed.exit_code == 0, tailed.output
    rows = [json.loads(line) for line in tailed.output.splitlines()]
    assert {r["event_id"] for r in rows} == set(by_id) and all("partition" in r and "offset" in r for r in rows)

    idle = runner.invoke(loopwatch, ["tail", "--topic", unique_topic, "--bootstrap", kafka_bootstrap,
                                "--idle-timeout", "1.5"])
    assert idle.exit_code == 0 and idle.output == ""  # only new records, and none came


def test_tail_of_a_missing_topic_says_so_and_does_not_create_it(kafka_bootstrap, unique_topic):
    result = CliRunner().invoke(loopwatch, ["tail", "verdicts", "--topic", unique_topic, "--bootstrap", kafka_bootstrap,
                                       "--idle-timeout", "1"])
    assert result.exit_code == 1
    assert f"topic {unique_topic!r} does not exist" in result.output

    async def topics() -> set:
        from aiokafka import AIOKafkaConsumer
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap)
        await consumer.start()
        try:
            return await consumer.topics()
        finally:
            await consumer.stop()

    assert unique_topic not in asyncio.run(topics())


async def _create_topic(bootstrap: str, name: str, max_message_bytes: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1, topic_configs={"max.message.bytes": str(max_message_bytes)})],
                                  timeout_ms=10_000)
    finally:
        await admin.close()


def _event(call_id: str, result_bytes: int) -> str:
    return json.dumps({"type": "tool_call", "run_id": "big-run", "session_id": "s", "tool_call_id": call_id,
                       "tool_name": "read", "args": {"path": "/log"}, "result": "x" * result_bytes, "error": None})


@pytest.mark.timeout(60)
def test_produce_skips_events_too_large_for_the_producer_or_the_broker_and_sends_the_rest(
        kafka_bootstrap, unique_topic, tmp_path):
    asyncio.run(_create_topic(kafka_bootstrap, unique_topic, 300_000))
    source = tmp_path / "huge.jsonl"
    # line 1: over the producer's 1 MiB max_request_size; line 3: under it, over the topic's max.message.bytes
    source.write_text("\n".join([_event("c1", 1_500_000), _event("c2", 10), _event("c3", 400_000),
                                 _event("c4", 10)]) + "\n")
    result = CliRunner().invoke(loopwatch, ["produce", "--bootstrap", kafka_bootstrap, "--topic", unique_topic,
                                       str(source)])
    assert result.exit_code == 1, result.output  # two events skipped
    assert "Traceback" not in result.output
    lines = result.output.splitlines()
    producer_side = [line for line in lines if f"{source}:1: skipped:" in line]
    assert len(producer_side) == 1
    assert re.fullmatch(
        re.escape(f"loopwatch produce: {source}:1: skipped: the event is ") + r"1,500,[0-9]{3}" + re.escape(
            " bytes as a Kafka record, over the producer's max_request_size of 1,048,576 bytes (--max-request-size "
            "raises it; the topic's max.message.bytes, by default the broker's message.max.bytes of 1,048,588 "
            "bytes, must allow it too)"), producer_side[0])
    broker_side = [line for line in lines if f"{source}:3: skipped:" in line]
    assert len(broker_side) == 1
    assert re.search(r"skipped: the broker refused the event as too large \(400,[0-9]{3} bytes as a Kafka "
                     r"record\): over the topic's max.message.bytes", broker_side[0])
    assert f"produced 2 event(s) to {unique_topic}" in result.output
    assert "1 key(s) over 1 partition(s)" in result.output
    assert "2 record(s) too large for Kafka skipped" in result.output
    assert "NOT acknowledged" not in result.output

    records = asyncio.run(whole_topic(kafka_bootstrap, unique_topic, 1))  # produce has exited: all acknowledged
    assert [msgpack.unpackb(r.value)["tool_call_id"] for r in records] == ["c2", "c4"]


@pytest.mark.timeout(120)
def test_produce_sends_an_event_over_1_mib_when_both_limits_allow_it(kafka_bootstrap, unique_topic, tmp_path):
    asyncio.run(_create_topic(kafka_bootstrap, unique_topic, 2_000_000))
    source = tmp_path / "huge.jsonl"
    source.write_text(_event("c1", 1_500_000) + "\n")
    result = CliRunner().invoke(loopwatch, ["produce", "--bootstrap", kafka_bootstrap, "--topic", unique_topic,
                                       "--max-request-size", "2000000", str(source)])
    assert result.exit_code == 0, result.output
    assert f"produced 1 event(s) to {unique_topic}" in result.output and "skipped" not in result.output
    # read back by a consumer with aiokafka's default fetch sizes (1 MiB per partition), as the worker's
    [record] = asyncio.run(consume_all(kafka_bootstrap, unique_topic, 1, timeout=60))
    assert len(msgpack.unpackb(record.value)["result"]) == 1_500_000


def test_tail_on_a_terminal_says_what_it_follows_and_that_it_is_still_waiting(kafka_bootstrap, unique_topic,
                                                                                 monkeypatch):
    from streams.commands import tail as tail_module

    asyncio.run(create_topics(kafka_bootstrap, [unique_topic], 1))
    monkeypatch.setattr(tail_module, "_interactive", lambda: True)
    monkeypatch.setattr(tail_module, "IDLE_NOTICE_S", 1.0)
    result = CliRunner().invoke(loopwatch, ["tail", "--topic", unique_topic, "--bootstrap", kafka_bootstrap,
                                       "--idle-timeout", "2.6"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == f"loopwatch tail: following {unique_topic} on {kafka_bootstrap} (new records only); Ctrl-C stops"
    waiting = [line for line in lines if line.startswith("loopwatch tail: waiting: no new record")]
    assert 1 <= len(waiting) <= 2  # one a second (fewer if a poll overruns on a loaded machine)
    assert re.fullmatch(f"loopwatch tail: waiting: no new record on {re.escape(unique_topic)} for [12] s "
                        r"\(is a worker running, and are events being produced\?\)", waiting[0])
    assert result.stdout == ""



@pytest.mark.timeout(60)
def test_tail_hides_the_gateways_readyz_probes_unless_asked(kafka_bootstrap, unique_topic):
    from aiokafka import AIOKafkaProducer

    from streams.runners.gateway.health import Readiness

    asyncio.run(create_topics(kafka_bootstrap, [unique_topic], 1))
    probe = {"type": "compaction_retry", "run_id": Readiness.PROBE_RUN, "session_id": Readiness.PROBE_RUN,
             "event_id": "p1", "verdict": "allow", "guard": {"armed": True, "remaining": 3}}
    call = {"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_name": "read", "event_id": "c1",
            "verdict": "allow", "detection": {"stuck": False}}

    async def publish() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            for record in (probe, call, {**probe, "event_id": "p2"}):
                await producer.send_and_wait(unique_topic, msgpack.packb(record))
        finally:
            await producer.stop()

    asyncio.run(publish())
    base = ["tail", "verdicts", "--topic", unique_topic, "--bootstrap", kafka_bootstrap, "--from-beginning",
            "--json", "--idle-timeout", "2"]
    shown = CliRunner().invoke(loopwatch, base)
    assert shown.exit_code == 0, shown.output
    assert [json.loads(line)["event_id"] for line in shown.output.splitlines()] == ["c1"]
    everything = CliRunner().invoke(loopwatch, [*base, "--show-probes"])
    assert [json.loads(line)["event_id"] for line in everything.output.splitlines()] == ["p1", "c1", "p2"]
