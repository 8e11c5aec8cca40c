"""No record value stops a reader: random and mutated msgpack/JSON bytes, and the regression corpus.

The oracle (:func:`tests.wire.record_fuzz.check`) runs one byte string through
every reader of record values and event files: ``decode_event`` raises only
``DecodeError``; ``read_event_file`` (replay, produce) yields bad records with
a reason; the rekey envelope and stored states raise only ``ValueError``; a
decoded event goes through the worker's per-record path, replay and
produce's encoders without an exception. A long run by hand is
``python -m tests.wire.record_fuzz`` (see its docstring).
"""

from __future__ import annotations

import io
import random

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.wire.codecs import DecodeError, decode_event, read_event_file
from streams.worker.processor import Processor
from streams.worker.records import Source
from streams.detection import Engine, SessionState
from tests.one_record import handle_one
from tests.wire.record_fuzz import CONFIG, check, emit, event_tree, generated, json_text, mutate, poison_records, seeds

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
SEEDS = seeds()
CORPUS = poison_records()


def _from_rng(kind: str):
    """Inputs of the fuzzer's generators, driven by a hypothesis-chosen seed (so a failure shrinks to a seed)."""
    def build(seed: int) -> bytes:
        rng = random.Random(seed)
        if kind == "event":
            return emit(event_tree(rng))
        if kind == "json":
            return json_text(rng)
        return generated(rng, SEEDS)
    return st.integers(min_value=0, max_value=2**32).map(build)


records = st.one_of(
    st.binary(max_size=64),
    st.binary(max_size=8).map(lambda tail: b"\x81" + tail),  # a one-entry map, then anything
    _from_rng("event"), _from_rng("json"), _from_rng("any"),
    st.tuples(st.sampled_from(SEEDS), st.integers(min_value=0, max_value=2**32)).map(
        lambda pair: mutate(random.Random(pair[1]), pair[0], SEEDS[pair[1] % len(SEEDS)])),
)


@SETTINGS
@given(records)
def test_no_record_breaks_a_reader(data):
    assert check(data) == []


@SETTINGS
@given(records)
def test_decode_event_raises_only_its_own_error(data):
    try:
        event = decode_event(data)
    except DecodeError as exc:
        assert str(exc)  # a reason for the dead letter
    else:
        assert isinstance(event, dict)


@pytest.mark.parametrize("expect, data", CORPUS, ids=[f"{i}-{e}-{len(d)}B" for i, (e, d) in enumerate(CORPUS)])
def test_regression_corpus(expect, data):
    assert check(data) == []
    processor = Processor(Engine(CONFIG))
    source = Source("events", 0, 5)
    if expect == "decode":
        [(topic, _, dead, _)] = handle_one(processor, data, b"r1", offset=5).publish
        assert topic == processor.topics.dead_letters
        letter = msgpack.unpackb(dead)
        assert letter["reason_class"] == "decode" and letter["value"] == data
        assert letter["reason"].startswith("invalid msgpack: a map key is a map or an array")
        return
    outcome = processor.apply(b"r1", decode_event(data), source, SessionState(), data)
    if expect == "schema":
        assert msgpack.unpackb(outcome.dead_letter)["reason_class"] == "schema"
    else:
        assert expect == "verdict" and decode_event(outcome.verdict)["source"] == source.as_dict()


def test_the_three_byte_record_is_a_decode_error_with_its_reason():
    with pytest.raises(DecodeError, match=r"^invalid msgpack: a map key is a map or an array \(unhashable type: 'dict'\)$"):
        decode_event(bytes.fromhex("8180c0"))


def test_an_undecodable_msgpack_record_costs_that_record_only_in_an_event_file():
    good = msgpack.packb({"type": "tool_call", "n": 1})
    rows = [(r.position, r.event, r.error) for r in read_event_file("f", io.BytesIO(
        good + bytes.fromhex("8180c0") + good + b"\x81\xa1a\xa2\xff\xfe" + good))]
    assert rows == [
        (1, {"type": "tool_call", "n": 1}, None),
        (2, None, "invalid msgpack: a map key is a map or an array (unhashable type: 'dict')"),
        (3, {"type": "tool_call", "n": 1}, None),
        (4, None, "invalid msgpack: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
        (5, {"type": "tool_call", "n": 1}, None),
    ]


def test_a_msgpack_event_file_is_read_across_chunk_boundaries():
    events = [{"type": "tool_call", "i": i, "pad": "x" * (i % 700)} for i in range(400)]  # ~140 KB: 3 chunks
    data = b"".join(msgpack.packb(e) for e in events)
    assert [r.event for r in read_event_file("f", io.BytesIO(data))] == events
    assert [r.error for r in read_event_file("f", io.BytesIO(data[:-1]))][-1] == (
        "truncated msgpack record at the end of the file")
