"""The stream worker against the real broker: conformance through Kafka, dead letters, restarts, kill -9.

Every test has its own app id (consumer group, changelog) and topics (see
worker_harness.worker_settings). Verdicts are compared with the offline
engine on the same events, with evidence refs rebuilt from the Kafka offsets.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import threading
import time
import urllib.request
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator

import msgpack
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from streams.worker import metrics
from streams.offline.conformance import load_scenarios, scenario_config, spec_view
from streams.detection import Engine, OpenClawConfig, SessionState, SessionStore
from streams.wire.keys import verdict_partition
from streams.wire.codecs import MAX_REQUEST_SIZE, decode_event, record_size
from streams.wire.keys import partition_key, record_key
from streams.worker.states import decode_state
from streams.worker.settings import WorkerSettings
from tests.shared_vectors import FILES_2026_9, OWN_2026_9, shared_path, skip_without
from tests.private_broker import free_port as _free_port
from tests.worker_harness import (
    count_records,
    PacedProducer, WorkerProcess, checkpoint_wait_s, checkpointed, consume_all, create_topics, encode, produce, running_worker,
    worker_settings,
)

pytestmark = [pytest.mark.kafka]

VECTORS = shared_path("vectors.jsonl")  # not part of the project: skipped where absent
ENABLED = {"tools": {"loopDetection": {"enabled": True}}}

# Scenarios whose verdicts depend on state a session's runs share; with --key-by run
# (each run its own state) they differ from OpenClaw, by design.
RUN_KEY_DIFFERS = {
    "run-id-whitespace": "' r1 ' and 'r1' are one run for detection (trimmed) but two run keys",
    "history-shared-across-runs-eviction": "the historySize cap is per session: other runs evict this run's "
                                           "records in OpenClaw, not in a run-keyed state",
}


def _prefixed(event: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The event with its session ids made unique to a scenario (non-empty strings only)."""
    out = dict(event)
    for field in ("session_id", "session_key"):
        value = out.get(field)
        if isinstance(value, str) and value:
            out[field] = f"{prefix}/{value}"
    return out


