"""EventCompleter: the session key and a call's tool name and args added to later events (Spec §7, §9, §10)."""

from streams.runners.completion import EventCompleter

CALL = {"type": "tool_call", "run_id": "r1", "session_id": "S", "session_key": "agent:main:S", "tool_call_id": "c1",
        "tool_name": "read", "args": {"path": "/a"}, "outcome_follows": True}


def test_a_result_gets_its_calls_tool_name_args_and_the_session_key():
    completer = EventCompleter()
    assert completer.complete(CALL) is CALL  # nothing missing: the same object
    result = {"type": "tool_result", "run_id": "r1", "session_id": "S", "tool_call_id": "c1", "result": "x",
              "error": None}
    assert completer.complete(result) == {**result, "session_key": "agent:main:S", "tool_name": "read",
                                          "args": {"path": "/a"}}
    assert "session_key" not in result  # the caller's event is not changed
    # the call is forgotten once answered: a second result only gets the session key
    assert completer.complete(result) == {**result, "session_key": "agent:main:S"}


def test_a_compaction_retry_gets_the_session_key_its_calls_carry():
    completer = EventCompleter()
    completer.complete(CALL)
    retry = {"type": "compaction_retry", "run_id": "r1", "session_id": "S"}
    assert completer.complete(retry) == {**retry, "session_key": "agent:main:S"}
    other = {"type": "compaction_retry", "run_id": "r2", "session_id": "T"}
    assert completer.complete(other) is other  # a session never sent with a key


def test_fields_the_event_has_are_kept():
    completer = EventCompleter()
    completer.complete(CALL)
    keyless = {"type": "tool_result", "run_id": "r1", "session_id": "S", "session_key": None, "tool_call_id": "c1",
               "tool_name": "exec", "result": "x", "error": None}
    assert completer.complete(keyless) == {**keyless, "args": {"path": "/a"}}


def test_absent_args_stay_absent_and_invalid_events_teach_nothing():
    completer = EventCompleter()
    completer.complete({**{k: v for k, v in CALL.items() if k != "args"}, "tool_call_id": "c2"})
    completer.complete({**CALL, "tool_call_id": "c3", "tool_name": 7})  # dead-lettered by the worker
    r2 = {"type": "tool_result", "run_id": "r1", "session_id": "S", "tool_call_id": "c2", "result": 1, "error": None}
    assert completer.complete(r2) == {**r2, "session_key": "agent:main:S", "tool_name": "read"}  # args undefined
    r3 = {**r2, "tool_call_id": "c3"}
    assert completer.complete(r3) == {**r3, "session_key": "agent:main:S"}
    assert completer.complete(["not", "an", "event"]) == ["not", "an", "event"]


def test_memory_is_bounded_oldest_first():
    completer = EventCompleter(max_calls=2, max_sessions=2)
    for i in range(3):
        completer.complete({**CALL, "tool_call_id": f"c{i}", "session_id": f"S{i}", "session_key": f"K{i}"})
    assert list(completer._calls) == ["c1", "c2"] and list(completer._keys) == ["S1", "S2"]
