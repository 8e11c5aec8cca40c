"""The worker's per-event logic without Kafka: keys, skipping re-delivered events, determinism, records, dead letters."""

import json

import msgpack
import pytest

from tests.one_record import handle_one
from tests.shared_vectors import shared_path, shared_scenarios, skip_without
from streams.worker import metrics
from streams.wire.codecs import BROKER_MESSAGE_MAX_BYTES, decode_event, fits, record_size
from streams.offline.conformance import load_scenarios, spec_view
from streams.detection import Engine, OpenClawConfig, SessionState, SessionStore
from streams.wire.keys import partition_key
from streams.worker.processor import APPLIED, DEAD_LETTER, SKIPPED, Processor
from streams.worker.records import Source, loop_events, shortened
from streams.worker.states import decode_state, encode_state

ENABLED = OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}})
VECTORS = shared_path("vectors.jsonl")  # not part of the project: no scenarios where absent


def call(i: int, run: str = "r1", session: str = "s1", **extra) -> dict:
    return {"type": "tool_call", "run_id": run, "session_id": session, "tool_call_id": f"c{i}",
            "tool_name": "read", "args": {"path": "/a"}, "result": "same", "error": None,
            "event_id": f"e{i}", **extra}


def processor(**kwargs) -> Processor:
    return Processor(Engine(ENABLED), **kwargs)


def src(offset: int, partition: int = 0) -> Source:
    return Source("events", partition, offset)


def test_verdict_record_shape():
    proc = processor()
    out = proc.apply(b"r1", call(0, ts=1_699_999_999_000, source={"path": "f", "line": 3}), src(7), SessionState())
    assert out.kind == APPLIED
    record = msgpack.unpackb(out.verdict)
    assert record["event_id"] == "e0" and record["key"] == "r1" and record["run_id"] == "r1"
    assert record["session_id"] == "s1" and record["tool_call_id"] == "c0"
    assert record["source"] == {"topic": "events", "partition": 0, "offset": 7}
    assert record["event_source"] == {"path": "f", "line": 3}
    assert record["event_ts"] == 1_699_999_999_000 and "verdict_ts" not in record
    assert record["verdict"] == "allow" and record["decision"] == "allow" and record["evidence"] == []


def test_json_codec():
    out = processor(codec="json").apply(b"r1", call(0), src(0), SessionState())
    assert json.loads(out.verdict)["verdict"] == "allow"


def test_json_codec_sends_a_verdict_json_cannot_carry_as_msgpack():
    # a msgpack event's free-form `source` may hold bytes; its verdict copies it as event_source
    out = processor(codec="json").apply(b"r1", call(0, source={"blob": b"\xff"}), src(0), SessionState())
    record = decode_event(out.verdict)
    assert out.verdict[:1] != b"{" and record["event_source"] == {"blob": b"\xff"} and record["verdict"] == "allow"


def test_evidence_refs_are_event_id_partition_offset():
    proc, state = processor(), SessionState()
    outs = [proc.apply(b"r1", call(i), src(i, 1), state) for i in range(11)]
    record = msgpack.unpackb(outs[-1].verdict)
    assert record["verdict"] == "warn"
    assert record["evidence"][0] == ["e0", 1, 0]
    [warn] = [msgpack.unpackb(v) for v in outs[-1].loop_events]
    assert warn["action"] == "warn" and warn["detector"] == "generic_repeat" and warn["count"] == 10
    assert warn["evidence"] == record["evidence"] and warn["source"]["offset"] == 10


@pytest.mark.parametrize("count, action", [(12, "suppressed"), (21, "block")], ids=["suppressed", "block"])
def test_loop_event_actions(count, action):
    proc, state = processor(), SessionState()
    for i in range(count - 1):
        proc.apply(b"r1", call(i), src(i), state)
    out = proc.apply(b"r1", call(count - 1), src(count - 1), state)
    assert [msgpack.unpackb(v)["action"] for v in out.loop_events] == [action]


def test_abort_loop_event():
    proc, state = Processor(Engine()), SessionState()  # defaults: guard on, window 3
    proc.apply(b"r1", {"type": "compaction_retry", "run_id": "r1", "session_id": "s1"}, src(0), state)
    outs = [proc.apply(b"r1", call(i), src(i + 1), state) for i in range(3)]
    assert msgpack.unpackb(outs[-1].verdict)["verdict"] == "abort"
    [abort] = [msgpack.unpackb(v) for v in outs[-1].loop_events]
    assert abort["action"] == "abort" and abort["detector"] == "compaction_loop_persisted"
    assert abort["level"] == "critical" and len(abort["evidence"]) == 3


