"""streams.runners.client without a broker: argument checks, event validation, partitioner, Verdict accessors,
the on_timeout verdict of a timeout or of an event Kafka refuses."""

from __future__ import annotations

import asyncio
import logging
import re
import types

import msgpack
import pytest
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.partitioner import murmur2
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from streams.runners.client import ClientClosedError, LoopwatchClient, Verdict
from streams.wire.keys import verdict_partition
from streams.wire.codecs import decode_event, encode_msgpack
from streams.detection import Engine, EventError, SessionState
from streams.detection.events import validate_event
from streams.worker.processor import APPLIED, DEAD_LETTER, Processor
from streams.worker.records import Source


@pytest.mark.parametrize("kwargs, match", [
    ({"on_timeout": "deny"}, "fail-open"),
    ({"codec": "avro"}, "codec"),
    ({"key_by": "agent"}, "key_by"),
], ids=["on_timeout", "codec", "key_by"])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LoopwatchClient("127.0.0.1:9092", **kwargs)


@pytest.mark.parametrize("key", [b"run-1", b"", b"agent:main:s0001", "ü-run".encode()], ids=["plain", "empty", "session", "utf8"])
@pytest.mark.parametrize("partitions", [1, 4, 7])
def test_verdict_partition_is_kafkas_murmur2(key, partitions):
    assert verdict_partition(key, partitions) == (murmur2(key) & 0x7FFFFFFF) % partitions


def test_publish_before_start_and_bad_events():
    client = LoopwatchClient("127.0.0.1:9092")

    async def run() -> None:
        with pytest.raises(ClientClosedError, match="not started"):
            await client.publish({"type": "tool_call", "run_id": "r"})
        client._started = True  # argument checks come before any I/O
        with pytest.raises(ValueError, match="takes a tool_call"):
            await client.check({"type": "tool_result", "run_id": "r"})
        with pytest.raises(ValueError, match="takes a tool_result or compaction_retry"):
            await client.report_result({"type": "tool_call", "run_id": "r"})
        with pytest.raises(ValueError, match="type must be one of tool_call, tool_result, compaction_retry"):
            await client.publish({"type": "nope", "run_id": "r"})
        with pytest.raises(ValueError, match="takes a tool_call event, got type None"):
            await client.check(["tool_call"])  # type: ignore[arg-type]

    asyncio.run(run())


@pytest.mark.parametrize("verdict, record, allowed, message", [
    ("allow", {"detection": {"stuck": False}}, True, None),
    ("warn", {"detection": {"stuck": True, "detector": "generic_repeat", "message": "WARNING: x"},
              "warning": {"emitted": True}}, True, "WARNING: x"),
    ("block", {"block_reason": "CRITICAL: y", "blocked": True, "detection": {"stuck": True, "message": "CRITICAL: y"}},
     False, "CRITICAL: y"),
    # a 2026.9.6 block: the model is handed block_text
    ("block", {"block_reason": "CRITICAL: y", "block_text": "Stop: y", "blocked": True,
               "detection": {"stuck": True, "message": "CRITICAL: y"}}, False, "Stop: y"),
    ("abort", {"guard": {"abort": True, "message": "CRITICAL: z"}}, False, "CRITICAL: z"),
    ("ignore", {}, True, None),
    # a loopwatch policy decided (docs/policies.md): its message, not OpenClaw's
    ("abort", {"block_reason": "CRITICAL: y", "detection": {"stuck": True},
               "policy": {"name": "escalation", "verdict": "abort", "message": "CRITICAL: escalated"}},
     False, "CRITICAL: escalated"),
    ("block", {"detection": {"stuck": False}, "policy": {"name": "runBudget", "verdict": "block",
                                                          "message": "CRITICAL: budget"}}, False, "CRITICAL: budget"),
    # 2026.9.6 (openclaw-2026.9.md §3): the model's text, the note of an emitted warning, the terminal block
    ("block", {"block_reason": "CRITICAL: y", "block_text": "CRITICAL: y\n\nDo not repeat", "blocked": True,
               "detection": {"stuck": True}}, False, "CRITICAL: y\n\nDo not repeat"),
    ("warn", {"detection": {"stuck": True, "message": "WARNING: x"}, "warning": {"emitted": True, "note": "[note]"}},
     True, "[note]"),
    ("abort", {"block_reason": "CRITICAL: y", "block_text": "CRITICAL: y\n\nThis run is stopping now.",
               "blocked": True, "tool_loop_recovery": "terminal", "detection": {"stuck": True},
               "guard": {"abort": False}}, False, "CRITICAL: y\n\nThis run is stopping now."),
    # the record's decided_by is what the client reads
    ("block", {"decided_by": {"kind": "fleet", "action": "block", "message": "Fleet-wide loop", "enforced": True}},
     False, "Fleet-wide loop"),
    # a shadow finding decides nothing
    ("warn", {"decided_by": {"kind": "fleet", "action": "would_block", "message": "x", "enforced": False}}, True, None),
], ids=["allow", "warn", "block", "block-text-own", "abort", "ignore", "policy-abort", "policy-block", "block-text",
        "warning-note", "terminal-block", "decided-by", "shadow"])
