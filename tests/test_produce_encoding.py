"""`loopwatch produce` and the client (streams.codecs.record_encoder) encode every event the worker can read,
falling back to JSON where msgpack cannot."""

import msgpack
import pytest

from streams.codecs import decode_event, record_encoder


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


@pytest.mark.parametrize("codec, tried", [("msgpack", "msgpack or JSON"), ("json", "JSON")])
def test_an_event_nothing_can_encode_is_a_clear_value_error(codec, tried):
    with pytest.raises(ValueError) as raised:
        record_encoder(codec)({"type": "tool_call", "args": {1, 2}})
    assert str(raised.value) == f"cannot encode the event as {tried}: Object of type set is not JSON serializable"