class VerdictReader:
    """A consumer on the verdicts topic that collects records by input source (topic, partition, offset)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                         enable_auto_commit=False, group_id=None)
        self.by_source: dict[tuple[str, int, int], list[bytes]] = defaultdict(list)

    async def __aenter__(self) -> "VerdictReader":
        await self.consumer.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.consumer.stop()

    async def until(self, sources: set[tuple[str, int, int]], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not sources <= self.by_source.keys():
            if time.monotonic() > deadline:
                missing = sorted(sources - self.by_source.keys())
                raise TimeoutError(f"{len(missing)} verdicts missing, e.g. {missing[:3]}")
            for batch in (await self.consumer.getmany(timeout_ms=100)).values():
                for record in batch:
                    value = msgpack.unpackb(record.value)
                    src = value["source"]
                    self.by_source[(src["topic"], src["partition"], src["offset"])].append(record.value)


def verdicts_by_source(bootstrap: str, topic: str, sources: list[tuple[str, int, int]], timeout: float,
                       partial: bool = False) -> dict[tuple[str, int, int], list[bytes]]:
    """Verdict record values of ``topic`` by input source, once every one of ``sources`` has one.

    Raises ``TimeoutError`` after ``timeout`` s unless ``partial`` (then what came is returned).
    """
    async def collect() -> dict[tuple[str, int, int], list[bytes]]:
        async with VerdictReader(bootstrap, topic) as reader:
            try:
                await reader.until(set(sources), timeout=timeout)
            except TimeoutError:
                if not partial:
                    raise
            return reader.by_source

    return asyncio.run(collect())


def _offline(events: list[dict[str, Any]], sources: list[tuple[str, int, int]], config: OpenClawConfig | dict,
             keys: list[str] | None = None) -> list[dict[str, Any]]:
    """Offline verdicts: SessionStore (keys None) or per-key states (keys given)."""
    engine = Engine(config if isinstance(config, OpenClawConfig) else OpenClawConfig(config))
    store, states = SessionStore(engine), defaultdict(SessionState)
    out = []
    for i, (event, (_, partition, offset)) in enumerate(zip(events, sources)):
        ref = [event.get("event_id"), partition, offset]
        out.append(store.process(event, ref) if keys is None else engine.process(event, states[keys[i]], ref))
    return out


def _same(kafka_verdict: dict[str, Any], offline: dict[str, Any]) -> bool:
    return spec_view(kafka_verdict) == spec_view(offline) and kafka_verdict["evidence"] == offline["evidence"] \
        and kafka_verdict["verdict"] == offline["verdict"]


# ------------------------------------------------------------------------ (a) conformance


async def _run_vectors(bootstrap: str, tmp_path: Path, key_by: str, files: tuple[Path, ...] = (VECTORS,),
                       expected: dict[str, bool] | None = None) -> dict[str, bool]:
    """All scenarios of ``files`` through one worker, grouped by config and profile; returns scenario -> equals
    SessionStore. ``expected``, when given, gets scenario -> the worker's verdicts equal the scenario's own."""
    scenarios = [scenario for path in files for scenario in load_scenarios(path)]
    groups: dict[str, list[dict]] = defaultdict(list)
    for scenario in scenarios:
        groups[json.dumps([scenario.get("config") or {}, scenario.get("profile")], sort_keys=True)].append(scenario)
    settings = worker_settings(bootstrap, tmp_path, key_by=key_by, partitions=4)
    topic = settings.input_topics[0]
    result: dict[str, bool] = {}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    async with running_worker(settings) as loopwatch, VerdictReader(bootstrap, settings.verdicts_topic) as reader:
        await producer.start()
        try:
            for members in groups.values():
                config = scenario_config(members[0])
                # The engine is swapped only while the worker is idle (all earlier verdicts read).
                loopwatch.processor.engine = Engine(config)
                sent: dict[str, tuple[list[dict], list]] = {}
                for scenario in members:
                    name = scenario["name"]
                    events = [_prefixed(e, name) for e in scenario["events"]]
                    if key_by == "session":
                        # keyless: the worker derives the session key (rekey topic); one partition
                        # per scenario keeps its order
                        partition = zlib.crc32(name.encode()) % settings.partitions
                        futures = [await producer.send(topic, encode(e), partition=partition) for e in events]
                    else:
                        futures = [await producer.send(topic, encode(e), key=f"{name}|{partition_key(ev, 'run')}".encode())
                                   for e, ev in zip(events, scenario["events"])]
                    sent[name] = (events, futures)
                all_sources = set()
                for name, (events, futures) in sent.items():
                    metas = await asyncio.gather(*futures)
                    sent[name] = (events, [(m.topic, m.partition, m.offset) for m in metas])
                    all_sources |= set(sent[name][1])
                await reader.until(all_sources, timeout=60)
                for name, (events, sources) in sent.items():
                    got = [msgpack.unpackb(reader.by_source[s][-1]) for s in sources]
                    want = _offline(events, sources, config)
                    result[name] = all(_same(g, w) for g, w in zip(got, want))
                    if expected is not None:
                        scenario = next(s for s in members if s["name"] == name)
                        expected[name] = [spec_view(g) for g in got] == [
                            {k: v for k, v in e.items() if k != "event"} for e in scenario["expected"]]
                    if key_by == "run" and not result[name]:
                        # still the offline run-keyed replay exactly
                        keys = [partition_key(e, "run") for e in events]
                        run_keyed = _offline(events, sources, config, keys)
                        assert all(_same(g, w) for g, w in zip(got, run_keyed)), name
                    assert all(len(reader.by_source[s]) == 1 for s in sources), f"{name}: duplicate verdicts"
        finally:
            await producer.stop()
    return result


@pytest.mark.timeout(150)
@skip_without("vectors.jsonl")
def test_vectors_through_kafka_with_session_key(kafka_bootstrap, tmp_path):
    result = asyncio.run(_run_vectors(kafka_bootstrap, tmp_path, "session"))
    assert len(result) == 92
    assert [name for name, ok in result.items() if not ok] == []


@pytest.mark.timeout(150)
@skip_without("vectors.jsonl")
def test_vectors_through_kafka_with_run_key(kafka_bootstrap, tmp_path):
    result = asyncio.run(_run_vectors(kafka_bootstrap, tmp_path, "run"))
    assert len(result) == 92
    assert {name for name, ok in result.items() if not ok} == set(RUN_KEY_DIFFERS)


@pytest.mark.timeout(150)
def test_own_2026_9_vectors_through_kafka(kafka_bootstrap, tmp_path):
    """The 2026.9.6 profile through the worker, without the shared files: recovery and terminal blocks,
    notes, vetoes in the changelog state, a mixed fleet (per agent and per event). The file's hand-written
    scenarios (those expected by OpenClaw's embedded runner, bench/own_vectors_2026_9.py, run offline)."""
    own = tmp_path / "own.jsonl"
    lines = OWN_2026_9.read_text(encoding="utf-8").split("\n")
    own.write_text("".join(line + "\n" for line in lines
                           if line.strip() and "embedded runner" not in json.loads(line)["description"]),
                   encoding="utf-8")
    expected: dict[str, bool] = {}
    result = asyncio.run(_run_vectors(kafka_bootstrap, tmp_path, "session", (own,), expected))
    assert len(result) == 8
    assert [name for name, ok in result.items() if not ok] == []
    assert [name for name, ok in expected.items() if not ok] == []


@skip_without(FILES_2026_9[0])
@skip_without(FILES_2026_9[1])
@pytest.mark.timeout(300)
def test_shared_2026_9_vectors_through_kafka(kafka_bootstrap, tmp_path):
    """156/156 of the 2026.9.6 conformance files through the worker on the broker, as offline."""
    expected: dict[str, bool] = {}
    files = tuple(shared_path(name) for name in FILES_2026_9)
    result = asyncio.run(_run_vectors(kafka_bootstrap, tmp_path, "session", files, expected))
    assert len(result) == 156
    assert [name for name, ok in result.items() if not ok] == []
    assert [name for name, ok in expected.items() if not ok] == []


# ------------------------------------------------------------------------ (c) dead letters


@pytest.mark.timeout(180)
def test_bad_records_are_dead_lettered_and_good_ones_flow(kafka_bootstrap, tmp_path):
    async def run() -> None:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=1)
        topic = settings.input_topics[0]
        good = [{"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": f"c{i}",
                 "tool_name": "read", "args": {"i": i}, "result": "ok", "error": None} for i in range(3)]
        records = [
            (b"r1", encode(good[0])),
            (b"r1", b"\xc1\x00garbage"),
            (b"r1", b' [1, 2, 3]'),
            (b"r1", json.dumps(good[1]).encode()),
            (b"r1", json.dumps({"type": "nope", "run_id": "r1", "session_id": "s1"}).encode()),
            (b"r1", encode(good[2])),
        ]
        async with running_worker(settings):
            await produce(kafka_bootstrap, topic, records)
            verdicts = await consume_all(kafka_bootstrap, settings.verdicts_topic, 3, timeout=60)
            letters = await consume_all(kafka_bootstrap, settings.dead_letters_topic, 3, timeout=60)
        assert [msgpack.unpackb(v.value)["source"]["offset"] for v in verdicts] == [0, 3, 5]
        assert all(msgpack.unpackb(v.value)["verdict"] == "allow" for v in verdicts)
        got = [msgpack.unpackb(r.value) for r in letters]
        assert [(g["reason_class"], g["source"]["offset"], g["source"]["topic"]) for g in got] == [
            ("decode", 1, topic), ("decode", 2, topic), ("schema", 4, topic)]
        assert "invalid msgpack" in got[0]["reason"] and "map/object" in got[1]["reason"]
        assert "type must be one of" in got[2]["reason"]
        assert got[0]["value"] == b"\xc1\x00garbage" and got[0]["key"] == b"r1"
        assert [r.key for r in letters] == [b"r1"] * 3

    asyncio.run(run())


