"""Canonical serialisation and digests (Spec §4.1, §4.2, §4.3 worked example)."""

import hashlib
import json
import math

import pytest

from streams.detection import UNDEFINED, digest, stable_stringify
from streams.detection.canonical import _exact_text, _fast_text, canonical_bytes, js_number, js_string
from streams.detection.fingerprint import args_hash

from ._support import SAME_RESULT_HASH, sha

EMOJI = "\U0001F600"  # UTF-16: D83D DE00

# ---------------------------------------------------------------- §4.1 edge-case table

SPEC_TABLE = [
    ("keys-b-a", {"b": 1, "a": 2}, '{"a":2,"b":1}'),
    ("keys-upper-before-lower", {"b": 1, "B": 2, "a": 3, "A": 4}, '{"A":4,"B":2,"a":3,"b":1}'),
    ("keys-string-not-numeric-order", {"a": "z", "2": "y", "10": "x"}, '{"10":"x","2":"y","a":"z"}'),
    ("keys-utf16-emoji-before-uffff", {"\uffff": 4, EMOJI: 3, "é": 2, "z": 1},
     '{"z":1,"é":2,"' + EMOJI + '":3,"\uffff":4}'),
    ("float-1.0", 1.0, "1"),
    ("int-1", 1, "1"),
    ("json-1e0", json.loads("1e0"), "1"),
    ("negative-zero", -0.0, "0"),
    ("1e21", 1e21, "1e+21"),
    ("1e-7", 1e-7, "1e-7"),
    ("2**53+2", 2**53 + 2, "9007199254740994"),
    ("json-9007199254740993", json.loads("9007199254740993"), "9007199254740992"),
    ("nan-quoted", math.nan, '"NaN"'),
    ("infinity-quoted", math.inf, '"Infinity"'),
    ("minus-infinity-quoted", -math.inf, '"-Infinity"'),
    ("json-escapes", 'a"b\\c\nd\te', '"a\\"b\\\\c\\nd\\te"'),
    ("control-u0001", "\u0001", '"\\u0001"'),
    ("lone-surrogate", "\ud800", '"\\ud800"'),
    ("non-ascii-emoji-raw", "é" + EMOJI, '"é' + EMOJI + '"'),
    ("u2028-raw", "\u2028", '"\u2028"'),
    ("undefined-property", {"a": UNDEFINED, "b": 1}, '{"a":undefined,"b":1}'),
    ("undefined-array-element", [1, UNDEFINED, 3], "[1,undefined,3]"),
    ("top-level-undefined", UNDEFINED, "undefined"),
    ("uint8array", bytes([1, 2, 3]), '{"data":"AQID","type":"Uint8Array"}'),
]


@pytest.mark.parametrize("value, expected", [row[1:] for row in SPEC_TABLE], ids=[row[0] for row in SPEC_TABLE])
def test_spec_edge_case_table(value, expected):
    assert stable_stringify(value) == expected
    assert _exact_text(value) == expected
    assert digest(value) == sha(expected)


def test_circular_object_becomes_marker():
    value = {"a": 1}
    value["self"] = value
    assert stable_stringify(value) == '{"a":1,"self":"[Circular]"}'
    assert digest(value) == sha('{"a":1,"self":"[Circular]"}')


def test_circular_array_becomes_marker():
    value: list = [1]
    value.append(value)
    value.append({"back": value})
    assert stable_stringify(value) == '[1,"[Circular]",{"back":"[Circular]"}]'


def test_value_referenced_twice_is_serialised_twice():
    shared = {"x": 1}
    assert stable_stringify([shared, {"again": shared}, shared]) == '[{"x":1},{"again":{"x":1}},{"x":1}]'


@pytest.mark.parametrize("value, expected", [
    (bytearray(b"\x00\xff"), '{"data":"AP8=","type":"Uint8Array"}'),
    (b"", '{"data":"","type":"Uint8Array"}'),
    ({"blob": b"hi"}, '{"blob":{"data":"aGk=","type":"Uint8Array"}}'),
], ids=["bytearray", "empty", "nested-bytes"])
def test_bytes_are_uint8array(value, expected):
    assert stable_stringify(value) == expected