def test_redelivered_events_are_skipped_and_state_is_not_touched():
    proc, state = processor(), SessionState()
    for i in range(12):
        proc.apply(b"r1", call(i), src(i), state)
    before = state.to_bytes()
    for i in (11, 5, 0):
        again = proc.apply(b"r1", call(i), src(i), state)
        assert again.kind == SKIPPED and again.verdict is None and again.loop_events == []
    assert state.to_bytes() == before


def test_keyed_and_rekeyed_records_of_one_partition_are_deduplicated_apart():
    # A keyless record forwarded through the rekey topic reaches the key's state after
    # keyed records that followed it in the input partition: it must still be applied,
    # and a second forward of it (after a crash) still skipped.
    proc, state = processor(), SessionState()
    assert proc.apply(b"r1", call(7), src(7), state).kind == APPLIED
    forwarded = Source("events", 0, 5, rekeyed=True)
    assert proc.apply(b"r1", call(5), forwarded, state).kind == APPLIED
    assert proc.apply(b"r1", call(5), forwarded, state).kind == SKIPPED
    assert proc.apply(b"r1", call(6), src(6), state).kind == SKIPPED
    assert state.last_offsets == {"events:0": 7, "rekey:events:0": 5}
    assert len(state.history) == 2


def test_reapplying_to_a_checkpointed_state_gives_byte_identical_records():
    """Crash recovery: events after the checkpoint re-applied to the restored state publish the same bytes."""
    proc = processor()
    live = SessionState()
    events = [call(i) for i in range(25)]
    checkpoint = None
    first = []
    for i, event in enumerate(events):
        first.append(proc.apply(b"r1", event, src(i), live))
        if i == 8:
            checkpoint = encode_state(live, proc.engine)
    restored = decode_state(checkpoint)
    again = [proc.apply(b"r1", e, src(i), restored) for i, e in enumerate(events)]
    assert [o.kind for o in again] == [SKIPPED] * 9 + [APPLIED] * 16
    assert [o.verdict for o in again[9:]] == [o.verdict for o in first[9:]]
    assert [o.loop_events for o in again[9:]] == [o.loop_events for o in first[9:]]
    assert any(o.loop_events for o in first[9:])  # warnings and blocks included
    assert encode_state(restored, proc.engine) == encode_state(live, proc.engine)


def test_state_table_rejects_other_bytes():
    with pytest.raises(ValueError, match="unknown format version"):
        decode_state(msgpack.packb([9, b"", {}]))


@pytest.mark.parametrize("raw, reason", [
    (b"\xc1garbage", "invalid msgpack"),
    (b"[1, 2]", "must be a map/object"),  # read as JSON: a msgpack map never starts with "["
    (b" [1, 2]", "must be a map/object"),
    (b"", "empty record value"),
    (None, "empty record value"),
    (b'{"args":' + b"[" * 100_000 + b"]" * 100_000 + b"}", "invalid JSON: nested too deeply to decode"),
    (b"\x81\xa4args" + b"\x91" * 100_000 + b"\xc0", "invalid msgpack: StackError"),
], ids=["garbage", "json-array", "json-array-after-space", "empty", "none", "deep-json", "deep-msgpack"])
def test_undecodable_records_are_dead_lettered(raw, reason):
    before = metrics.DEAD_LETTERS.labels("decode")._value.get()
    proc = processor()
    [(topic, key, value, fallback)] = handle_one(proc, raw, b"k", offset=3).publish
    assert topic == proc.topics.dead_letters and key == b"k" and fallback == 0
    assert not proc.states.cache  # nothing of the key is kept
    letter = msgpack.unpackb(value)
    assert letter["reason_class"] == "decode" and reason in letter["reason"]
    assert letter["source"] == {"topic": "events", "partition": 0, "offset": 3}
    assert letter["key"] == b"k" and letter["value"] == (raw or b"")
    assert metrics.DEAD_LETTERS.labels("decode")._value.get() == before + 1


