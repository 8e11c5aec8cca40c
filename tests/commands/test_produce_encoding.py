"""`loopwatch produce`, the client and the worker's outputs (streams.wire.codecs.record_encoder) encode every value
either codec decodes, falling back to the other codec where the chosen one cannot carry it."""

import msgpack
import pytest

from streams.wire.codecs import decode_event, record_encoder


@pytest.mark.parametrize("args", [
    {"id": 2**70},  # beyond msgpack's 64-bit integers
    {"text": "lone \ud800 surrogate"},
], ids=["huge-int", "lone-surrogate"])
def test_events_msgpack_cannot_carry_go_as_json_the_worker_decodes(args):
    event = {"type": "tool_call", "run_id": "r", "args": args}
    value = record_encoder("msgpack")(event)
    assert value.startswith(b"{")
    assert decode_event(value) == event


def test_ordinary_events_stay_msgpack():
    event = {"type": "tool_call", "run_id": "r", "args": {"n": 1}}
    value = record_encoder("msgpack")(event)
    assert msgpack.unpackb(value) == event


def test_the_json_codec_escapes_a_lone_surrogate_utf8_cannot_carry():
    event = {"type": "tool_call", "run_id": "r", "args": {"text": "lone \ud800 é"}}
    value = record_encoder("json")(event)
    assert value == b'{"type":"tool_call","run_id":"r","args":{"text":"lone \\ud800 \\u00e9"}}'
    assert decode_event(value) == event
    assert record_encoder("json")({"n": 2**70}) == b'{"n":1180591620717411303424}'  # JSON has no integer limit


@pytest.mark.parametrize("codec, reason", [("msgpack", "Object of type set is not JSON serializable"),
                                           ("json", "can not serialize 'set' object")])
def test_an_event_nothing_can_encode_is_a_clear_value_error(codec, reason):
    with pytest.raises(ValueError) as raised:
        record_encoder(codec)({"type": "tool_call", "args": {1, 2}})
    assert str(raised.value) == f"cannot encode the event as JSON or msgpack: {reason}"


def test_the_json_codec_sends_as_msgpack_what_only_msgpack_carries():
    event = {"type": "tool_call", "run_id": "r", "source": {"blob": b"\xff\x00", "ext": msgpack.ExtType(5, b"x")}}
    value = record_encoder("json")(event)
    assert value == msgpack.packb(event, use_bin_type=True) and decode_event(value) == event


@pytest.mark.parametrize("codec, reason", [("msgpack", "nested too deeply"),  # JSON, the fallback, says
                                           ("json", "recursion limit exceeded.")])  # msgpack, the fallback, says
def test_an_event_nested_too_deeply_for_both_is_a_clear_value_error(codec, reason):
    deep: list = []
    for _ in range(5_000):
        deep = [deep]
    with pytest.raises(ValueError) as raised:
        record_encoder(codec)({"type": "tool_call", "args": deep})
    assert str(raised.value) == f"cannot encode the event as JSON or msgpack: {reason}"
    shallow: list = []
    for _ in range(600):  # over msgpack's 511 levels: JSON carries it
        shallow = [shallow]
    assert decode_event(record_encoder(codec)({"args": shallow})) == {"args": shallow}