@pytest.mark.parametrize("value, expected", [
    ((1, "a"), '[1,"a"]'),
    ([], "[]"),
    ({}, "{}"),
    ([None, True, False], "[null,true,false]"),
    ({"z": {"y": [{"b": 2, "a": 1}]}}, '{"z":{"y":[{"a":1,"b":2}]}}'),
    ({"k": "v", "n": None}, '{"k":"v","n":null}'),
], ids=["tuple-as-array", "empty-array", "empty-object", "literals", "nested-sorting", "null-property"])
def test_structures(value, expected):
    assert stable_stringify(value) == expected


@pytest.mark.parametrize("value, type_name", [
    ({1, 2}, "set"),
    (object(), "object"),
    ({"nested": [frozenset()]}, "frozenset"),
], ids=["set", "object", "nested-frozenset"])
def test_values_outside_the_data_model_raise(value, type_name):
    with pytest.raises(TypeError, match=f"cannot canonicalise a value of type {type_name}$"):
        stable_stringify(value)
    with pytest.raises(TypeError, match=f"cannot canonicalise a value of type {type_name}$"):
        digest(value)


# ------------------------------------------------------------------ JS number formatting

NUMBERS = [
    ("1.0", 1.0, "1"),
    ("-0.0", -0.0, "0"),
    ("1e21", 1e21, "1e+21"),
    ("-1e21", -1e21, "-1e+21"),
    ("1e20", 1e20, "100000000000000000000"),
    ("1e-7", 1e-7, "1e-7"),
    ("1e-6", 1e-6, "0.000001"),
    ("1.7e-6", 1.7e-6, "0.0000017"),
    ("0.00001", 0.00001, "0.00001"),
    ("2.5e-5", 2.5e-5, "0.000025"),
    ("1.5e-7", 1.5e-7, "1.5e-7"),
    ("123.456", 123.456, "123.456"),
    ("-1.5", -1.5, "-1.5"),
    ("0.1+0.2", 0.1 + 0.2, "0.30000000000000004"),
    ("1/3", 1 / 3, "0.3333333333333333"),
    ("4.35", 4.35, "4.35"),
    ("1e300", 1e300, "1e+300"),
    ("2**53+2", 2**53 + 2, "9007199254740994"),
    ("9007199254740993", 9007199254740993, "9007199254740992"),
    ("-2**53", -(2**53), "-9007199254740992"),
    ("2**54+1", 2**54 + 1, "18014398509481984"),
    ("1e16-float", 1e16, "10000000000000000"),
    ("1e16-int", 10**16, "10000000000000000"),
    ("5e-324", 5e-324, "5e-324"),
    ("max-double", 1.7976931348623157e308, "1.7976931348623157e+308"),
    ("2**31", 2**31, "2147483648"),
    ("100", 100, "100"),
]


@pytest.mark.parametrize("value, expected", [row[1:] for row in NUMBERS], ids=[row[0] for row in NUMBERS])
def test_js_number_format(value, expected):
    assert js_number(value) == expected
    assert stable_stringify(value) == expected
    assert stable_stringify({"n": value}) == '{"n":' + expected + "}"
    assert stable_stringify([value]) == "[" + expected + "]"


# Spec §4.1: "finite numbers use JavaScript's JSON.stringify number format (shortest
# round-trip decimal ...)". For integral values from 2**53 up to 1e21 whose shortest
# round-trip form has fewer digits than the exact integer, JavaScript pads the shortest
# digits with zeros (JSON.stringify(2**60) === "1152921504606847000"), it does not print
# the double's exact integer value. Expected values checked with node.
BIG_INTEGRAL = [
    ("2**60-int", 2**60, "1152921504606847000"),
    ("2**60-float", 2.0**60, "1152921504606847000"),
    ("2**64-int", 2**64, "18446744073709552000"),
    ("uint64-max", 18446744073709551615, "18446744073709552000"),
    ("int64-max", 9223372036854775807, "9223372036854776000"),
    ("1.2345678901234568e20", 123456789012345680000.0, "123456789012345680000"),
    ("999999999999999900000-float", 999999999999999900000.0, "999999999999999900000"),
    ("999999999999999900000-int", 999999999999999900000, "999999999999999900000"),
    ("2.407434931009011e16", 2.407434931009011e16, "24074349310090110"),
]


