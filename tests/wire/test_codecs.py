"""Event files and record values: what is read, and what is reported as bad (with position and reason)."""

import io

import msgpack
import pytest

from streams.wire.codecs import DecodeError, decode_event, read_event_file

GOOD = msgpack.packb({"type": "tool_call", "n": 1})


def _read(data: bytes) -> list[tuple[int, object, object]]:
    return [(r.position, r.event, r.error) for r in read_event_file("f", io.BytesIO(data))]


def test_truncated_last_msgpack_record_is_reported():
    assert _read(GOOD + GOOD[:-1]) == [
        (1, {"type": "tool_call", "n": 1}, None), (2, None, "truncated msgpack record at the end of the file")]


def test_corrupt_msgpack_says_why_and_stops():
    rows = _read(GOOD + b"\xc1" + GOOD)
    assert rows[0][1] == {"type": "tool_call", "n": 1}
    assert rows[1] == (2, None, "invalid msgpack (FormatError); the rest of the file is skipped")
    assert len(rows) == 2


def test_msgpack_maps_with_integer_keys_are_events_to_validate_not_corruption():
    assert _read(GOOD + msgpack.packb({1: 2}) + GOOD)[1:] == [(2, {1: 2}, None), (3, {"type": "tool_call", "n": 1}, None)]


def test_json_lines_with_a_byte_order_mark():
    assert _read(b'\xef\xbb\xbf{"a": 1}\n\n{"b": 2}\n') == [(1, {"a": 1}, None), (3, {"b": 2}, None)]


def test_bad_json_lines_are_reported_and_the_rest_read():
    rows = _read(b'{"a": 1}\nnot json\n[1]\n{"b": 2}\n')
    assert rows[0] == (1, {"a": 1}, None) and rows[3] == (4, {"b": 2}, None)
    assert rows[1][0] == 2 and rows[1][2].startswith("invalid JSON")
    assert rows[2] == (3, None, "an event must be an object, got list")


def test_json_lines_whose_first_line_is_not_json_lose_that_line_only():
    rows = _read(b'this is not json\n{"a": 1}\n{"b": 2}\n')
    assert rows[0][:2] == (1, None) and rows[0][2].startswith("invalid JSON")
    assert rows[1:] == [(2, {"a": 1}, None), (3, {"b": 2}, None)]


def test_msgpack_whose_first_record_is_not_a_map_is_still_msgpack():
    rows = _read(msgpack.packb([1, 2]) + GOOD)
    assert rows == [(1, None, "an event must be a map, got list"), (2, {"type": "tool_call", "n": 1}, None)]


@pytest.mark.parametrize("value, reason", [
    (b"", "empty record value"),
    (b"\xc1", "invalid msgpack: FormatError"),
    (b"[1]", "an event must be a map/object, got list"),
    (b'"just a string"', "an event must be a map/object, got str"),
    (b"oops", "invalid JSON at column 1: Expecting value"),
    (b'{"type": "tool_call",, }', "invalid JSON at column 22: Expecting property name enclosed in double quotes"),
    (b'{"type":\n "tool_call" "x"}', "invalid JSON at line 2 column 14 of the record: Expecting ',' delimiter"),
    (msgpack.packb({"a": 1}) + b"x", "invalid msgpack: unpack(b) received extra data."),
], ids=["empty", "reserved-byte", "array", "json-string", "text", "bad-json-mid-line", "bad-json-second-line",
        "msgpack-extra-data"])
def test_record_values_that_are_not_events(value, reason):
    with pytest.raises(DecodeError, match="^" + reason.replace("(", r"\(").replace(")", r"\)") + "$"):
        decode_event(value)
