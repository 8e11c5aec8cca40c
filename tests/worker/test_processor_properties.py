"""Property-based (hypothesis): no input record stops the worker's per-record path.

Whatever bytes arrive, :class:`Processor` either dead-letters the record or
applies it; a verdict and its loop events can be read back by the client's
decoder, and the state checkpoints and restores exactly. An exception here
would stop the worker, and stop it again at every restart on the same record.
"""

from __future__ import annotations

import json

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.wire.codecs import DecodeError, decode_event
from streams.detection import Engine, OpenClawConfig, SessionState
from streams.worker.processor import APPLIED, DEAD_LETTER, Processor
from streams.worker.records import Source
from streams.worker.states import decode_state, encode_state
from tests.one_record import handle_one

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
ENABLED = OpenClawConfig({"tools": {"loopDetection": {"enabled": True, "historySize": 8, "warningThreshold": 2,
                                                      "criticalThreshold": 3,
                                                      "globalCircuitBreakerThreshold": 4}}})

text = st.text(st.characters(exclude_categories=()), max_size=6)  # incl. astral and lone surrogates
ids = st.one_of(st.sampled_from(["r1", "r2", "s1", "c1", "c2", "", " r1 ", "\ud83d"]), text)
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(), text,
                    st.binary(max_size=4))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
                      max_leaves=10)
# each field: usually a plausible value, sometimes anything at all
fields = {
    "type": st.one_of(st.sampled_from(["tool_call", "tool_result", "compaction_retry"]), values),
    "run_id": st.one_of(ids, values), "session_id": st.one_of(ids, values), "session_key": st.one_of(ids, values),
    "tool_call_id": st.one_of(ids, values),
    "tool_name": st.one_of(st.sampled_from(["read", "exec", "process", "nope", "\ud800x"]), values),
    "args": values, "result": values, "error": values, "params": values, "agent_id": st.one_of(ids, values),
    "event_id": st.one_of(ids, values), "ts": st.one_of(st.integers(min_value=0, max_value=2**64), values),
    "source": values,
}
events = st.fixed_dictionaries({}, optional=fields)


def _raw(event: dict, as_json: bool) -> bytes | None:
    """The record value a producer would send, or None if that codec cannot carry the event."""
    try:
        return json.dumps(event).encode("ascii") if as_json else msgpack.packb(event, use_bin_type=True)
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError):
        return None


@SETTINGS
@given(st.lists(st.tuples(events, st.booleans()), min_size=1, max_size=12), st.sampled_from(["msgpack", "json"]),
       st.booleans())
def test_every_record_is_dead_lettered_or_applied_and_checkpoints(records, codec, keyed):
    processor = Processor(Engine(ENABLED), codec=codec)
    states: dict[bytes, SessionState] = {}
    for offset, (event, as_json) in enumerate(records):
        raw = _raw(event, as_json)
        if raw is None:
            continue
        source = Source("events", 0, offset)
        try:
            decoded = decode_event(raw)
        except DecodeError:
            [(topic, _, dead, _)] = handle_one(processor, raw, offset=offset).publish
            assert topic == processor.topics.dead_letters and msgpack.unpackb(dead)["reason_class"] == "decode"
            continue
        key = processor.state_key(b"k" if keyed else None, decoded)
        state = states.setdefault(key, SessionState())
        outcome = processor.apply(key, decoded, source, state, raw)
        if outcome.kind == DEAD_LETTER:
            letter = msgpack.unpackb(outcome.dead_letter)  # strict UTF-8, as any consumer reads it
            assert letter["reason_class"] in ("schema", "error") and letter["value"] == raw
            continue
        assert outcome.kind == APPLIED
        verdict = decode_event(outcome.verdict)
        assert verdict["source"] == {"topic": "events", "partition": 0, "offset": offset}
        assert verdict["event_id"] == decoded.get("event_id") and verdict["verdict"] in (
            "allow", "warn", "block", "abort", "ignore")
        assert all(decode_event(e)["source"] == verdict["source"] for e in outcome.loop_events)
        assert decode_state(encode_state(state, processor.engine)) == state
