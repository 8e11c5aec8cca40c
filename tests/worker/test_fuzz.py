"""Random records through a real worker: each input record gets exactly one output, and the worker keeps running.

The per-record path offline is covered by tests/worker/test_processor_properties.py;
this adds what only the worker does: keyless records through the rekey topic,
size checks against Kafka's limits, the latency metric, checkpoints of every
state. The records are seeded pseudo-random events with fields of any type,
lone surrogates (JSON), bytes (msgpack), huge integers, NaN, deep nesting,
long keys and ids, and garbage.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import msgpack
import pytest

from streams.wire.codecs import decode_event
from tests.worker_harness import checkpointed, consume_all, produce, running_worker, worker_settings

pytestmark = [pytest.mark.kafka]

RECORDS = 400
FIELDS = ["type", "run_id", "session_id", "session_key", "tool_call_id", "tool_name", "args", "result", "error",
          "event_id", "ts", "source", "agent_id", "params"]


def _text(rng: random.Random) -> str:
    alphabet = ["a", "r1", "s1", "c1", "read", "exec", "é", "\U0001F600", "\ud83d", "\udc00", " ", "\x00", ":"]
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 6)))


def _value(rng: random.Random, json_only: bool, depth: int = 0) -> Any:
    kind = rng.randrange(10 if depth < 3 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False, 0, -1, 2**63 - 1, 1.5, float("nan"), float("inf")])
    if kind == 2:
        return rng.choice([2**64, -(2**70), 10**300]) if json_only else rng.choice([2**63, -(2**63)])
    if kind in (3, 4, 5):
        return _text(rng)
    if kind == 6:
        return _text(rng) if json_only else rng.randbytes(rng.randrange(4))
    if kind in (7, 8):
        return [_value(rng, json_only, depth + 1) for _ in range(rng.randrange(3))]
    return {_text(rng): _value(rng, json_only, depth + 1) for _ in range(rng.randrange(3))}


def _event(rng: random.Random, json_only: bool) -> dict[str, Any]:
    event: dict[str, Any] = {"type": rng.choice(["tool_call", "tool_call", "tool_result", "compaction_retry"]),
                             "run_id": rng.choice(["r1", "r2", "r\ud83d" if json_only else "r3"]),
                             "session_id": "s1", "tool_call_id": f"c{rng.randrange(50)}",
                             "tool_name": rng.choice(["read", "exec", "process", "nope"]), "args": {"n": 1},
                             "result": rng.choice(["same", "other"])}
    for name in rng.sample(FIELDS, rng.randrange(4)):  # a few fields of any type, or gone
        if rng.random() < 0.2:
            event.pop(name, None)
        else:
            event[name] = _value(rng, json_only)
    return event


def _record(rng: random.Random) -> tuple[bytes | None, bytes]:
    roll = rng.random()
    if roll < 0.03:
        return b"r1", rng.choice([b"", b"\xc1\x00", b"[1]", b"{", b'{"args":' + b"[" * 5000 + b"]" * 5000 + b"}"])
    json_only = rng.random() < 0.5
    event = _event(rng, json_only)
    if roll < 0.06:  # hundreds of KB in one field: shortened verdicts, states kept in memory, size dead letters
        event[rng.choice(["tool_name", "run_id", "source", "type"])] = "x" * rng.choice([200_000, 450_000, 900_000])
    if json_only:
        value = json.dumps(event).encode("ascii")
    else:  # a lone surrogate as invalid UTF-8 in a msgpack string: undecodable, dead-lettered
        value = msgpack.packb(event, use_bin_type=True, unicode_errors="surrogatepass")
    key_roll = rng.random()
    if key_roll < 0.3:
        key = None  # keyless: rekeyed by the worker
    elif key_roll < 0.35:
        key = b"k" * 20_000
    else:
        key = str(event.get("run_id") or "r").encode("utf-8", "surrogatepass")[:100]
    return key, value


@pytest.mark.timeout(180)
def test_every_record_gets_one_verdict_or_one_dead_letter_and_the_worker_keeps_running(kafka_bootstrap, tmp_path):
    rng = random.Random(20261130)
    records = [_record(rng) for _ in range(RECORDS - 1)]
    # and one keyless record that cannot travel through the rekey topic with its derived key
    records.append((None, json.dumps({"type": "tool_call", "run_id": "r" * 300_000, "session_id": "s1",
                                      "args": {"pad": "y" * 690_000}}).encode()))

    async def run() -> None:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2)
        topic = settings.input_topics[0]
        async with running_worker(settings) as loopwatch:
            await produce(kafka_bootstrap, topic, records)
            deadline = asyncio.get_running_loop().time() + 150
            outputs: list[Any] = []
            while len(outputs) < RECORDS and asyncio.get_running_loop().time() < deadline:
                verdicts = await consume_all(kafka_bootstrap, settings.verdicts_topic, RECORDS, timeout=3)
                letters = await consume_all(kafka_bootstrap, settings.dead_letters_topic, RECORDS, timeout=3)
                outputs = [decode_event(v.value) for v in verdicts] + [msgpack.unpackb(d.value) for d in letters]
                assert loopwatch._failed is None and not loopwatch._tainted
            await checkpointed(loopwatch)
        sources = sorted((o["source"]["partition"], o["source"]["offset"]) for o in outputs)
        assert len(sources) == RECORDS and len(set(sources)) == RECORDS  # one output per input record
        kinds = {("verdict" if "verdict" in o else o["reason_class"]) for o in outputs}
        assert {"verdict", "decode", "schema", "size"} <= kinds  # the mix reached every path

    asyncio.run(run())
