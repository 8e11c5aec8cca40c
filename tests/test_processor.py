"""The worker's per-event logic without Kafka: keys, dedupe of re-delivered events, records, dead letters."""

import json

import msgpack
import pytest

from streams import metrics
from streams.conformance import load_scenarios, spec_view
from streams.detection import Engine, OpenClawConfig, SessionStore
from streams.keys import partition_key
from streams.processor import (
    APPLIED, DEAD_LETTER, REPLAYED, SKIPPED, Entry, Processor, Source, loop_events,
)

ENABLED = OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}})
VECTORS = "tests/fixtures/vectors.jsonl"


def call(i: int, run: str = "r1", session: str = "s1", **extra) -> dict:
    return {"type": "tool_call", "run_id": run, "session_id": session, "tool_call_id": f"c{i}",
            "tool_name": "read", "args": {"path": "/a"}, "result": "same", "error": None,
            "event_id": f"e{i}", **extra}


def processor(**kwargs) -> Processor:
    return Processor(Engine(ENABLED), clock=lambda: 1_700_000_000.0, **kwargs)


def src(offset: int, partition: int = 0) -> Source:
    return Source("events", partition, offset)


def test_verdict_record_shape():
    proc = processor()
    out = proc.apply(b"r1", call(0, ts=1_699_999_999_000, source={"path": "f", "line": 3}), src(7), Entry())
    assert out.kind == APPLIED
    record = msgpack.unpackb(out.verdict)
    assert record["event_id"] == "e0" and record["key"] == "r1" and record["run_id"] == "r1"
    assert record["session_id"] == "s1" and record["tool_call_id"] == "c0"
    assert record["source"] == {"topic": "events", "partition": 0, "offset": 7}
    assert record["event_source"] == {"path": "f", "line": 3}
    assert record["event_ts"] == 1_699_999_999_000 and record["verdict_ts"] == 1_700_000_000_000
    assert record["verdict"] == "allow" and record["decision"] == "allow" and record["evidence"] == []


def test_json_codec():
    out = processor(codec="json").apply(b"r1", call(0), src(0), Entry())
    assert json.loads(out.verdict)["verdict"] == "allow"


def test_evidence_refs_are_event_id_partition_offset():
    proc, entry = processor(), Entry()
    outs = [proc.apply(b"r1", call(i), src(i, 1), entry) for i in range(11)]
    record = msgpack.unpackb(outs[-1].verdict)
    assert record["verdict"] == "warn"
    assert record["evidence"][0] == ["e0", 1, 0]
    [warn] = [msgpack.unpackb(v) for v in outs[-1].loop_events]
    assert warn["action"] == "warn" and warn["detector"] == "generic_repeat" and warn["count"] == 10
    assert warn["evidence"] == record["evidence"] and warn["source"]["offset"] == 10


@pytest.mark.parametrize("count, action", [(12, "suppressed"), (21, "block")], ids=["suppressed", "block"])
def test_loop_event_actions(count, action):
    proc, entry = processor(), Entry()
    for i in range(count - 1):
        proc.apply(b"r1", call(i), src(i), entry)
    out = proc.apply(b"r1", call(count - 1), src(count - 1), entry)
    assert [msgpack.unpackb(v)["action"] for v in out.loop_events] == [action]


def test_abort_loop_event():
    proc, entry = Processor(Engine()), Entry()  # defaults: guard on, window 3
    proc.apply(b"r1", {"type": "compaction_retry", "run_id": "r1", "session_id": "s1"}, src(0), entry)
    outs = [proc.apply(b"r1", call(i), src(i + 1), entry) for i in range(3)]
    assert msgpack.unpackb(outs[-1].verdict)["verdict"] == "abort"
    [abort] = [msgpack.unpackb(v) for v in outs[-1].loop_events]
    assert abort["action"] == "abort" and abort["detector"] == "compaction_loop_persisted"
    assert abort["level"] == "critical" and len(abort["evidence"]) == 3


def applied_one_by_one(proc, entry, events_and_sources):
    """Each event its own batch (the entry written after each), as at low load."""
    outs = []
    for event, source in events_and_sources:
        outs.append(proc.apply(b"r1", event, source, entry))
        entry.seal()
    return outs