@pytest.mark.parametrize("value, expected", [row[1:] for row in BIG_INTEGRAL], ids=[row[0] for row in BIG_INTEGRAL])
def test_js_number_format_large_integral(value, expected):
    assert js_number(value) == expected
    assert stable_stringify({"id": value}) == '{"id":' + expected + "}"
    assert _exact_text({"id": value}) == '{"id":' + expected + "}"


def test_args_hash_of_uint64_id_matches_javascript():
    # JSON.parse('{"id":18446744073709551615}') serialises as {"id":18446744073709552000}.
    assert args_hash("message", {"id": 18446744073709551615}) == "message:" + sha('{"id":18446744073709552000}')


@pytest.mark.parametrize("value, expected", [
    (10**309, '"Infinity"'),
    (-(10**309), '"-Infinity"'),
    (2**1024, '"Infinity"'),
    ([10**400], '["Infinity"]'),
], ids=["1e309", "-1e309", "2**1024", "nested-1e400"])
def test_integers_beyond_double_range_are_infinity_strings(value, expected):
    # JavaScript's JSON.parse turns them into +-Infinity, which serialises as a string.
    assert stable_stringify(value) == expected


@pytest.mark.parametrize("value, message", [
    (math.nan, "not a finite number"),
    (math.inf, "not a finite number"),
    (-math.inf, "not a finite number"),
    (10**309, "integer beyond the double range"),
], ids=["nan", "inf", "-inf", "huge-int"])
def test_js_number_rejects_non_finite(value, message):
    with pytest.raises(ValueError, match=message):
        js_number(value)


def test_one_point_zero_and_one_hash_the_same():
    assert digest({"n": 1.0}) == digest({"n": 1}) == sha('{"n":1}')
    assert args_hash("read", {"limit": 10.0}) == args_hash("read", {"limit": 10})


# ------------------------------------------------------------------ strings and key order

@pytest.mark.parametrize("value, expected", [
    ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
    ("\u0000", '"\\u0000"'),
    ("\u000b", '"\\u000b"'),
    ("\u001f", '"\\u001f"'),
    ("\u007f", '"\u007f"'),
    ("\u2029", '"\u2029"'),
    ("/", '"/"'),
    ("\udfff", '"\\udfff"'),
    ("a\ud83dz", '"a\\ud83dz"'),
    ("\ufeff", '"\ufeff"'),
    ("日本", '"日本"'),
], ids=["short-escapes", "nul", "vertical-tab", "u001f", "del-raw", "u2029-raw", "slash-raw",
        "lone-low-surrogate", "lone-high-surrogate-inside", "bom-raw", "cjk-raw"])
def test_js_string(value, expected):
    assert js_string(value) == expected
    assert stable_stringify(value) == expected


def test_raw_non_ascii_is_hashed_as_utf8():
    assert digest("é" + EMOJI) == sha('"é' + EMOJI + '"')
    assert digest("\u2028") == sha('"\u2028"')
    assert digest("\u2028") == hashlib.sha256(b'"\xe2\x80\xa8"').hexdigest()


@pytest.mark.parametrize("keys, expected_order", [
    (["\uffff", EMOJI], [EMOJI, "\uffff"]),
    (["\ue000", EMOJI], [EMOJI, "\ue000"]),
    (["\ud83d", EMOJI], ["\ud83d", EMOJI]),
    (["\ud800", "\uffff", "a"], ["a", "\ud800", "\uffff"]),
    (["aa", "a", "b"], ["a", "aa", "b"]),
    (["_", "Z", "a"], ["Z", "_", "a"]),
], ids=["emoji-before-uffff", "emoji-before-private-use", "lone-high-before-pair", "lone-surrogate-key",
        "prefix-first", "ascii"])
def test_keys_sort_by_utf16_code_units(keys, expected_order):
    value = {key: index for index, key in enumerate(keys)}
    expected = "{" + ",".join(js_string(k) + ":" + str(value[k]) for k in expected_order) + "}"
    assert stable_stringify(value) == expected


def test_spec_table_emoji_row_differs_from_code_point_order():
    value = {"\uffff": 1, EMOJI: 2}
    code_point_order = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert code_point_order == '{"\uffff":1,"' + EMOJI + '":2}'
    assert stable_stringify(value) == '{"' + EMOJI + '":2,"\uffff":1}'


# ----------------------------------------------------------- fast path vs exact path

