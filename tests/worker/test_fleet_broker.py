"""The fleet view through the real broker: one fleet_loop record per window, the fleet breaker, and the
same fleet loop offline (replay and report)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
from aiokafka import AIOKafkaProducer
from click.testing import CliRunner

from streams.commands import loopwatch as cli
from streams.detection import Engine, OpenClawConfig
from streams.detection.fleet import window_ranges
from streams.offline.replay import Replayer
from streams.wire.codecs import decode_event
from streams.worker.fleet import FLUSH_INTERVAL_S
from tests.worker_harness import consume_all, create_topics, encode, running_worker, whole_topic, worker_settings

pytestmark = [pytest.mark.kafka]

def fleet_config(breaker: str) -> dict:
    return {"options": {"fleet": {"minRuns": 3, "windowSeconds": 600, "stepSeconds": 60, "breaker": breaker}}}


def failing(run: int, ts: int, call: int = 0, url: str = "https://api.example.com/quotes") -> dict[str, Any]:
    return {"type": "tool_call", "run_id": f"run-{run}", "session_id": f"session-{run % 4}",
            "agent_id": f"agent-{run % 3}", "tool_call_id": f"c{run}.{call}", "tool_name": "web_fetch",
            "args": {"url": url}, "result": None, "error": "HTTP 503 Service Unavailable", "ts": ts,
            "event_id": f"e{run}.{call}"}


def _aligned_now_ms() -> int:
    """Now, moved back to 10 s into the current minute (the 60 s window step): the scenario's events (up to
    20 s later) then never straddle a window boundary, where a later, non-overlapping window could collect
    the minimum runs too and publish a second fleet loop (about one run in 15 with the bare clock)."""
    return int(time.time() // 60) * 60_000 + 10_000


def scenario(t0: int) -> list[dict[str, Any]]:
    """Five runs (3 agents, 4 sessions) repeat the same failing call within a minute; one other call."""
    events = [failing(run, t0 + 1000 * run + 100 * call, call) for run in range(5) for call in range(2)]
    events.append(failing(7, t0 + 9000, url="https://api.example.com/other"))
    return events


def _lists(value: Any) -> Any:
    """``value`` as msgpack gives it back (tuples as lists) in the aggregates, keys left as they are."""
    if isinstance(value, dict):
        return {key: _lists(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(item) for item in value]
    return value


async def produce_positions(bootstrap: str, topic: str, events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Produce ``events`` in order (key = run id); their (partition, offset)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await producer.start()
    try:
        out = []
        for event in events:
            meta = await (await producer.send(topic, key=event["run_id"].encode(), value=encode(event)))
            out.append((meta.partition, meta.offset))
        return out
    finally:
        await producer.stop()


async def fleet_records(bootstrap: str, topic: str, kind: str, count: int, timeout: float) -> list[dict[str, Any]]:
    records = [decode_event(r.value) for r in await consume_all(bootstrap, topic, count, timeout)]
    return [r for r in records if r["type"] == kind]


async def fleet_topics(bootstrap: str, settings) -> None:
    """Create the fleet topics first: a topic the worker creates after the group's first assignment brings a
    rebalance a few seconds later, after which Faust may deliver a signal again (at least once)."""
    await create_topics(bootstrap, [f"{settings.app_id}-fleet-signals", settings.fleet_events_topic],
                        settings.partitions)


@pytest.mark.parametrize("mode", ["block", "shadow"])
def test_breaker_on_one_fleet_loop_then_the_next_matching_call_of_another_run_is_blocked(kafka_bootstrap, tmp_path,
                                                                                          mode):
    settings = worker_settings(kafka_bootstrap, tmp_path)
    t0 = _aligned_now_ms()

    async def main() -> tuple[list[dict], dict, list[dict]]:
        await fleet_topics(kafka_bootstrap, settings)
        async with running_worker(settings, Engine(OpenClawConfig(fleet_config(mode)))) as worker:
            await asyncio.wait_for(worker.fleet.feed_ready.wait(), 60)
            topic = settings.input_topics[0]
            await produce_positions(kafka_bootstrap, topic, scenario(t0))
            loops = await fleet_records(kafka_bootstrap, settings.fleet_events_topic, "fleet_loop", 1, 60)
            # the breaker has learnt of it once the worker's reader saw the record
            deadline = time.monotonic() + 60
            while not len(worker.fleet.breaker) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            blocked_event = failing(9, t0 + 20_000, call=0)  # another run, agent and session
            [(partition, offset)] = await produce_positions(kafka_bootstrap, topic, [blocked_event])
            verdicts = [decode_event(r.value) for r in
                        await consume_all(kafka_bootstrap, settings.verdicts_topic, 12, 60)]
            await asyncio.sleep(2)  # time for a second, wrong, fleet_loop record to show up
            events = [decode_event(r.value) for r in
                      await whole_topic(kafka_bootstrap, settings.fleet_events_topic, settings.partitions)]
            return loops, {v["event_id"]: v for v in verdicts}, events

    loops, verdicts, events = asyncio.run(main())
    assert len(loops) == 1, loops
    [loop] = loops
    # one record for the window, not one per run (a record published again keeps its id)
    assert len({e["id"] for e in events if e["type"] == "fleet_loop"}) == 1
    assert loop["runs"] == 3 and [e["run"] for e in loop["examples"]] == ["run-0", "run-1", "run-2"]
    assert loop["agents"] == ["agent-0", "agent-1", "agent-2"] and loop["tool"] == "web_fetch"
    assert loop["first_seen"] == t0 and loop["last_seen"] == t0 + 2000
    assert all(isinstance(where, list) and where[0] == settings.input_topics[0] for where in loop["evidence"])
    blocked = verdicts["e9.0"]
    if mode == "block":
        assert blocked["verdict"] == "block" and blocked["decided_by"]["kind"] == "fleet"
        assert blocked["detection"]["detector"] == "fleet_loop"
        assert "Fleet-wide loop" in blocked["block_reason"]
    else:  # shadow: OpenClaw's verdict, and what the breaker would have done
        assert blocked["verdict"] == "allow" and blocked["decided_by"]["kind"] == "fleet"
        assert blocked["decided_by"]["enforced"] is False and blocked["decided_by"]["action"] == "would_block"
        assert blocked["fleet"]["would_block"] is True and blocked["fleet"]["signature"] == loop["signature"]
    assert verdicts["e7.0"]["verdict"] == "allow" and (verdicts["e7.0"]["decided_by"] or {}).get("kind") != "fleet"
    # Runs 3 and 4 repeat the call too: when the worker learns of the loop before it reaches their
    # calls (a race with the producer), the breaker takes them as well; never any other event. A
    # rebalance may make the worker apply events again: their records then come again, byte for byte.
    blocks = [e for e in events if e["type"] == "fleet_block"]
    assert {b["event_id"] for b in blocks} <= {"e9.0", "e3.0", "e3.1", "e4.0", "e4.1"}, blocks
    mine = [b for b in blocks if b["event_id"] == "e9.0"]
    assert mine and all(b == mine[0] for b in mine), mine
    block_record = mine[0]
    assert block_record["event_id"] == "e9.0" and block_record["shadow"] is (mode == "shadow")
    assert block_record["signature"] == loop["signature"]


def test_breaker_off_verdicts_are_the_engines_and_replay_and_report_find_the_same_fleet_loop(kafka_bootstrap,
                                                                                              tmp_path):
    settings = worker_settings(kafka_bootstrap, tmp_path)
    t0 = _aligned_now_ms()
    events = scenario(t0)
    config = fleet_config("off")

    # the windows every observation falls in: 10 per observation time, shared where they coincide
    size, step = 600, 60
    expected_windows = {(sig, w) for sig, ts in (("web_fetch-quotes" if e["args"]["url"].endswith("quotes")
                                                  else "web_fetch-other", e["ts"]) for e in events)
                        for w in window_ranges(ts / 1000, size, step)}
    table: dict = {}

    async def main() -> tuple[list[tuple[int, int]], list[dict], list[dict]]:
        await fleet_topics(kafka_bootstrap, settings)
        async with running_worker(settings, Engine(OpenClawConfig(config))) as worker:
            assert worker.fleet.breaker is None
            positions = await produce_positions(kafka_bootstrap, settings.input_topics[0], events)
            loops = await fleet_records(kafka_bootstrap, settings.fleet_events_topic, "fleet_loop", 1, 60)
            verdicts = [decode_event(r.value) for r in
                        await consume_all(kafka_bootstrap, settings.verdicts_topic, len(events), 60)]
            deadline = time.monotonic() + 60  # the agent may still be counting the last signal
            while len(worker.fleet.windows.items()) < len(expected_windows) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            table.update(worker.fleet.windows.items())
            # written to the table every FLUSH_INTERVAL_S: one record per signature, holding every window
            deadline = time.monotonic() + 60
            while True:
                written = {key: msgpack.unpackb(value) for key, value in worker.fleet.table.data.items()}
                flat = {(key.decode(), (start, end)): aggregate for key, windows in written.items()
                        for start, end, aggregate in windows}
                if flat == _lists(table) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(FLUSH_INTERVAL_S / 2)
            return positions, loops, verdicts, written

    positions, loops, verdicts, written = asyncio.run(main())
    topic = settings.input_topics[0]
    offline = Replayer(Engine(OpenClawConfig(config)), key_by="run")
    plain = Replayer(Engine(), key_by="run")  # no options at all: OpenClaw's verdicts
    by_event = {v["event_id"]: v for v in verdicts}
    assert len(by_event) == len(events)
    for event, (partition, offset) in zip(events, positions):
        expected = plain.apply(event, [event["event_id"], partition, offset])
        expected["source"] = {"topic": topic, "partition": partition, "offset": offset}
        assert by_event[event["event_id"]] == expected
        offline.apply({**event, "source": {"topic": topic, "partition": partition, "offset": offset}},
                      [event["event_id"], partition, offset])
    assert len(loops) == 1, loops
    [loop] = loops
    [replayed] = offline.fleet_loops
    assert replayed == loop  # the same record, evidence offsets included
    # the worker's fleet windows are exactly the windows and aggregates of the offline store
    assert len(table) == len(expected_windows) == len(offline.fleet.store)
    assert table == offline.fleet.store
    # and the table holds them, one record per signature: [[start, end, aggregate], ...]
    assert len(written) == 2  # the two signatures (quotes, other)
    assert {(key.decode(), (start, end)): aggregate for key, windows in written.items()
            for start, end, aggregate in windows} == _lists(offline.fleet.store)

    # replay and report on the same events, from a file: the same fleet loop (file:line evidence)
    path = Path(tmp_path) / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    config_path = Path(tmp_path) / "openclaw.json"
    config_path.write_text(json.dumps(config))
    fleet_out = Path(tmp_path) / "fleet.jsonl"
    runner = CliRunner()
    result = runner.invoke(cli, ["replay", "--key-by", "run", "--config", str(config_path), "--fleet-output",
                                 str(fleet_out), "-o", str(Path(tmp_path) / "verdicts.jsonl"), str(path)])
    assert result.exit_code == 0, result.output
    [from_file] = [json.loads(line) for line in fleet_out.read_text().splitlines()]
    same = ("signature", "window", "runs", "agents", "first_seen", "last_seen", "events")
    assert {k: from_file[k] for k in same} == {k: loop[k] for k in same}
    assert from_file["evidence"][0] == f"{path}:1"
    report = runner.invoke(cli, ["report", "--format", "events", "--key-by", "run", "--config", str(config_path),
                                 str(path)])
    assert report.exit_code == 0, report.output
    assert loop["signature"] in report.output and "fleet loops: 1 signature(s) in 1 window " in report.output