def test_redelivered_last_event_gets_identical_verdict_and_state_is_not_touched():
    proc, entry = processor(), Entry()
    first = applied_one_by_one(proc, entry, [(call(i), src(i)) for i in range(12)])
    before = entry.to_bytes()
    again = proc.apply(b"r1", call(11), src(11), entry)
    assert again.kind == REPLAYED and again.verdict == first[-1].verdict
    assert again.loop_events == first[-1].loop_events
    assert proc.apply(b"r1", call(5), src(5), entry).kind == SKIPPED
    assert entry.to_bytes() == before


def test_a_batch_keeps_every_verdict_it_applied_until_the_next_batch_of_that_partition():
    proc, entry = processor(), Entry()
    applied_one_by_one(proc, entry, [(call(i), src(i)) for i in range(3)])
    batch = [proc.apply(b"r1", call(i), src(i), entry) for i in range(3, 7)]  # one batch, one write
    assert entry.batch_bytes == sum(len(o.verdict) for o in batch)
    entry.seal()
    stored = Entry.from_bytes(entry.to_bytes())
    for i, out in zip(range(3, 7), batch):  # any of them re-delivered: its own verdict, byte-identical
        again = proc.apply(b"r1", call(i), src(i), stored)
        assert again.kind == REPLAYED and again.verdict == out.verdict
    assert proc.apply(b"r1", call(2), src(2), stored).kind == SKIPPED  # published before that write
    assert stored.state == entry.state
    # the next batch of the partition replaces the list; a batch on another partition leaves it
    stored.seal()
    proc.apply(b"r1", call(7), src(3, partition=1), stored)
    stored.seal()
    assert proc.apply(b"r1", call(4), src(4), stored).kind == REPLAYED
    stored.seal()
    proc.apply(b"r1", call(8), src(7), stored)
    stored.seal()
    assert proc.apply(b"r1", call(4), src(4), stored).kind == SKIPPED
    assert [o for o, _ in stored.verdicts["events:0"]] == [7]


def test_verdicts_replayed_in_a_batch_that_then_applies_stay_stored():
    """Re-delivery after a crash: the stored ones are answered again, then new events applied; one write."""
    proc, entry = processor(), Entry()
    old = [proc.apply(b"r1", call(i), src(i), entry) for i in range(3)]
    entry.seal()
    again = [proc.apply(b"r1", call(i), src(i), entry) for i in (1, 2)]  # 0 was committed
    new = proc.apply(b"r1", call(3), src(3), entry)
    assert [o.kind for o in again] == [REPLAYED, REPLAYED] and new.kind == APPLIED
    entry.seal()
    stored = Entry.from_bytes(entry.to_bytes())
    assert [o for o, _ in stored.verdicts["events:0"]] == [1, 2, 3]
    assert proc.apply(b"r1", call(2), src(2), stored).verdict == old[2].verdict


def test_format_1_entries_are_read():
    proc, entry = processor(), Entry()
    out = proc.apply(b"r1", call(0), src(4), entry)
    v1 = msgpack.packb([1, entry.state.to_bytes(), {"events:0": out.verdict}], use_bin_type=True)
    restored = Entry.from_bytes(v1)
    assert restored.verdicts == {"events:0": [[4, out.verdict]]}
    assert proc.apply(b"r1", call(0), src(4), restored).verdict == out.verdict


def test_offsets_are_tracked_per_topic_partition():
    proc, entry = processor(), Entry()
    proc.apply(b"r1", call(0), src(5, 0), entry)
    assert proc.apply(b"r1", call(1), src(3, 1), entry).kind == APPLIED
    assert entry.state.last_offsets == {"events:0": 5, "events:1": 3}