def test_verdict_accessors(verdict, record, allowed, message):
    v = Verdict("e1", verdict, record)
    assert v.allowed is allowed
    assert v.message == message
    assert (v.detection is not None) == bool(record and (record.get("detection") or {}).get("stuck"))


def test_a_terminal_block_is_decided_by_its_detection_not_the_guard():
    record = {"blocked": True, "tool_loop_recovery": "terminal", "guard": {"abort": False},
              "detection": {"stuck": True, "detector": "generic_repeat", "count": 21}}
    decided = Verdict("e1", "abort", record).decided_by
    assert (decided["kind"], decided["action"], decided["detector"], decided["count"], decided["recovery"]) == \
        ("detection", "abort", "generic_repeat", 21, "terminal")
    guard_abort = {"guard": {"abort": True, "detector": "compaction_loop_persisted", "count": 3}}
    decided = Verdict("e1", "abort", guard_abort).decided_by
    assert (decided["kind"], decided["detector"], decided["count"]) == ("guard", "compaction_loop_persisted", 3)


# ------------------------------------------------------------------ validation

# Events the worker dead-letters (reason class "schema"), with what the client says instead.
INVALID = [
    ({"type": "tool_call", "run_id": "r"}, "an event needs a session_id \\(or a session_key\\)"),
    ({"type": "tool_call", "run_id": "r", "session_id": ""}, "an event needs a session_id"),
    ({"type": "tool_call", "run_id": 7, "session_id": "s"}, "run_id must be a string or null, got int"),
    ({"type": "tool_call", "session_id": "s", "tool_name": ["read"]}, "tool_name must be a string or null, got list"),
    ({"type": "tool_call", "session_id": "s", "ts": "2024-01-01"}, "ts must be epoch milliseconds"),
    ({"type": "tool_call", "session_id": "s", "outcome_follows": 1}, "outcome_follows must be true or false"),
    ({"type": "tool_result", "run_id": "r", "session_id": "s", "tool_call_id": 5}, "tool_call_id must be a string or null"),
    ({"type": "compaction_retry", "run_id": "r", "session_key": None}, "an event needs a session_id"),
]
INVALID_IDS = ["no-session", "empty-session", "int-run-id", "list-tool-name", "text-ts", "int-follows",
               "result-int-call-id", "retry-no-session"]


def _started_client(**kwargs) -> LoopwatchClient:
    client = LoopwatchClient("127.0.0.1:9092", **kwargs)
    client._started = True  # validation comes before any I/O
    client._connection.ready = True  # as if connected: the tests put their own producer in
    return client


@pytest.mark.parametrize("event, match", INVALID, ids=INVALID_IDS)
def test_the_client_refuses_what_the_worker_dead_letters_with_the_workers_reason(event, match):
    # The worker's outcome for the same record: a schema dead letter whose reason the client repeats.
    processor = Processor(Engine())
    raw = encode_msgpack(event)
    outcome = processor.apply(b"k", decode_event(raw), Source("events", 0, 0), SessionState(), raw)
    assert outcome.kind == DEAD_LETTER
    letter = msgpack.unpackb(outcome.dead_letter)
    assert letter["reason_class"] == "schema" and re.search(match, letter["reason"])

    client = _started_client()
    method = client.check if event["type"] == "tool_call" else client.report_result

    async def run() -> None:
        with pytest.raises(ValueError, match=match) as raised:
            await method(event, timeout=0.1)
        assert isinstance(raised.value, EventError)
        assert str(raised.value) == f"invalid event (the worker would dead-letter it): {letter['reason']}"
        assert client._verdicts.pending == {}  # nothing waits for a verdict

    asyncio.run(run())