@pytest.mark.timeout(180)
def test_lone_surrogates_from_json_input_get_verdicts_and_checkpoints(kafka_bootstrap, tmp_path):
    # JSON can carry a lone surrogate (a JavaScript slice through an emoji), UTF-8 and msgpack cannot:
    # keyed and keyless records holding them get their verdicts and their states checkpoint.
    async def run() -> None:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=1)
        topic = settings.input_topics[0]
        calls = [{"type": "tool_call", "event_id": f"e{i}\udc00", "run_id": "run-\ud83d", "session_id": "s\ud800",
                  "tool_call_id": f"c{i}\ud800", "tool_name": "read\ud83d", "args": {"path": "\ud800"},
                  "result": "same \udc00", "error": None} for i in range(11)]
        key = record_key(calls[0])
        assert key == b"run-\xed\xa0\xbd"
        records = [(key, json.dumps(e).encode()) for e in calls[:6]]
        async with running_worker(settings, Engine(OpenClawConfig(ENABLED))) as loopwatch:
            await produce(kafka_bootstrap, topic, records)
            await consume_all(kafka_bootstrap, settings.verdicts_topic, 6, timeout=60)
            await produce(kafka_bootstrap, topic, [(None, json.dumps(e).encode()) for e in calls[6:]])  # rekeyed
            verdicts = await consume_all(kafka_bootstrap, settings.verdicts_topic, 11, timeout=60)
            await checkpointed(loopwatch)
            stored = decode_state(loopwatch.table.get(key))
        got = [decode_event(v.value) for v in verdicts]
        assert [g["event_id"] for g in got] == [e["event_id"] for e in calls]
        assert [v.key for v in verdicts] == [key] * 11
        sources = [(topic, g["source"]["partition"], g["source"]["offset"]) for g in got]
        assert [_same(g, w) for g, w in zip(got, _offline(calls, sources, ENABLED))] == [True] * 11
        assert got[-1]["verdict"] == "warn" and got[-1]["detection"]["count"] == 10
        assert [r.tool for r in stored.history] == ["read\ud83d"] * 11
        assert stored.last_offsets == {f"{topic}:0": 5, f"rekey:{topic}:0": 10}

    asyncio.run(run())