def test_invalid_event_is_dead_lettered_and_state_unchanged():
    proc, state = processor(), SessionState()
    proc.apply(b"r1", call(0), src(0), state)
    before = state.to_bytes()
    out = proc.apply(b"r1", {"type": "nope"}, src(1), state, raw=b'{"type":"nope"}')
    assert out.kind == DEAD_LETTER
    letter = msgpack.unpackb(out.dead_letter)
    assert letter["reason_class"] == "schema" and "type must be one of" in letter["reason"]
    assert letter["value"] == b'{"type":"nope"}'
    assert state.to_bytes() == before


@pytest.mark.parametrize("key_by, record_key, expected", [
    ("run", b"given", b"given"),
    ("run", None, b"r1"),
    ("session", None, b"sk"),
    ("run", b"", b"r1"),
], ids=["record-key", "run", "session", "empty-record-key"])
def test_state_key(key_by, record_key, expected):
    event = call(0, session_key="sk")
    assert processor(key_by=key_by).state_key(record_key, event) == expected


def _sample(name, labels=None):
    return metrics.REGISTRY.get_sample_value(name, labels or {}) or 0.0


def test_metrics_are_counted_and_published_per_batch():
    proc, state = processor(), SessionState()
    events_before = _sample("loopwatch_events_total", {"type": "tool_call"})
    allow_before = _sample("loopwatch_verdicts_total", {"verdict": "allow"})
    warn_before = _sample("loopwatch_detections_total",
                          {"kind": "detection", "detector": "generic_repeat", "level": "warning", "action": "warn",
                           "enforced": "true"})
    timed_before = _sample("loopwatch_engine_seconds_count")
    redelivered_before = _sample("loopwatch_redelivered_events_total")
    for i in range(11):
        proc.apply(b"r1", call(i), src(i), state)
    assert proc.apply(b"r1", call(3), src(3), state).kind == SKIPPED
    # detections are counted at once; the per-event series when the batch is flushed
    assert _sample("loopwatch_detections_total",
                   {"kind": "detection", "detector": "generic_repeat", "level": "warning", "action": "warn",
                           "enforced": "true"}) == warn_before + 1
    assert _sample("loopwatch_events_total", {"type": "tool_call"}) == events_before
    proc.flush_metrics()
    assert _sample("loopwatch_events_total", {"type": "tool_call"}) == events_before + 11
    assert _sample("loopwatch_verdicts_total", {"verdict": "allow"}) == allow_before + 10
    assert _sample("loopwatch_engine_seconds_count") == timed_before + 11
    assert _sample("loopwatch_redelivered_events_total") == redelivered_before + 1
    proc.flush_metrics()  # nothing new: nothing added
    assert _sample("loopwatch_events_total", {"type": "tool_call"}) == events_before + 11


def test_observe_many_equals_one_observe_per_value():
    from prometheus_client import CollectorRegistry, Histogram

    values = [0.0, 0.001, 0.0010001, 0.003, 0.2, 0.25, 7.5, 100.0, 0.025]
    registry_one, registry_many = CollectorRegistry(), CollectorRegistry()
    one = Histogram("h", "h", buckets=(0.001, 0.025, 0.25, 10.0), registry=registry_one)
    many = Histogram("h", "h", buckets=(0.001, 0.025, 0.25, 10.0), registry=registry_many)
    for value in values:
        one.observe(value)
    metrics.observe_many(many, values)
    metrics.observe_many(many, [])
    samples = lambda registry: [(s.name, s.labels, s.value) for m in registry.collect() for s in m.samples
                                if s.name.endswith(("_bucket", "_count"))]
    assert samples(registry_many) == samples(registry_one)
    assert registry_many.get_sample_value("h_sum") == pytest.approx(registry_one.get_sample_value("h_sum"))
    assert registry_many.get_sample_value("h_bucket", {"le": "0.001"}) == 2
    assert registry_many.get_sample_value("h_bucket", {"le": "10.0"}) == 8
    assert registry_many.get_sample_value("h_count") == 9


def test_loop_events_of_a_plain_verdict_are_empty():
    assert loop_events({"detection": {"stuck": False}, "guard": {"abort": False}}) == []


@pytest.mark.parametrize("scenario", shared_scenarios("vectors.jsonl"), ids=lambda s: s["name"])
def test_processor_with_session_keys_matches_session_store(scenario):
    """The processor over per-key states (session keys) gives the offline engine's verdicts."""
    engine = Engine(OpenClawConfig(scenario.get("config") or {}))
    proc, store, states = Processor(engine, key_by="session"), SessionStore(engine), {}
    for offset, event in enumerate(scenario["events"]):
        key = proc.state_key(None, event)
        out = proc.apply(key, event, src(offset), states.setdefault(key, SessionState()))
        want = store.process(event, [None, 0, offset])
        got = msgpack.unpackb(out.verdict)
        assert spec_view(got) == spec_view(want) and got["evidence"] == want["evidence"]
        assert key == partition_key(event, "session").encode()