@pytest.mark.parametrize("event", [
    {"type": "tool_call", "session_id": "s"},  # the least the worker accepts
    {"type": "tool_call", "run_id": "r", "session_key": "agent:main:s", "session_id": None, "ts": 1.5},
    {"type": "tool_result", "run_id": "r", "session_id": "s", "tool_call_id": "c1"},
    {"type": "compaction_retry", "run_id": "r", "session_id": "s", "agent_id": "main"},
], ids=["minimal-call", "session-key-only", "result", "retry"])
def test_valid_events_are_what_the_engine_applies(event):
    assert validate_event(event) == event["type"]
    assert "verdict" in Engine().process(event, SessionState())


class _RecordingProducer:
    """A producer whose send() records the key and value and acknowledges them at once (partition 0)."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes]] = []

    async def send(self, topic, value=None, key=None):
        self.records.append((key, value))
        delivered = asyncio.get_running_loop().create_future()
        delivered.set_result(types.SimpleNamespace(partition=0))  # the record metadata `produce` reads
        return delivered


def _sending_client(**kwargs) -> tuple[LoopwatchClient, _RecordingProducer]:
    client = _started_client(**kwargs)
    client._producer = producer = _RecordingProducer()  # type: ignore[assignment]

    async def no_partition(key: bytes) -> None:
        return None

    client._verdicts.ensure_partition = no_partition  # type: ignore[method-assign]
    return client, producer


@pytest.mark.parametrize("codec", ["msgpack", "json"])
@pytest.mark.parametrize("field, value", [
    ("result", 2**70),                    # beyond msgpack's 64-bit integers
    ("args", {"text": "lone \ud800"}),   # not encodable as UTF-8
], ids=["huge-int", "lone-surrogate"])
def test_an_event_msgpack_cannot_carry_is_sent_as_json_the_worker_applies(codec, field, value):
    client, producer = _sending_client(codec=codec, clock=lambda: 2.0)
    event = {"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": "c", "tool_name": "read",
             "args": {}, "result": None, "error": None, "event_id": "e1", "ts": 1000, field: value}

    async def run() -> Verdict:
        return await client.check(event, timeout=0.01)

    verdict = asyncio.run(run())
    assert (verdict.event_id, verdict.verdict, verdict.timed_out) == ("e1", "allow", True)  # no worker here
    [(key, sent)] = producer.records
    assert key == b"r" and sent.startswith(b"{")
    assert decode_event(sent) == {**event, "deadline": 2010}  # fail-open: the clock's now + the 0.01 s timeout
    outcome = Processor(Engine()).apply(key, decode_event(sent), Source("events", 0, 0), SessionState(), sent)
    assert outcome.kind == APPLIED and outcome.record["event_id"] == "e1"


class _ProduceProducer(_RecordingProducer):
    """What `loopwatch produce` (publish_events) needs of aiokafka's producer, recording each send."""

    last: "_ProduceProducer"

    def __init__(self, **options) -> None:
        super().__init__()
        _ProduceProducer.last = self

    async def start(self) -> None: ...
    async def flush(self) -> None: ...
    async def stop(self) -> None: ...