@pytest.mark.timeout(150)
def test_implausible_ts_values_get_verdicts_and_stay_out_of_the_latency_histogram(kafka_bootstrap, tmp_path):
    # ts is the runner's send time, only used for the latency metric; the engine takes any number JSON
    # holds. NaN and the infinities are not JSON (replay refuses them too): dead letters naming them.
    async def run() -> None:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=1)
        topic = settings.input_topics[0]
        call = ('{"type":"tool_call","run_id":"r1","session_id":"s1","tool_call_id":"c%d","tool_name":"read",'
                '"args":{},"result":"ok","ts":%s}')
        stamps = ["NaN", "1" + "0" * 400, "Infinity", "-1", "-Infinity", "1e300"]
        before = metrics.VERDICT_LATENCY_SECONDS._sum.get()
        async with running_worker(settings) as loopwatch:
            await produce(kafka_bootstrap, topic, [(b"r1", (call % (i, ts)).encode()) for i, ts in enumerate(stamps)])
            verdicts = await consume_all(kafka_bootstrap, settings.verdicts_topic, 3, timeout=60)
            letters = await consume_all(kafka_bootstrap, settings.dead_letters_topic, 3, timeout=60)
            assert loopwatch._failed is None and not loopwatch._tainted
        got = [decode_event(v.value) for v in verdicts]  # one JSON: 400 digits
        assert [(g["verdict"], g["source"]["offset"]) for g in got] == [("allow", 1), ("allow", 3), ("allow", 5)]
        dead = [decode_event(r.value) for r in letters]
        assert [(d["reason_class"], d["source"]["offset"]) for d in dead] == [("decode", 0), ("decode", 2), ("decode", 4)]
        assert [d["reason"] for d in dead] == [
            "invalid JSON: NaN is not JSON", "invalid JSON: Infinity is not JSON", "invalid JSON: -Infinity is not JSON"]
        # each latency taken from the record's timestamp instead: seconds, not centuries
        assert 0 <= metrics.VERDICT_LATENCY_SECONDS._sum.get() - before < 3600  # (a loaded machine: not minutes)

    asyncio.run(run())


@pytest.mark.timeout(180)
def test_a_tool_name_of_600_kb_gets_a_shortened_verdict_and_its_state_stays_in_memory(kafka_bootstrap, tmp_path):
    # The verdict repeats the tool name, the state keeps it per call: whole, the broker would refuse
    # both, and the worker would stop again at every restart.
    async def run() -> None:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=1)
        topic = settings.input_topics[0]
        big = [{"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": f"c{i}", "event_id": f"e{i}",
                "tool_name": "t" * 600_000, "args": {}, "result": "ok"} for i in range(2)]
        good = {"type": "tool_call", "run_id": "r2", "session_id": "s2", "tool_call_id": "c9", "event_id": "e9",
                "tool_name": "read", "args": {}, "result": "ok"}
        not_written = metrics.STATES_NOT_WRITTEN._value.get()
        async with running_worker(settings) as loopwatch:
            await produce(kafka_bootstrap, topic, [(b"r1", encode(e)) for e in big] + [(b"r2", encode(good))])
            verdicts = await consume_all(kafka_bootstrap, settings.verdicts_topic, 3, timeout=60)
            await checkpointed(loopwatch)
            assert loopwatch.table.get(b"r1") is None and decode_state(loopwatch.table.get(b"r2")).history
            assert len(loopwatch.processor.states.cache[b"r1"].history) == 2  # in memory: the next calls still count
        got = [decode_event(v.value) for v in verdicts]
        assert [(g["event_id"], g["verdict"], len(g["tool_name"]), "truncated" in g) for g in got] == [
            ("e0", "allow", 1_024, True), ("e1", "allow", 1_024, True), ("e9", "allow", 4, False)]
        assert got[0]["truncated"] > 1_000_000 and max(len(v.value) for v in verdicts) < 10_000
        assert metrics.STATES_NOT_WRITTEN._value.get() > not_written

    asyncio.run(run())


