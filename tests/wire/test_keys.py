"""Partition keys (streams.wire.keys): a blank run id falls back to the session, as its guard does (Spec §7)."""

import pytest

from streams.detection.events import guard_key
from streams.wire.keys import partition_key, record_key


@pytest.mark.parametrize("event, run_key, session_key", [
    ({"run_id": "r1", "session_id": "s", "session_key": "k"}, "r1", "k"),
    ({"run_id": " r1 ", "session_id": "s"}, " r1 ", "s"),  # as sent, untrimmed: the guard's identity
    ({"run_id": " \t", "session_id": "s", "session_key": "k"}, "k", "k"),
    ({"run_id": "", "session_id": "s", "session_key": None}, "s", "s"),
    ({"session_id": "s"}, "s", "s"),
    ({"run_id": "\u3000", "session_id": "s"}, "s", "s"),  # JavaScript's trim: ideographic space is blank
    # a tool_result with neither session id nor key (Spec §8.1 R7): its run, else OpenClaw's "unknown"
    ({"type": "tool_result", "run_id": "r1", "session_id": None}, "r1", "r1"),
    ({"type": "tool_result", "run_id": " ", "session_key": "", "tool_call_id": "c1"}, "unknown", "unknown"),
], ids=["run", "untrimmed", "whitespace-run", "empty-run-keyless", "no-run", "js-whitespace", "no-session-run",
        "no-ids"])
def test_partition_keys(event, run_key, session_key):
    assert partition_key(event, "run") == run_key
    assert partition_key(event, "session") == session_key
    assert record_key(event, "run") == run_key.encode()


def test_under_run_keys_a_guard_is_under_its_own_record_key():
    for event in ({"run_id": " r1", "session_id": "s"}, {"run_id": " ", "session_id": "s", "session_key": "k"},
                  {"run_id": None, "session_id": "s", "session_key": None}):
        assert partition_key(event, "run") == guard_key(event)