@pytest.mark.parametrize("key_by, ids, key, named", [
    ("run", {"run_id": "r\ud800"}, b"r\xed\xa0\x80", r"key 'r\ud800'"),
    ("run", {"session_key": "k\udfff"}, b"k\xed\xbf\xbf", r"key 'k\udfff'"),
    ("session", {"run_id": "r", "session_key": "k\ud800"}, b"k\xed\xa0\x80", r"key 'k\ud800'"),
    ("session", {"run_id": "r", "session_id": "s\udc00"}, b"s\xed\xb0\x80", r"key 's\udc00'"),
], ids=["run-id", "session-key-by-run", "session-key", "session-id"])
def test_a_lone_surrogate_in_an_id_keys_the_record_as_produce_does(monkeypatch, key_by, ids, key, named):
    import aiokafka

    from streams.commands.produce import publish_events

    event = {"type": "tool_call", "session_id": "s", "tool_call_id": "c", "tool_name": "read", "args": {},
             "event_id": "e1", "ts": 1000, **ids}
    client, producer = _sending_client(key_by=key_by)

    async def run() -> None:
        await client.check(event, timeout=0.01)
        with pytest.raises(ValueError, match=re.escape(f"tool_call event 'e1' ({named}, tool_call_id 'c'): ")):
            await client.check({**event, "args": {1}})  # the error names the key as it is
        monkeypatch.setattr(aiokafka, "AIOKafkaProducer", _ProduceProducer)
        await publish_events("127.0.0.1:1", "loopwatch.events", [dict(event)], key_by=key_by)

    asyncio.run(run())
    [(sent_key, _)] = producer.records
    [(produced_key, _)] = _ProduceProducer.last.records
    assert sent_key == produced_key == key


def test_an_event_neither_msgpack_nor_json_can_encode_is_a_value_error_naming_it():
    client, producer = _sending_client()

    async def run() -> None:
        with pytest.raises(ValueError) as raised:
            await client.check({"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": "c",
                                "event_id": "e1", "args": {1, 2}})
        assert str(raised.value) == ("tool_call event 'e1' (key 'r', tool_call_id 'c'): cannot encode the event "
                                     "as JSON or msgpack: Object of type set is not JSON serializable")
        with pytest.raises(ValueError, match=r"^compaction_retry event '[0-9a-f]{32}' \(key 's'\): cannot encode "
                                             r"the event as JSON or msgpack: can not serialize 'set' object"):
            await _started_client(codec="json", key_by="session").report_result(
                {"type": "compaction_retry", "run_id": "r", "session_id": "s", "agent_id": "main", "x": {1}})
        assert client._verdicts.pending == {}

    asyncio.run(run())
    assert producer.records == []  # nothing sent


# ------------------------------------------------ timeouts and failed sends

class _RefusingProducer:
    """A producer whose send() raises what aiokafka's raises for a record over max_request_size."""

    def __init__(self) -> None:
        self.values: list[bytes] = []

    async def send(self, topic, value=None, key=None):
        self.values.append(value)
        raise MessageSizeTooLargeError(f"The message is {len(value) + 70} bytes when serialized ...")


@pytest.mark.parametrize("on_timeout, call_verdict, result_verdict", [
    ("allow", "allow", "allow"),
    ("block", "block", "abort"),
], ids=["fail-open", "fail-closed"])
def test_an_event_kafka_refuses_gets_the_on_timeout_verdict_with_the_reason(on_timeout, call_verdict,
                                                                           result_verdict, caplog):
    client = _started_client(on_timeout=on_timeout)
    client._producer = producer = _RefusingProducer()  # type: ignore[assignment]

    async def no_partition(key: bytes) -> None:
        return None

    client._verdicts.ensure_partition = no_partition  # type: ignore[method-assign]
    big = "x" * 1_500_000

    async def run() -> tuple:
        call = await client.check({"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": "c",
                                   "tool_name": "read", "args": {}, "result": big, "error": None}, timeout=60)
        # another call's result: the result of "c", which ran without a verdict, is not waited for (below)
        result = await client.report_result({"type": "tool_result", "run_id": "r", "session_id": "s",
                                             "tool_call_id": "c0", "result": big, "error": None}, timeout=60)
        return call, result

    with caplog.at_level(logging.WARNING, logger="streams.runners.client"):
        call, result = asyncio.run(run())
    size = DefaultRecordBatchBuilder.estimate_size_in_bytes(b"r", producer.values[0], [])
    assert 1_500_000 < size < 1_500_400
    for verdict, expected in ((call, call_verdict), (result, result_verdict)):
        assert (verdict.verdict, verdict.timed_out, verdict.record) == (expected, False, None)
        assert verdict.latency_s < 30  # at once: not the 60 s timeout it would otherwise wait out
        assert verdict.error.startswith("the event is ")
        assert "over the producer's max_request_size of 1,048,576 bytes" in verdict.error
        assert "producer_options={'max_request_size': ...}" in verdict.error
        assert verdict.message.startswith(f"loopwatch: the event could not be sent ({verdict.error}); failing ")
    assert f"the event is {size:,} bytes as a Kafka record" in call.error
    assert call.allowed is (on_timeout == "allow")
    if on_timeout == "allow":
        assert call.message.endswith("failing open (on_timeout='allow'): going on without a loop check")
    else:
        assert call.message.endswith("failing closed (on_timeout='block'): the tool call is blocked")
        assert result.message.endswith("failing closed (on_timeout='block'): the run is stopped")
    assert client._verdicts.pending == {}
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"]
    assert f"verdict {call_verdict} (on_timeout='{on_timeout}')" in caplog.records[0].getMessage()