@pytest.mark.timeout(180)
def test_a_record_key_of_1_mb_gets_its_verdict_without_the_key_at_the_keys_partition(kafka_bootstrap, tmp_path):
    # Key and verdict together would be over the broker's limit: the verdict goes keyless, where the key
    # hashes to (runners read that partition and match the event id).
    async def run() -> None:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2)
        topic = settings.input_topics[0]
        event = {"type": "tool_call", "session_id": "s1", "tool_call_id": "c1", "event_id": "e1", "tool_name": "read"}
        size = 1_048_000
        while record_size(b"k" * (size + 1), encode(event)) <= MAX_REQUEST_SIZE:  # a default producer sends it
            size += 1
        key = b"k" * size  # the largest key a producer with default settings sends with this event
        async with running_worker(settings) as loopwatch:
            await produce(kafka_bootstrap, topic, [(key, encode(event))])
            [verdict] = await consume_all(kafka_bootstrap, settings.verdicts_topic, 1, timeout=60)
            await checkpointed(loopwatch)
        record = decode_event(verdict.value)
        assert verdict.key is None and (record["event_id"], record["verdict"]) == ("e1", "allow")
        assert verdict.partition == verdict_partition(key, 2)  # where the client reads it

    asyncio.run(run())


@pytest.mark.timeout(180)
def test_records_near_kafkas_size_limit_are_dead_lettered_without_stopping_the_worker(kafka_bootstrap, tmp_path):
    # A dead letter wraps the record, a rekey forward too: near the broker's 1 MiB default they
    # would no longer fit, the write would fail and stop the worker (again at every restart).
    async def run() -> None:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=1)
        topic = settings.input_topics[0]
        invalid = json.dumps({"type": "nope", "run_id": "r1", "session_id": "s1", "pad": "x" * 1_048_200}).encode()
        keyless = encode({"type": "tool_call", "run_id": "r2", "session_id": "s2", "tool_call_id": "c1",
                          "tool_name": "read", "args": {"pad": "y" * 1_048_200}, "result": "ok"})
        good = {"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": "c2", "tool_name": "read",
                "args": {}, "result": "ok"}
        # a long key takes room as the record key and as the key field (cut to 1,024); the reason quotes the
        # 900 KB type (cut to 1,024 characters)
        long_key, quoting = b"k" * 100_000, json.dumps({"type": "t" * 900_000, "session_id": "s1"}).encode()
        # under 1,000,000 bytes, but not with the run id it is keyed by in the rekey topic
        keyless_long_key = encode({"type": "tool_call", "run_id": "r" * 300_000, "session_id": "s3",
                                   "tool_call_id": "c1", "tool_name": "read", "args": {"pad": "y" * 690_000}})
        # fits with its derived key (r4), but not once wrapped with its origin for the rekey topic
        at_the_edge = {"type": "tool_call", "run_id": "r4", "session_id": "s4", "tool_call_id": "c1",
                       "tool_name": "read", "args": {"pad": ""}}
        at_the_edge["args"]["pad"] = "y" * 999_900
        at_the_edge["args"]["pad"] += "y" * (999_996 - len(encode(at_the_edge)))
        edge = encode(at_the_edge)
        async with running_worker(settings):
            await produce(kafka_bootstrap, topic, [(b"r1", invalid), (None, keyless), (long_key, quoting),
                                                   (None, keyless_long_key), (None, edge), (b"r1", encode(good))])
            verdicts = await consume_all(kafka_bootstrap, settings.verdicts_topic, 1, timeout=60)
            letters = await consume_all(kafka_bootstrap, settings.dead_letters_topic, 5, timeout=60)
        assert [msgpack.unpackb(v.value)["source"]["offset"] for v in verdicts] == [5]
        got = [msgpack.unpackb(r.value) for r in letters]
        assert [(g["reason_class"], g["source"]["offset"]) for g in got] == [
            ("schema", 0), ("size", 1), ("schema", 2), ("size", 3), ("size", 4)]
        # every letter keeps the key of its record, and the cut ones fill the limit exactly
        assert [r.key for r in letters] == [b"r1", None, long_key, None, None]
        assert [len(r.key or b"") + len(r.value) for r in letters[:3]] == [1_000_000] * 3
        for letter, whole in zip(got[:3], [invalid, keyless, quoting]):
            assert letter["value_truncated"] is True and letter["value_size"] == len(whole)
            assert whole.startswith(letter["value"]) and len(letter["value"]) > 897_000
        assert len(keyless_long_key) < 1_000_000 and got[3]["value"] == keyless_long_key
        # its letter is cut to fit beside the reason (the record fitted beside its 2-byte key, not beside that)
        assert len(edge) + 2 == 999_998 and edge.startswith(got[4]["value"]) and got[4]["value_size"] == len(edge)
        assert len(got[2]["reason"]) == 1_024 and (len(got[2]["key"]), got[2]["key_size"]) == (1_024, 100_000)
        for letter in got[1], got[3], got[4]:
            assert letter["reason"].startswith("a keyless record of ") and letter["reason"].endswith(
                "bytes with its derived key and origin is too large to forward through the rekey topic "
                "(at most 1,000,000): key your records")

    asyncio.run(run())


