"""`loopwatch produce` encodes every event the worker can read, falling back to JSON where msgpack cannot."""

import msgpack
import pytest

from streams.codecs import decode_event
from streams.commands.produce import _encoder


@pytest.mark.parametrize("args", [
    {"id": 2**70},  # beyond msgpack's 64-bit integers
    {"text": "lone \ud800 surrogate"},
], ids=["huge-int", "lone-surrogate"])
def test_events_msgpack_cannot_carry_go_as_json_the_worker_decodes(args):
    event = {"type": "tool_call", "run_id": "r", "args": args}
    value = _encoder("msgpack")(event)
    assert value.startswith(b"{")
    assert decode_event(value) == event


def test_ordinary_events_stay_msgpack():
    event = {"type": "tool_call", "run_id": "r", "args": {"n": 1}}
    value = _encoder("msgpack")(event)
    assert msgpack.unpackb(value) == event


def test_an_event_nothing_can_encode_is_a_clear_value_error():
    with pytest.raises(ValueError, match="cannot encode the event"):
        _encoder("json")({"type": "tool_call", "args": {1, 2}})