@pytest.mark.parametrize("verdict, ending", [
    ("allow", "failing open (on_timeout='allow'): going on without a loop check"),
    ("block", "failing closed (on_timeout='block'): the tool call is blocked"),
    ("abort", "failing closed (on_timeout='block'): the run is stopped"),
])
def test_a_timed_out_verdict_says_what_happened_and_how_it_failed(verdict, ending):
    v = Verdict("e1", verdict, None, timed_out=True, latency_s=0.5004)
    assert v.message == ("loopwatch: no verdict within 0.5 s (the loopwatch worker is down or lagging, "
                         f"or Kafka is unreachable); {ending}")
    assert v.error is None and v.detection is None


def test_report_result_sends_the_session_key_and_the_calls_tool_name_and_args():
    client, producer = _sending_client(key_by="session")

    async def run() -> None:
        await client.check({"type": "tool_call", "run_id": "r1", "session_id": "S", "session_key": "agent:main:S",
                            "tool_call_id": "c1", "tool_name": "read", "args": {"path": "/a"},
                            "outcome_follows": True}, timeout=0.01)
        await client.report_result({"type": "tool_result", "run_id": "r1", "session_id": "S", "tool_call_id": "c1",
                                    "result": "x", "error": None}, timeout=0.01)
        await client.report_result({"type": "compaction_retry", "run_id": "r1", "session_id": "S"}, timeout=0.01)

    asyncio.run(run())
    (_, _), (result_key, result), (retry_key, retry) = producer.records
    result, retry = decode_event(result), decode_event(retry)
    assert (result["session_key"], result["tool_name"], result["args"]) == ("agent:main:S", "read", {"path": "/a"})
    assert retry["session_key"] == "agent:main:S"
    assert result_key == retry_key == b"agent:main:S"  # keyed as the calls are


@pytest.mark.parametrize("complete", [True, False], ids=["completed", "as-is"])
def test_produce_sends_the_session_key_and_the_calls_tool_name_and_args_as_the_client_does(monkeypatch, complete):
    import aiokafka

    from streams.commands.produce import publish_events

    monkeypatch.setattr(aiokafka, "AIOKafkaProducer", _ProduceProducer)
    events = [
        {"type": "tool_call", "run_id": "r1", "session_id": "S", "session_key": "K", "tool_call_id": "c1",
         "tool_name": "read", "args": {"path": "/a"}, "outcome_follows": True},
        {"type": "tool_result", "run_id": "r1", "session_id": "S", "tool_call_id": "c1", "result": 1, "error": None},
        {"type": "compaction_retry", "run_id": "r1", "session_id": "S"},
    ]
    asyncio.run(publish_events("127.0.0.1:1", "loopwatch.events", [dict(e) for e in events], key_by="session",
                               complete=complete))
    records = _ProduceProducer.last.records
    sent = [decode_event(value) for _, value in records]
    if complete:
        assert [key for key, _ in records] == [b"K"] * 3
        assert (sent[1]["session_key"], sent[1]["tool_name"], sent[1]["args"]) == ("K", "read", {"path": "/a"})
        assert sent[2]["session_key"] == "K"
    else:
        assert [key for key, _ in records] == [b"K", b"S", b"S"]
        assert sent == events