_cyclic: dict = {"a": [1, 2]}
_cyclic["me"] = _cyclic

AGREEMENT = [
    {"path": "/workspace/notes.md"},
    {"command": "ls -la", "cwd": "/tmp", "timeout": 30},
    {"b": [1, 2, {"d": None, "c": True}], "a": "x"},
    {"n": 1.0}, {"n": -0.0}, {"n": 1e21}, {"n": 1e-7}, {"n": 0.00001}, {"n": 1.5e-7}, {"n": 123.456},
    {"n": 2**53 + 2}, {"n": 9007199254740993}, {"n": 1e16}, {"n": 5e-324}, {"n": 1.7976931348623157e308},
    {"n": math.nan}, {"n": math.inf}, {"n": 10**400}, {"n": 2**60}, {"n": 123456789012345},
    {"s": "1234567890123456"}, {"s": "x:1.5"}, {"s": ",12.5e3"},
    {"\uffff": 1, EMOJI: 2}, {"k": "é" + EMOJI}, {"k": "\ud800"}, {"\ud800": 1}, {"k": "\u2028\u0001"},
    {"k": UNDEFINED}, [1, UNDEFINED], UNDEFINED, None, True, False, 0, -1, 1.5, "top", "",
    {"k": b"\x01\x02"}, _cyclic, [[[]]], {"": {"": ""}}, [-1, -2.5, 3], {"neg": -12345678901234567},
    {"unicode": "日本語", "ascii": "plain"}, {"é": 1, "e": 2, "f": 3},
]


@pytest.mark.parametrize("value", AGREEMENT, ids=[f"v{i}" for i in range(len(AGREEMENT))])
def test_fast_path_agrees_with_exact_path(value):
    assert _exact_text(value) == stable_stringify(value)
    assert canonical_bytes(value) == _exact_text(value).encode("utf-8")
    fast = _fast_text(value)
    assert fast is None or fast == _exact_text(value)


@pytest.mark.parametrize("value, expected", [
    ({"path": "/workspace/notes.md"}, '{"path":"/workspace/notes.md"}'),
    ({"b": [1, {"d": None}], "a": "é"}, '{"a":"é","b":[1,{"d":null}]}'),
    ([True, "x", 123456789012345], '[true,"x",123456789012345]'),
], ids=["ascii-object", "bmp-non-ascii", "array-small-int"])
def test_fast_path_taken_for_plain_documents(value, expected):
    assert _fast_text(value) == expected


@pytest.mark.parametrize("value", [
    {"n": 1.0}, {"n": 2**53 + 2}, {"k": EMOJI}, {"k": "\ud800"}, {"k": UNDEFINED}, {"k": b""}, 5, -1,
    {"n": math.nan}, _cyclic,
], ids=["float", "16-digit-int", "astral", "surrogate", "undefined", "bytes", "top-level-int",
        "top-level-negative", "nan", "cycle"])
def test_fast_path_declines_what_it_cannot_prove(value):
    assert _fast_text(value) is None


# ------------------------------------------------------------------ digests (§4.2, §4.3)

def test_args_hash_spec_example():
    # the spec's own worked example (§4.2)
    assert args_hash("read", {"path": "/workspace/notes.md"}) == \
        "read:d358b22b4ff6f0515ebb0f5219842ac08c57d468c8f1d6d6bec0927dafb706a2"


def test_outcome_digest_spec_worked_example():
    assert digest({"details": {"ok": True}, "text": "same file contents"}) == SAME_RESULT_HASH
    assert SAME_RESULT_HASH == sha('{"details":{"ok":true},"text":"same file contents"}')


def test_digest_is_lower_case_hex_sha256():
    value = digest({"a": 1})
    assert value == sha('{"a":1}') == "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"
    assert len(value) == 64 and value == value.lower()


def test_same_args_under_two_tools_never_match():
    assert args_hash("read", {"path": "a"}).split(":", 1)[1] == args_hash("write", {"path": "a"}).split(":", 1)[1]
    assert args_hash("read", {"path": "a"}) != args_hash("write", {"path": "a"})


def test_absent_args_hash_the_word_undefined():
    assert args_hash("tool", UNDEFINED) == "tool:" + sha("undefined")
    assert args_hash("tool", UNDEFINED) != args_hash("tool", None)
    assert args_hash("tool", None) == "tool:" + sha("null")