def test_entry_round_trip_through_the_changelog_form():
    proc, entry = processor(), Entry()
    outs = [proc.apply(b"r1", call(i), src(i), entry) for i in range(15)]
    restored = Entry.from_bytes(entry.to_bytes())
    assert restored.state == entry.state and restored.verdicts == entry.verdicts
    assert proc.apply(b"r1", call(14), src(14), restored).verdict == outs[-1].verdict
    nxt_a = proc.apply(b"r1", call(15), src(15), entry)
    nxt_b = proc.apply(b"r1", call(15), src(15), restored)
    assert nxt_a.verdict == nxt_b.verdict


def test_entry_rejects_other_bytes():
    with pytest.raises(ValueError, match="unknown format version"):
        Entry.from_bytes(msgpack.packb([9, b"", {}]))


@pytest.mark.parametrize("raw, reason", [
    (b"\xc1garbage", "invalid msgpack"),
    (b"[1, 2]", "invalid msgpack"),  # no leading "{": read as msgpack
    (b" [1, 2]", "must be a map/object"),
    (b"", "empty record value"),
    (None, "empty record value"),
], ids=["garbage", "json-array", "json-array-after-space", "empty", "none"])
def test_undecodable_records_are_dead_lettered(raw, reason):
    before = metrics.DEAD_LETTERS.labels("decode")._value.get()
    event, out = processor().decode(raw, b"k", src(3))
    assert event is None and out.kind == DEAD_LETTER
    letter = msgpack.unpackb(out.dead_letter)
    assert letter["reason_class"] == "decode" and reason in letter["reason"]
    assert letter["source"] == {"topic": "events", "partition": 0, "offset": 3}
    assert letter["key"] == b"k" and letter["value"] == (raw or b"")
    assert metrics.DEAD_LETTERS.labels("decode")._value.get() == before + 1


def test_invalid_event_is_dead_lettered_and_state_unchanged():
    proc, entry = processor(), Entry()
    proc.apply(b"r1", call(0), src(0), entry)
    before = entry.to_bytes()
    out = proc.apply(b"r1", {"type": "nope"}, src(1), entry, raw=b'{"type":"nope"}')
    assert out.kind == DEAD_LETTER
    letter = msgpack.unpackb(out.dead_letter)
    assert letter["reason_class"] == "schema" and "type must be one of" in letter["reason"]
    assert letter["value"] == b'{"type":"nope"}'
    assert entry.to_bytes() == before


@pytest.mark.parametrize("key_by, record_key, expected", [
    ("run", b"given", b"given"),
    ("run", None, b"r1"),
    ("session", None, b"sk"),
    ("run", b"", b"r1"),
], ids=["record-key", "run", "session", "empty-record-key"])
def test_state_key(key_by, record_key, expected):
    event = call(0, session_key="sk")
    assert processor(key_by=key_by).state_key(record_key, event) == expected


def test_metrics_are_counted():
    proc, entry = processor(), Entry()
    events_before = metrics.EVENTS.labels("tool_call")._value.get()
    warn_before = metrics.DETECTIONS.labels("generic_repeat", "warning", "warn")._value.get()
    for i in range(11):
        proc.apply(b"r1", call(i), src(i), entry)
    assert metrics.EVENTS.labels("tool_call")._value.get() == events_before + 11
    assert metrics.DETECTIONS.labels("generic_repeat", "warning", "warn")._value.get() == warn_before + 1


def test_loop_events_of_a_plain_verdict_are_empty():
    assert loop_events({"detection": {"stuck": False}, "guard": {"abort": False}}) == []


@pytest.mark.parametrize("scenario", list(load_scenarios(VECTORS)), ids=lambda s: s["name"])
def test_processor_with_session_keys_matches_session_store(scenario):
    """The processor over per-key entries (session keys) gives the offline engine's verdicts."""
    engine = Engine(OpenClawConfig(scenario.get("config") or {}))
    proc, store, entries = Processor(engine, key_by="session"), SessionStore(engine), {}
    for offset, event in enumerate(scenario["events"]):
        key = proc.state_key(None, event)
        out = proc.apply(key, event, src(offset), entries.setdefault(key, Entry()))
        want = store.process(event, [None, 0, offset])
        got = msgpack.unpackb(out.verdict)
        assert spec_view(got) == spec_view(want) and got["evidence"] == want["evidence"]
        assert key == partition_key(event, "session").encode()