@pytest.mark.timeout(90)
@pytest.mark.parametrize("faust", [False, True], ids=["loopwatch-worker", "faust-A"])
def test_an_input_topic_with_another_partition_count_stops_the_worker_before_any_verdict(kafka_bootstrap, tmp_path,
                                                                                         faust):
    # `loopwatch worker` checks before Faust creates any topic; `faust -A streams.app worker`
    # (no such pre-flight) is stopped by the app itself before its first verdict.
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2)
    topic = settings.input_topics[0]
    asyncio.run(create_topics(kafka_bootstrap, [topic], 3))
    event = {"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": "c1", "tool_name": "read",
             "args": {}, "result": "ok"}
    asyncio.run(produce(kafka_bootstrap, topic, [(b"r1", encode(event))]))
    worker = WorkerProcess(settings, tmp_path / "worker.log", faust=faust).start()
    try:
        assert worker.proc.wait(60) != 0
    finally:
        worker.stop()
    said = worker.log_text()
    assert (f"input topic partitions must equal --partitions (2, the state table's): {topic} has 3. To fix: run the "
            "worker with --partitions 3, or create the input topic with 2 partitions") in said, said  # whole log
    assert asyncio.run(consume_all(kafka_bootstrap, settings.verdicts_topic, 1, timeout=3)) == []
    if not faust:
        assert asyncio.run(_existing(kafka_bootstrap, f"{settings.app_id}-")) == []  # no changelog, no rekey topic


async def _existing(bootstrap: str, prefix: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return sorted(name for name in await admin.list_topics() if name.startswith(prefix))
    finally:
        await admin.close()


# ------------------------------------------------------------------------ (b) restart


def _calls(run: str, start: int, count: int) -> list[dict[str, Any]]:
    return [{"type": "tool_call", "run_id": run, "session_id": "s-" + run, "tool_call_id": f"{run}-{i}",
             "tool_name": "exec", "args": {"command": "ls"}, "result": "same", "error": None,
             "event_id": f"{run}:{i}", "ts": int(time.time() * 1000)} for i in range(start, start + count)]




@pytest.mark.timeout(240)
def test_state_survives_a_worker_restart(kafka_bootstrap, tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text("// JSON5\n{tools: {loopDetection: {enabled: true}}}\n")
    port = _free_port()
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2, config=config, metrics_port=port)
    topic = settings.input_topics[0]
    events = _calls("run-a", 0, 15) + _calls("run-a", 15, 10)
    asyncio.run(create_topics(kafka_bootstrap, [topic], 2))

    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        worker.wait_ready()
        asyncio.run(produce(kafka_bootstrap, topic, [(b"run-a", encode(e)) for e in events[:15]]))
        first = asyncio.run(consume_all(kafka_bootstrap, settings.verdicts_topic, 15, timeout=60))
        assert len(first) == 15
        # the batch's counters are updated once its records are handed to the producer, which may
        # deliver the first of them to us before that: scrape until they show (a loaded machine)
        deadline = time.monotonic() + 60
        while True:
            scrape = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=15).read().decode()
            if "loopwatch_engine_seconds_count 15.0" in scrape or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert 'loopwatch_events_total{type="tool_call"} 15.0' in scrape
        assert ('loopwatch_detections_total{action="warn",detector="generic_repeat",enforced="true",kind="detection",'
                'level="warning"} 1.0') in scrape
        assert "loopwatch_engine_seconds_count 15.0" in scrape and "loopwatch_verdict_latency_seconds_count" in scrape
        worker.stop()
        assert worker.proc.returncode == 0, worker.log_text()[-3000:]

        worker = WorkerProcess(settings, tmp_path / "worker.log").start()
        worker.wait_ready()
        asyncio.run(produce(kafka_bootstrap, topic, [(b"run-a", encode(e)) for e in events[15:]]))
        records = asyncio.run(consume_all(kafka_bootstrap, settings.verdicts_topic, 25, timeout=60))
    finally:
        worker.stop()
    got = [msgpack.unpackb(r.value) for r in records]
    assert len(got) == 25
    sources = [(topic, g["source"]["partition"], g["source"]["offset"]) for g in got]
    want = _offline(events, sources, json.loads('{"tools": {"loopDetection": {"enabled": true}}}'))
    assert [_same(g, w) for g, w in zip(got, want)] == [True] * 25
    # the counts continued across the restart: warning from the 11th call, block from the 21st
    assert [g["verdict"] for g in got[15:]] == ["allow"] * 5 + ["block"] * 5  # suppressed warnings, then blocks
    assert got[15]["detection"]["count"] == 15 and got[-1]["detection"]["count"] == 20


