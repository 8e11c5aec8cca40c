"""One batch through :meth:`Processor.handle`: each record to its end, what to publish and what to store."""

import asyncio
from types import SimpleNamespace

import msgpack

from streams.detection import Engine, OpenClawConfig
from streams.wire.codecs import decode_event
from streams.worker.processor import Processor, Topics
from streams.worker.rekey import decode_envelope, encode_envelope
from streams.worker.states import States, decode_state

ENABLED = OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}})
TOPICS = Topics("v", "l", "d", "app-rekey", "app-states-changelog")


def call(i: int, run: str = "r1") -> dict:
    return {"type": "tool_call", "run_id": run, "session_id": "s1", "tool_call_id": f"c{i}", "tool_name": "read",
            "args": {"path": "/a"}, "result": "same", "error": None, "event_id": f"e{i}", "ts": 1_700_000_000_000 + i}


def rec(offset: int, key: bytes | None, value: bytes | None, timestamp: int = 1_700_000_000_500):
    return SimpleNamespace(key=key, value=value, offset=offset, timestamp=timestamp)


def tp(topic: str, partition: int):
    return SimpleNamespace(topic=topic, partition=partition)


def make(table: dict | None = None, **kwargs) -> tuple[Processor, States]:
    proc = Processor(Engine(ENABLED), topics=TOPICS, **kwargs)
    proc.states = states = States(table if table is not None else {}, proc.encode_state)
    return proc, states


def pack(event: dict) -> bytes:
    return msgpack.packb(event, use_bin_type=True)


def test_a_batch_gives_verdicts_forwards_and_dead_letters_in_order_and_the_keys_changed():
    proc, states = make()
    keyless = pack(call(2, run="r2"))
    done = proc.handle([
        (tp("events", 1), [rec(10, b"r1", pack(call(1))), rec(11, None, keyless), rec(12, b"r1", b"\xc1bad")]),
        (tp("app-rekey", 1), [rec(5, b"r3", encode_envelope("events", 0, 7, pack(call(3, run="r3")), 42)),
                              rec(6, b"x", b"not an envelope")]),
    ], now=100.0)
    topics = [(topic, key, fallback) for topic, key, _, fallback in done.publish]
    assert topics == [("v", b"r1", 0), ("app-rekey", b"r2", 0), ("d", b"r1", 1), ("v", b"r3", 0), ("d", b"x", 1)]
    verdict = decode_event(done.publish[0][2])
    assert verdict["event_id"] == "e1" and verdict["source"] == {"topic": "events", "partition": 1, "offset": 10}
    assert decode_envelope(done.publish[1][2]) == ("events", 1, 11, keyless, 1_700_000_000_500)
    letter = msgpack.unpackb(done.publish[2][2])
    assert letter["reason_class"] == "decode" and letter["source"]["offset"] == 12
    rekeyed = decode_event(done.publish[3][2])  # applied under the rekey record's key, at its origin
    assert rekeyed["key"] == "r3" and rekeyed["source"] == {"topic": "events", "partition": 0, "offset": 7}
    assert msgpack.unpackb(done.publish[4][2])["reason"].startswith("not a loopwatch rekey record")
    assert done.changed == {b"r1": 1, b"r3": 1}
    assert done.sent_ms == [1_700_000_000_001, 1_700_000_000_003]  # the events' ts
    assert states.cache[b"r3"].last_offsets == {"rekey:events:0": 7}
    assert states.last_seen == {b"r1": 100.0, b"r3": 100.0}


def test_an_unreadable_stored_state_is_dead_lettered_and_the_key_starts_afresh():
    proc, states = make({b"r1": b"\x93\x09garbage"})
    done = proc.handle([(tp("events", 2), [rec(0, b"r1", pack(call(1)))])], now=0.0)
    assert [(topic, key, fallback) for topic, key, _, fallback in done.publish] == [("d", b"r1", 2), ("v", b"r1", 0)]
    letter = msgpack.unpackb(done.publish[0][2])
    assert letter["reason_class"] == "state" and letter["value"] == b"\x93\x09garbage"
    assert letter["source"] == {"topic": "app-states-changelog", "partition": 2, "offset": -1}
    assert states.cache[b"r1"].last_offsets == {"events:2": 0}


def test_an_invalid_event_of_a_new_key_leaves_no_state_and_a_redelivered_one_nothing_to_publish():
    proc, states = make()
    done = proc.handle([(tp("events", 0), [rec(0, b"r9", pack({"type": "tool_call"}))])], now=0.0)
    assert [(topic, key) for topic, key, _, _ in done.publish] == [("d", b"r9")] and not done.changed
    assert b"r9" not in states.cache and b"r9" not in states.last_seen
    first = proc.handle([(tp("events", 0), [rec(1, b"r1", pack(call(1)))])], now=0.0)
    again = proc.handle([(tp("events", 0), [rec(1, b"r1", pack(call(1)))])], now=0.0)
    assert len(first.publish) == 1 and not again.publish and not again.changed


def test_the_snapshot_in_flight_keeps_a_state_as_it_was_before_the_next_event():
    proc, states = make()
    proc.handle([(tp("events", 0), [rec(0, b"r1", pack(call(1)))])], now=0.0)
    before = proc.encode_state(states.cache[b"r1"])
    states.snapshot({b"r1": 0})
    proc.handle([(tp("events", 0), [rec(1, b"r1", pack(call(2)))])], now=0.0)  # changes r1 first
    encoded = asyncio.run(states.encode_snapshot())
    assert encoded == [(b"r1", before, 0)]
    assert decode_state(before).last_offsets == {"events:0": 0}
    assert states.cache[b"r1"].last_offsets == {"events:0": 1}


def test_observations_of_the_fleet_view_are_published_after_their_verdict():
    seen = []

    def observe(record, event, key, found, add):
        seen.append(record["event_id"])
        add("signals", b"sig", b"obs")

    proc, _ = make(observe=observe)
    done = proc.handle([(tp("events", 0), [rec(0, b"r1", pack(call(1)))])], now=0.0)
    assert seen == ["e1"]
    assert [(topic, key, value) for topic, key, value, _ in done.publish][1:] == [("signals", b"sig", b"obs")]
