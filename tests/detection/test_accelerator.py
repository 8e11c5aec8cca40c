"""The C accelerator (streams/detection/_canonical.c) and the pure-Python path give the same bytes and hashes.

Checked three ways: a fuzz of nested JSON values (unicode with lone surrogates and astral characters, floats with
-0.0, 1e21 and NaN/Infinity, integers beyond 2**53 and beyond 64 bits, deep nesting, key order); every args,
result and thrown value of the conformance vectors; and each conformance file run whole in a process that does
not load the accelerator (``LOOPWATCH_NO_ACCELERATOR=1``), verdict for verdict.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.detection import UNDEFINED, canonical, events, outcomes_2026_9
from streams.detection.fingerprint import PROFILE_PLAIN, PROFILE_WRITE, outcome_hash
from streams.detection.canonical import _exact_text, _number

pytestmark = pytest.mark.skipif(not canonical.ACCELERATED, reason="the C accelerator is not built here")

CONFORMANCE = Path(__file__).resolve().parents[2] / ".." / "shared" / "conformance"
VECTOR_FILES = ("vectors.jsonl", "vectors-2026.9.jsonl", "vectors-2026.9-shared.jsonl")
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

_tricky_chars = st.sampled_from(["\ud800", "\udfff", "\U0001f600", "\uffff", "\u2028", "\x00", "\x1f", '"', "\\",
                                 "\u00e9", "\u65e5", "\ufeff", "/"])
_strings = st.text(alphabet=st.one_of(st.characters(), _tricky_chars), max_size=40)
_numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**53, 2**53 + 1, -(2**53) - 1, 2**63, 2**64 + 1, 10**400, -(10**400)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.0, 1e21, 1e-7, 1.5e-7, 0.00001, 5e-324, 1.7976931348623157e308, math.nan, math.inf,
                     -math.inf, 1.0, 123.456, 1e16]),
)
_scalars = st.one_of(st.none(), st.booleans(), _numbers, _strings, st.just(UNDEFINED))
json_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(_strings, inner, max_size=6)),
    max_leaves=40,
)


def _pure_bytes(value) -> bytes:
    return _exact_text(value).encode("utf-8")


def _c_bytes(value) -> bytes:
    return canonical._c_canonical_bytes(value, _number, UNDEFINED)


def _c_hex(value, prefix: str = "") -> str:
    return canonical._c_digest_hex(value, _number, UNDEFINED, prefix)


def _nested(depth: int):
    value = {"leaf": ["x", 1.5, None]}
    for level in range(depth):
        value = {"z": level, "a": [value], "\u00e9": "k"}
    return value


@FUZZ
@given(json_values)
def test_fuzzed_values_serialise_and_hash_alike(value):
    expected = _pure_bytes(value)
    assert _c_bytes(value) == expected
    if canonical._c_digest_hex is not None:
        assert _c_hex(value, "tool:") == "tool:" + hashlib.sha256(expected).hexdigest()


@pytest.mark.parametrize("depth", [1, 40, 98])  # two levels each (an object holding a list)
def test_deep_nesting_within_the_c_limit_agrees(depth):
    value = _nested(depth)
    assert _c_bytes(value) == _pure_bytes(value)


def test_nesting_beyond_the_c_limit_falls_back_to_the_same_bytes():
    value = _nested(400)  # deeper than the C walk goes: it declines and the public functions take Python's path
    with pytest.raises(TypeError):
        _c_bytes(value)
    assert canonical.canonical_bytes(value) == _pure_bytes(value)
    assert canonical.digest(value) == hashlib.sha256(_pure_bytes(value)).hexdigest()


def test_payload_larger_than_the_stack_buffer_agrees():
    value = {"content": [{"type": "text", "text": "line \u00e9\n" * 20_000}], "details": {"n": list(range(3000))}}
    assert len(_pure_bytes(value)) > 16384 * 4
    assert _c_bytes(value) == _pure_bytes(value)
    assert _c_hex(value) == hashlib.sha256(_pure_bytes(value)).hexdigest()


def test_key_order_is_utf16_not_code_point():
    value = {"\U0001f600": 1, "\uffff": 2, "a": 3, "": 4, "\u00e9": 5}
    assert _c_bytes(value) == _pure_bytes(value)
    assert _c_bytes(value).decode("utf-8").index("\U0001f600") < _c_bytes(value).decode("utf-8").index("\uffff")


def _vector_values():
    for name in VECTOR_FILES:
        path = CONFORMANCE / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            for event in json.loads(line)["events"]:
                for field in ("args", "result", "error"):
                    if field in event:
                        yield event[field]


def test_conformance_values_hash_alike():
    values = list(_vector_values())
    if not values:
        pytest.skip("the conformance vectors are not beside this checkout")
    for value in values:
        expected = _pure_bytes(value)
        assert _c_bytes(value) == expected
        if canonical._c_digest_hex is not None:
            assert _c_hex(value) == hashlib.sha256(expected).hexdigest()


@pytest.mark.parametrize("name", VECTOR_FILES)
def test_conformance_passes_without_the_accelerator(name):
    path = CONFORMANCE / name
    if not path.exists():
        pytest.skip("the conformance vectors are not beside this checkout")
    probe = "from streams.detection.canonical import ACCELERATED; assert not ACCELERATED; "
    env = {**os.environ, "LOOPWATCH_NO_ACCELERATOR": "1"}
    loaded = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr
    command = Path(sys.executable).with_name("loopwatch")
    run = subprocess.run([str(command), "conformance", str(path)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert ", 0 failed" in run.stdout


class _Str(str):
    pass


class _Int(int):
    pass


_FIELD_VALUES = [None, "x", "", " ", _Str("x"), 0, -3, _Int(4), 1.5, math.nan, True, False, [], {}, b"x", UNDEFINED,
                 "openclaw-2026.7", "openclaw-2026.9.6", _Str("openclaw-2026.7"), "tool_call", "tool_result",
                 "compaction_retry", _Str("tool_call"), "absent"]
_FIELDS = ("type", *events._STRING_FIELDS, *events._NUMBER_FIELDS, *events._BOOL_FIELDS, "profile")


@pytest.mark.parametrize("kind", ["tool_call", "tool_result", "compaction_retry"])
@pytest.mark.parametrize("field", _FIELDS)
def test_schema_checked_in_c_as_in_python(kind, field):
    """validate_event's C check of the usual event (``event_kind``) accepts what the Python checks accept, with
    the same type: each value in each field (absent too), for each event type, with and without a session."""
    assert canonical.accelerated("event_kind") is events._event_kind is not None
    for base in ({"type": kind, "session_id": "s", "run_id": "r", "ts": 1, "judged": True},
                 {"type": kind, "session_key": "", "ran_without_verdict": True},
                 {"type": kind, "session_key": "k", "judged": False}):
        for value in _FIELD_VALUES:
            event = {k: v for k, v in base.items() if k != field}
            if value != "absent":
                event[field] = value
            python = _kind_of(_Mapping(event))  # not a dict: the Python checks alone
            assert _kind_of(event) == python, (event, python)  # a dict: the C check first
            if python is not None:
                assert type(_kind_of(event)) is type(python)


def _kind_of(event):
    try:
        return events.validate_event(event)
    except events.EventError:
        return None


class _Mapping(Mapping):
    def __init__(self, data):
        self._data = data

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


_ascii = st.text(alphabet=st.characters(max_codepoint=127), max_size=40)
_texts = st.one_of(_ascii, _ascii, _strings, st.sampled_from(["", " x ", "\t\n\x0b\x0c\r x\r\n", "\x1c x \x1f", "\u00a0x\u3000",
                                               "\ufeff", "a\"b\\c", "x" * 40]))
_details = st.one_of(st.none(), st.just("absent"), _scalars, st.dictionaries(
    st.sampled_from(["status", "exitCode", "deniedReason", "changed", "a", "\ud800"]),
    st.one_of(_scalars, st.sampled_from(["blocked", "tool-loop", _Str("blocked")]), json_values), max_size=4))
_blocks = st.dictionaries(st.sampled_from(["type", "text", "other"]),
                          st.one_of(_texts, st.just(_Str("x")), _scalars), max_size=3)
_results = st.one_of(json_values, st.builds(
    lambda content, details, marker: {"content": content, **({} if details == "absent" else {"details": details}),
                                      **({"marker": "<<<EXTERNAL_UNTRUSTED_CONTENT id="} if marker else {})},
    st.one_of(st.lists(st.builds(lambda text: {"type": "text", "text": text}, _texts), min_size=1, max_size=1),
              st.lists(st.builds(lambda text: {"type": "text", "text": text}, _texts), min_size=1, max_size=1),
              st.lists(_blocks, min_size=1, max_size=2), _scalars),
    _details, st.booleans()))


@FUZZ
@given(result=_results, is_2026_9=st.booleans())
def test_plain_outcome_in_c_as_in_python(result, is_2026_9):
    """The plain outcome digest in C (``plain_outcome_hex``) equals the Python rule's wherever it answers."""
    needle = outcomes_2026_9.MARKER_NEEDLE if is_2026_9 else None
    found = canonical.plain_outcome_hex(result, needle)
    if found is None:
        return
    if is_2026_9:  # the plain rule, and write's where it is the plain one
        assert outcomes_2026_9.outcome_2026_9(PROFILE_PLAIN, result, None) == (found, None, 0, False, None)
        assert outcomes_2026_9.outcome_2026_9(PROFILE_WRITE, result, None) == (found, None, 0, False, None)
    else:
        assert outcome_hash(PROFILE_PLAIN, result, None) == found


def test_plain_outcome_in_c_answers_the_usual_result():
    result = {"content": [{"type": "text", "text": " done\n"}], "details": {"status": "ok", "n": 1.5}}
    assert canonical.plain_outcome_hex(result, None) == outcome_hash(PROFILE_PLAIN, result, None)
    assert canonical.plain_outcome_hex(result, outcomes_2026_9.MARKER_NEEDLE) == outcome_hash(PROFILE_PLAIN, result, None)
    marked = {**result, "details": {"note": "<<<EXTERNAL_UNTRUSTED_CONTENT id="}}
    assert canonical.plain_outcome_hex(marked, None) is not None
    assert canonical.plain_outcome_hex(marked, outcomes_2026_9.MARKER_NEEDLE) is None
    vetoed = {**result, "details": {"status": "blocked", "deniedReason": "tool-loop"}}
    assert canonical.plain_outcome_hex(vetoed, None) is None
    unchanged = {**result, "details": {"changed": False}}  # 2026.9.6's write rule: to Python
    assert canonical.plain_outcome_hex(unchanged, None) is None
    assert canonical.plain_outcome_hex({**result, "details": {"changed": True}}, None) is not None
