"""`loopwatch produce` and `loopwatch tail` against the real broker (no worker needed)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import time

import msgpack
import pytest
from click.testing import CliRunner

from streams.cli import main
from streams.client import verdict_partition
from worker_harness import consume_all, create_topics

pytestmark = [pytest.mark.kafka]

EVENTS = Path(__file__).resolve().parents[2] / "examples" / "events.jsonl"


@pytest.mark.timeout(60)
def test_produce_keys_by_run_skips_bad_lines_and_tail_reads_back(kafka_bootstrap, unique_topic, tmp_path):
    asyncio.run(create_topics(kafka_bootstrap, [unique_topic], 3))
    source = tmp_path / "events.jsonl"
    lines = EVENTS.read_text().splitlines()[:10]
    lines.insert(3, "{not json")
    lines.insert(6, "[1, 2]")
    source.write_text("\n".join(lines) + "\n")
    runner = CliRunner()
    result = runner.invoke(main, ["produce", "--bootstrap", kafka_bootstrap, "--topic", unique_topic,
                                  "--rate", "200", str(source)])
    assert result.exit_code == 0, result.output
    assert f"{source}:4: skipped: invalid JSON" in result.output
    assert f"{source}:7: skipped: an event must be an object" in result.output
    assert f"produced 10 event(s) to {unique_topic}" in result.output
    assert "2 bad record(s) skipped" in result.output

    records = asyncio.run(consume_all(kafka_bootstrap, unique_topic, 10, timeout=20))
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

    tailed = runner.invoke(main, ["tail", "verdicts", "--topic", unique_topic, "--bootstrap", kafka_bootstrap,
                                  "--from-beginning", "--json", "--max", "10"])
    assert tailed.exit_code == 0, tailed.output
    rows = [json.loads(line) for line in tailed.output.splitlines()]
    assert {r["event_id"] for r in rows} == set(by_id) and all("partition" in r and "offset" in r for r in rows)

    idle = runner.invoke(main, ["tail", "--topic", unique_topic, "--bootstrap", kafka_bootstrap,
                                "--idle-timeout", "1.5"])
    assert idle.exit_code == 0 and idle.output == ""  # only new records, and none came


def test_tail_of_a_missing_topic_says_so_and_does_not_create_it(kafka_bootstrap, unique_topic):
    result = CliRunner().invoke(main, ["tail", "verdicts", "--topic", unique_topic, "--bootstrap", kafka_bootstrap,
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