async def _produce_in_transactions(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], per: int) -> None:
    """Produce ``records`` in transactions of ``per`` records: each commit marker takes an offset of its own."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-txn")
    await producer.start()
    try:
        for start in range(0, len(records), per):
            async with producer.transaction():
                for key, value in records[start:start + per]:
                    await producer.send(topic, value=value, key=key)
    finally:
        await producer.stop()


@pytest.mark.timeout(240)
def test_input_with_offset_gaps_from_transaction_markers_is_handled_in_full_across_a_restart(kafka_bootstrap,
                                                                                          tmp_path):
    # The worker delivers a partition in order from its committed offset; a gap in the offsets
    # (here each transaction's commit marker) is the log's own and must not stall it, also when
    # the committed offset after a restart is a marker's.
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps(ENABLED))
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=1, config=config)
    topic = settings.input_topics[0]
    events = _calls("run-t", 0, 24)
    records = [(b"run-t", encode(e)) for e in events]
    asyncio.run(create_topics(kafka_bootstrap, [topic], 1))

    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        worker.wait_ready()
        asyncio.run(_produce_in_transactions(kafka_bootstrap, topic, records[:12], per=4))
        assert len(asyncio.run(consume_all(kafka_bootstrap, settings.verdicts_topic, 12, timeout=60))) == 12
        worker.stop()
        assert worker.proc.returncode == 0, worker.log_text()[-3000:]

        worker = WorkerProcess(settings, tmp_path / "worker.log").start()
        worker.wait_ready()
        asyncio.run(_produce_in_transactions(kafka_bootstrap, topic, records[12:], per=3))
        got = [msgpack.unpackb(r.value) for r in
               asyncio.run(consume_all(kafka_bootstrap, settings.verdicts_topic, 24, timeout=60))]
    finally:
        worker.stop()
    offsets = [g["source"]["offset"] for g in got]
    # 3 transactions of 4, then 4 of 3: a marker after each
    assert offsets == [*range(0, 4), *range(5, 9), *range(10, 14),
                       *range(15, 18), *range(19, 22), *range(23, 26), *range(27, 30)]
    want = _offline(events, [(topic, 0, o) for o in offsets], ENABLED)
    assert [_same(g, w) for g, w in zip(got, want)] == [True] * 24
    assert [g["verdict"] for g in got].count("block") == 4  # the 21st to 24th identical call


# ------------------------------------------------------------------------ (d) kill -9


def _fleet_events(runs: int, total: int, seed: int = 7) -> list[dict[str, Any]]:
    """A mixed stream: runs that loop on one call, ping-pong, or make progress, interleaved."""
    return list(itertools.islice(_fleet_stream(runs, seed), total))


def _fleet_stream(runs: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """:func:`_fleet_events` without an end (the first ``total`` events are those of ``_fleet_events``)."""
    rng = random.Random(seed)
    counters: defaultdict[str, int] = defaultdict(int)
    while True:
        run = f"run-{rng.randrange(runs):03d}"
        i = counters[run]
        counters[run] += 1
        style = int(run[-3:]) % 3
        if style == 0:
            args, result = {"command": "pytest"}, "1 failed"
        elif style == 1:
            args, result = {"path": f"/f{i % 2}"}, f"content {i % 2}"
        else:
            args, result = {"path": f"/f{i}"}, f"content {i}"
        event = {"type": "tool_call", "run_id": run, "session_id": f"s-{run}", "tool_call_id": f"{run}-{i}",
                 "tool_name": "exec" if style == 0 else "read", "args": args, "result": result, "error": None,
                 "event_id": f"{run}:{i}"}
        if i and i % 17 == 0:
            event = {"type": "compaction_retry", "run_id": run, "session_id": f"s-{run}", "event_id": f"{run}:{i}"}
        yield event


_AFTER_STOP = 1500  # events produced after the stopped worker has exited (only the restart can handle them)


def stopped_mid_stream_loses_nothing(kafka_bootstrap: str, tmp_path: Path, stop: str, store: str = "memory://",
                                     after_stop: Callable[[WorkerSettings], Any] = lambda settings: None,
                                     **overrides: Any) -> Any:
    """``stop`` (``kill``: kill -9, ``stop``: SIGTERM) a worker while events flow, restart it, check every verdict.

    Asserts that every event has a verdict, repeated verdicts are byte-identical
    and all equal the offline replay. Returns what ``after_stop(settings)``
    returned, called between the stop and the restart. ``overrides``: worker settings.
    """
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps(ENABLED))
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=4, config=config, store=store, **overrides)
    topic = settings.input_topics[0]
    asyncio.run(create_topics(kafka_bootstrap, [topic], 4))

    # ~1,500 events/s from an endless stream until the worker has exited, then _AFTER_STOP more: the
    # stop lands mid-stream however slow the machine (a fixed-length stream could run out first)
    stopped = threading.Event()
    producing = PacedProducer(kafka_bootstrap, topic, _fleet_stream(runs=60), until=stopped.is_set,
                              then=_AFTER_STOP)
    log = tmp_path / "worker.log"
    worker = WorkerProcess(settings, log).start()
    try:
        worker.wait_ready()
        producing.start()

        def wait_for(count: int, timeout: float) -> int:
            return asyncio.run(count_records(kafka_bootstrap, settings.verdicts_topic, count, timeout))

        assert wait_for(900, 60) >= 900
        # a checkpoint covers part of the stream before the stop (quiet partitions wait for theirs), so the
        # restart continues from one and re-applies only what came after it; events still flow meanwhile
        time.sleep(checkpoint_wait_s(settings))
        getattr(worker, stop)()  # returns once the process has exited
        stopped.set()
        sources = producing.join(60)
        events = producing.sent
        killed_at = wait_for(len(sources), 3)  # every verdict published before the stop
        after = after_stop(settings)
        worker = WorkerProcess(settings, log).start()
        worker.wait_ready()

        by_source = verdicts_by_source(kafka_bootstrap, settings.verdicts_topic, sources, timeout=90)
    finally:
        stopped.set()  # ends the endless production also when the test failed before the stop
        worker.stop()

    assert killed_at < len(events), "the worker finished before it was stopped"
    missing = [s for s in sources if s not in by_source]
    assert missing == []
    duplicates = {s: v for s, v in by_source.items() if len(v) > 1}
    assert all(len(set(v)) == 1 for v in duplicates.values()), "a repeated verdict differs"
    keys = [e["run_id"] for e in events]
    want = _offline(events, sources, ENABLED, keys)
    got = [msgpack.unpackb(by_source[s][0]) for s in sources]
    mismatches = [i for i, (g, w) in enumerate(zip(got, want)) if not _same(g, w)]
    assert mismatches == []
    # OpenClaw blocks (the loopwatch verdict of a blocked call in a run the guard ended is "abort") and warnings
    assert sum(g.get("decision") == "block" for g in got) > 0 and sum(g["verdict"] == "warn" for g in got) > 0
    print(f"{stop} after {killed_at} verdicts of {len(events)} events; {len(duplicates)} byte-identical duplicate verdicts")
    return after


@pytest.mark.timeout(170)
@pytest.mark.parametrize("stop", ["kill", "stop"], ids=["kill-9", "sigterm"])
def test_a_worker_stopped_mid_stream_loses_nothing_and_applies_nothing_twice(kafka_bootstrap, tmp_path, stop):
    """kill -9, or SIGTERM (a graceful stop), while events flow; then a restart."""
    stopped_mid_stream_loses_nothing(kafka_bootstrap, tmp_path, stop)


@pytest.mark.timeout(170)
def test_a_worker_killed_while_its_partitions_wait_for_their_checkpoints_loses_nothing(kafka_bootstrap, tmp_path):
    """kill -9 with checkpoints by time only (5 s a partition, the default): up to 5 s of every partition's
    events are not checkpointed when it dies; the restart applies them once more, nothing twice."""
    stopped_mid_stream_loses_nothing(kafka_bootstrap, tmp_path, "kill", checkpoint_partition_interval_s=5.0,
                                     checkpoint_partition_events=1_000_000)


# ------------------------------------------------------------------------ idle expiry


@pytest.mark.timeout(180)
def test_idle_keys_expire_with_a_changelog_tombstone(kafka_bootstrap, tmp_path):
    async def run() -> None:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=1, state_ttl_s=1.0, expiry_interval_s=0.3)
        changelog = f"{settings.app_id}-states-changelog"
        async with running_worker(settings) as loopwatch:
            await produce(kafka_bootstrap, settings.input_topics[0], [(b"run-x", encode(_calls("run-x", 0, 1)[0]))])
            assert len(await consume_all(kafka_bootstrap, settings.verdicts_topic, 1, timeout=60)) == 1
            deadline = time.monotonic() + 60  # in the table from its checkpoint on
            while b"run-x" not in loopwatch.table.data and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert b"run-x" in loopwatch.table.data
            records = await consume_all(kafka_bootstrap, changelog, 2, timeout=60)
            deadline = time.monotonic() + 60  # out of the table once its tombstone is acknowledged
            while b"run-x" in loopwatch.table.data and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert b"run-x" not in loopwatch.table.data
        assert [(r.key, r.value is None) for r in records] == [(b"run-x", False), (b"run-x", True)]

    asyncio.run(run())
