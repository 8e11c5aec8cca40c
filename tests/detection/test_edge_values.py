"""Odd values on which loopwatch once differed from OpenClaw's shipped code (2026.7.35 and 2026.9.6).

Each expectation was taken from the shipped JavaScript run on the stated input.
"""

import math

import pytest

from streams.detection.config import resolve
from streams.detection.fingerprint import PROFILE_PLAIN, PROFILE_SEND, args_hash, normalize_tool_name, outcome_hash, \
    outcome_profile
from streams.detection.outcomes_2026_9 import outcome_2026_9

# ------------------------------------------------- docs/detection-rules.md §2.2: detector flags by truthiness


@pytest.mark.parametrize("value, on", [("", False), (0, False), (-0.0, False), (math.nan, False), (None, True),
                                       ("false", True), (1, True), ({}, True), ([], True), (False, False)])
def test_detector_flag_is_read_by_javascript_truthiness(value, on):
    # `detectors.pingPong ?? true` then `if (detectors.pingPong && ...)`: "" / 0 / NaN switch the detector off
    # (loopwatch kept them on); null falls back to the default, on.
    settings = resolve({"enabled": True, "detectors": {"pingPong": value, "genericRepeat": value,
                                                        "knownPollNoProgress": value}})
    assert (settings.ping_pong, settings.generic_repeat, settings.known_poll_no_progress) == (on, on, on)


# -------------------------------------- docs/detection-rules.md §4.3 rule 7: a message action that is no string

MESSAGE_RESULT = {"details": {"messageId": "m1", "ok": True}}


@pytest.mark.parametrize("action", [["send"], {"send": 1}])
def test_message_action_that_is_not_a_string_is_a_plain_outcome(action):
    # loopwatch raised TypeError (unhashable list/dict); OpenClaw hashes {details, text} with messageId kept
    assert outcome_profile("message", {"action": action}, frozenset()) == PROFILE_PLAIN
    plain = "df108d16748af5b35423dd32d3dd7cb47caa7f9234b3fb2dd85e20e45855f005"
    assert outcome_hash(PROFILE_PLAIN, MESSAGE_RESULT, None) == plain
    assert outcome_2026_9(outcome_profile("message", {"action": action}, frozenset(), True),
                          MESSAGE_RESULT, None).result_hash == plain


def test_message_send_action_still_strips_volatile_ids():
    profile = outcome_profile("message", {"action": "send"}, frozenset())
    assert profile == PROFILE_SEND
    assert outcome_hash(profile, MESSAGE_RESULT, None) == "4062edaf750fb8074e7e83e0c9028c94e32468a8b6f1614774328ef045150f93"


# ------------------------- docs/detection-rules.md §3 step 1: 2026.7.35's alias table is a plain object


@pytest.mark.parametrize("raw, name", [("constructor", "function Object() { [native code] }"),
                                       (" Constructor\ufeff", "function Object() { [native code] }"),
                                       ("__proto__", "[object Object]")])
def test_object_prototype_names_resolve_through_the_2026_7_alias_object(raw, name):
    assert normalize_tool_name(raw) == name
    assert normalize_tool_name(raw, True) == raw.strip(" \ufeff").lower()  # 2026.9.6: a Map, plain names
    # the args hash carries the resolved text as its prefix (OpenClaw 2026.7.35, args {"a": 1})
    assert args_hash(normalize_tool_name("constructor"), {"a": 1}) == (
        "function Object() { [native code] }:015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862")


@pytest.mark.parametrize("raw", ["toString", "valueOf", "hasOwnProperty"])
def test_mixed_case_prototype_names_are_lower_cased_first_and_stay_plain(raw):
    assert normalize_tool_name(raw) == raw.lower()


# ------------------------ docs/detection-rules.md §3 step 1: lower-casing as Node's ICU does it


@pytest.mark.parametrize("raw, name", [("\ua7cbRead", "\u0264read"), ("\u1c89", "\u1c8a"), ("\ua7dc", "\u019b"),
                                       ("\U00010d50x", "\U00010d70x"), ("\U00016ea0", "\U00016ebb"),
                                       ("\u0130X", "i\u0307x"), ("\u0391\u03a3", "\u03b1\u03c2")])
def test_tool_names_lower_case_with_javascripts_unicode_tables(raw, name):
    # Python 3.11 left U+A7CB, U+1C89, U+10D50.. unchanged; Node 20 and 24 lower-case them (Unicode 16)
    assert normalize_tool_name(raw) == name
    assert normalize_tool_name(raw, True) == name


# ---------------- docs/detection-rules.md §4.3 rule 7: a send's copy drops "__proto__" keys


def test_send_outcome_drops_proto_keys_at_any_depth():
    # OpenClaw builds the stripped copy by assignment; `copy["__proto__"] = v` sets a prototype, not a key.
    # Before: loopwatch hashed the key. Both versions: the same hash as {"ok": true}.
    send = outcome_profile("sessions_send", {}, frozenset())
    top = {"details": {"__proto__": {"a": 1}, "ok": True}}
    assert outcome_hash(send, top, None) == "4062edaf750fb8074e7e83e0c9028c94e32468a8b6f1614774328ef045150f93"
    assert outcome_hash(send, top, None) == outcome_hash(send, {"details": {"ok": True}}, None)
    nested = {"details": {"list": [{"__proto__": {"x": 1}, "messageId": "1"}], "ok": True}}
    assert outcome_2026_9(outcome_profile("sessions_send", {}, frozenset(), True), nested, None).result_hash == (
        "d93c701c119616504f457cd1ccc2dee46e836546b23409acb00f7b081bd8f779")
    # a plain outcome hashes the parsed object itself, whose own "__proto__" key stays
    assert outcome_hash(PROFILE_PLAIN, top, None) != outcome_hash(PROFILE_PLAIN, {"details": {"ok": True}}, None)