def test_a_dead_letter_fits_beside_its_record_key_so_it_keeps_the_key():
    proc = processor()
    raw = b"\xc1" + b"z" * 1_200_000
    encoded = proc.dead_letter(raw, b"k", src(3), "decode", "invalid msgpack").dead_letter
    letter = msgpack.unpackb(encoded)
    assert len(b"k") + len(encoded) == 1_000_000 and fits(b"k", encoded)  # cut to the limit exactly
    assert raw.startswith(letter["value"]) and len(letter["value"]) > 999_800
    assert (letter["value_truncated"], letter["value_size"]) == (True, 1_200_001)
    # a long key: the key field is cut to 1,024 bytes (key_size says how long it was), the value takes what is
    # left beside the record key, and a reason quoting a huge value is cut
    encoded = proc.dead_letter(raw, b"k" * 100_000, src(3), "schema", "got " + "x" * 900_000).dead_letter
    long = msgpack.unpackb(encoded)
    assert (long["key"], long["key_size"]) == (b"k" * 1_024, 100_000)
    assert len(encoded) == 1_000_000 - 100_000 and raw.startswith(long["value"])
    assert long["reason"] == "got " + "x" * 1_020
    huge = proc.dead_letter(b"\xc1" * 10, b"k" * 600_000, src(5), "decode", "invalid msgpack").dead_letter
    assert msgpack.unpackb(huge)["value"] == b"\xc1" * 10 and fits(b"k" * 600_000, huge)  # not 2 x 600 KB
    small = msgpack.unpackb(proc.dead_letter(b"\xc1", b"k", src(4), "decode", "x").dead_letter)
    assert small == {"reason_class": "decode", "reason": "x", "source": {"topic": "events", "partition": 0,
                                                                          "offset": 4}, "key": b"k", "value": b"\xc1"}


def test_a_verdict_too_large_to_publish_is_shortened_keeping_the_decision():
    proc, state = processor(), SessionState()
    name = "t" * 400_000  # the verdict and its warning each repeat the tool name
    outs = [proc.apply(b"r1", call(i, tool_name=name), src(i), state) for i in range(11)]
    record = msgpack.unpackb(outs[-1].verdict)
    assert (record["event_id"], record["verdict"], record["detection"]["count"]) == ("e10", "warn", 10)
    assert record["tool_name"] == "t" * 1_024 and record["truncated"] > 800_000
    [warning] = [msgpack.unpackb(e) for e in outs[-1].loop_events]
    assert (warning["detector"], warning["action"], warning["tool_name"]) == ("generic_repeat", "warn", "t" * 1_024)
    assert warning["truncated"] > 400_000 and max(len(e) for e in [outs[-1].verdict, *outs[-1].loop_events]) < 20_000
    assert "truncated" not in msgpack.unpackb(proc.apply(b"r2", call(0, run="r2"), src(11), SessionState()).verdict)


def test_a_stub_keeps_the_top_level_scalars_and_source():
    record = {"event_id": "e1", "verdict": "allow", "source": {"topic": "t", "partition": 0, "offset": 1},
              "event_source": {"k" * 2_000_000: 1}, "evidence": [["x" * 1_000, 0, i] for i in range(2_000)]}
    assert shortened(record, 4_000_000, stub=True) == {"event_id": "e1", "verdict": "allow", "truncated": 4_000_000,
                                            "source": {"topic": "t", "partition": 0, "offset": 1}}


def test_a_long_record_key_leaves_less_room_for_the_verdict():
    event = call(0, tool_name="t" * 470_000)  # about 940 KB of verdict: tool name and args hash
    assert "truncated" not in msgpack.unpackb(processor().apply(b"r1", event, src(0), SessionState()).verdict)
    shortened_verdict = msgpack.unpackb(processor().apply(b"r" * 100_000, event, src(0), SessionState()).verdict)
    assert shortened_verdict["truncated"] > 900_000 and shortened_verdict["verdict"] == "allow"


@pytest.mark.parametrize("codec", ["msgpack", "json"])
def test_shortening_never_raises_and_what_is_published_fits(codec):
    proc = processor(codec=codec)
    deep: list = []
    for _ in range(600):
        deep = [deep]
    cases = [
        (b"r1", call(0, tool_name="t" * 600_000, source={"n": 10**30})),  # an integer only JSON carries
        (b"k" * 990_000, call(0, ts=10**400)),
        (b"k" * 990_000, call(0, source=deep)),  # nested deeper than a recursive cut could go
        (b"k" * 985_000, call(0, event_id="e" * 61_000)),  # event_id kept to 64 KiB: then a stub
    ]
    for key, event in cases:
        outcome = proc.apply(key, event, src(0), SessionState())
        assert outcome.kind == APPLIED and fits(key, outcome.verdict)
        assert decode_event(outcome.verdict)["verdict"] == "allow" and decode_event(outcome.verdict)["truncated"]
    # a key within a few hundred bytes of the broker's limit leaves room for nothing: the stub goes anyway
    stub = decode_event(proc.apply(b"k" * 1_047_500, call(0), src(0), SessionState()).verdict)
    assert stub["verdict"] == "allow" and "evidence" not in stub and stub["truncated"] > 0


def test_what_is_published_stays_within_the_brokers_limit_for_any_input_it_accepted():
    def largest(key_of, value_of, start):  # the largest n whose input record the broker takes
        n = start
        while record_size(key_of(n + 1), value_of(n + 1)) <= BROKER_MESSAGE_MAX_BYTES:
            n += 1
        return n

    proc = processor()
    # an ExtType in the free-form source is neither cut nor dropped by a generic walk
    ext = lambda n: msgpack.packb({"type": "tool_call", "session_id": "s", "tool_name": "t", "event_id": "e1",  # noqa: E731
                                   "source": msgpack.ExtType(5, b"x" * n)}, use_bin_type=True)
    raw = ext(largest(lambda n: b"run-1", ext, 1_048_400))
    out = proc.apply(b"run-1", decode_event(raw), src(7), SessionState(), raw)
    assert record_size(b"run-1", out.verdict) <= BROKER_MESSAGE_MAX_BYTES and decode_event(out.verdict)["truncated"]
    # emoji escaped as JSON (a lone surrogate forces it) grow 3x: the stub keeps a few short fields only
    smile = "\U0001F600" * 1_024
    event = {"type": "tool_call", "session_id": "\udc00" + smile[1:], "run_id": smile, "event_id": smile,
             "tool_call_id": smile, "tool_name": smile}
    key = ("\U0001F600" * 247_000).encode()
    out = proc.apply(key, event, src(8), SessionState())
    assert record_size(key, out.verdict) <= BROKER_MESSAGE_MAX_BYTES
    # a key that leaves no room beside even a dead letter: a small one (Outputs.add then leaves the key out)
    huge = b"k" * largest(lambda n: b"k" * n, lambda n: b"\xc1", 1_048_000)
    [(_, _, dead, _)] = handle_one(proc, b"\xc1", huge, offset=9).publish
    assert not fits(huge, dead) and record_size(None, dead) < 2_000
    assert msgpack.unpackb(dead)["key_size"] == len(huge)


def test_results_without_session_or_call_id_are_applied_under_their_run_key():
    """Spec §8.1 R7 and §9 R8: such results are valid; one without any session changes no session state."""
    proc = processor()
    state = SessionState()
    proc.apply(b"r1", call(0, outcome_follows=True), src(0), state)
    sessionless = {"type": "tool_result", "run_id": "r1", "session_id": None, "tool_call_id": "c0", "result": "x"}
    assert proc.state_key(None, sessionless) == b"r1"
    out = proc.apply(b"r1", sessionless, src(1), state)
    record = msgpack.unpackb(out.verdict)
    assert out.kind == APPLIED and record["verdict"] == "allow" and record["outcome"]["recorded"] is False
    assert list(state.calls) == ["c0"] and state.history[0].result_hash is None  # still pending
    no_call_id = {"type": "tool_result", "run_id": "r1", "session_id": "s1", "tool_name": "read",
                  "args": {"path": "/a"}, "result": "same"}
    out = proc.apply(b"r1", no_call_id, src(2), state)
    assert msgpack.unpackb(out.verdict)["outcome"]["recorded"] is True
    assert state.history[0].result_hash is not None  # attached to c0's pending record by run, tool and args
    assert proc.state_key(None, {"type": "tool_result", "result": None}) == b"unknown"
