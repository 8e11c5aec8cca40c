"""The 2026.9.6 behaviour profile: choosing it, refused keys, a mixed fleet, and its rules one by one
(``openclaw-2026.9.md``; section numbers below are that delta's)."""

from __future__ import annotations

import msgpack
import pytest

from streams.detection import ConfigError, Engine, EventError, OpenClawConfig, SessionState, SessionStore, validate
from streams.detection.canonical import digest, stable_stringify
from streams.detection.outcomes_2026_9 import (KIND_TERMINAL_EXEC_FAILURE, KIND_VETO, mask_volatile,
                                              normalize_untrusted_markers)
from streams.detection.profiles import OPENCLAW_2026_7, OPENCLAW_2026_9_6
from streams.detection.recovery import RECOVERY_SUFFIX, SIBLING_RECOVERY, SIBLING_TERMINAL, TERMINAL_SUFFIX

ON = {"tools": {"loopDetection": {"enabled": True}}}
READ = {"content": [{"type": "text", "text": "same contents"}], "details": {"ok": True}}


def call(n: int, tool: str = "read", args=None, result=READ, **extra) -> dict:
    event = {"type": "tool_call", "run_id": "r1", "session_id": "s1", "tool_call_id": f"c{n}", "tool_name": tool,
             "args": {"path": "/a"} if args is None else args, "result": result, "error": None}
    event.update(extra)
    return event


def run(config: dict, events: list[dict], profile: str | None = OPENCLAW_2026_9_6) -> list[dict]:
    store = SessionStore(Engine(OpenClawConfig(config, profile=profile)))
    return [store.process(event) for event in events]


# ------------------------------------------------------------------ choosing a profile


def test_default_profile_is_the_configurable_2026_7_line():
    config = OpenClawConfig({"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3}}})
    settings = config.for_agent(None)
    assert (config.profile, settings.profile, settings.is_2026_9) == (OPENCLAW_2026_7, OPENCLAW_2026_7, False)
    assert settings.warning_threshold == 3


def test_options_profile_agent_profiles_and_the_event_field_take_precedence_in_that_order():
    config = OpenClawConfig({
        "tools": {"loopDetection": {"enabled": True}},
        "options": {"profile": OPENCLAW_2026_9_6, "agentProfiles": {"Legacy Box": OPENCLAW_2026_7}},
    })
    assert config.profile_for(None) == OPENCLAW_2026_9_6
    assert config.profile_for("ops") == OPENCLAW_2026_9_6
    assert config.profile_for(" legacy box ") == OPENCLAW_2026_7  # ids normalised as OpenClaw does
    assert config.profile_for("legacy-box", OPENCLAW_2026_9_6) == OPENCLAW_2026_9_6  # the event's own field wins
    assert config.for_agent("legacy-box").is_2026_9 is False
    assert config.for_agent("legacy-box", OPENCLAW_2026_9_6).is_2026_9 is True


def test_event_profile_field_is_checked_like_the_other_fields():
    engine = Engine(OpenClawConfig(ON))
    with pytest.raises(EventError, match="profile: expected one of 'openclaw-2026.7', 'openclaw-2026.9.6', "
                                         "got 'openclaw-2026.8'"):
        engine.process(call(1, profile="openclaw-2026.8"), SessionState())


def test_unknown_profile_names_are_refused_in_config():
    issues = _issues({"options": {"profile": "2026.9.6", "agentProfiles": {"a1": 7}}})
    assert [path for path, _ in issues] == ["options.profile", "options.agentProfiles.a1"]
    with pytest.raises(ValueError, match="profile: expected one of"):
        OpenClawConfig({}, profile="latest")


# ------------------------------------------------------------------ §2.1 refused keys


def _issues(raw: dict) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        validate(raw)
    return info.value.issues


def test_threshold_keys_are_refused_under_2026_9_6_with_the_reason():
    raw = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "postCompactionGuard": {"windowSize": 2}}},
           "options": {"profile": OPENCLAW_2026_9_6}}
    [(path, message)] = _issues(raw)
    assert path == "tools.loopDetection"
    assert message.startswith("Unrecognized key(s) in object: 'warningThreshold', 'postCompactionGuard': "
                              "profile openclaw-2026.9.6 reads only 'enabled'")
    assert "choose profile openclaw-2026.7 to keep your thresholds" in message


def test_enabled_alone_is_valid_under_2026_9_6_and_must_be_a_boolean():
    validate({"tools": {"loopDetection": {"enabled": True}}, "options": {"profile": OPENCLAW_2026_9_6}})
    assert _issues({"tools": {"loopDetection": {"enabled": "true"}}, "options": {"profile": OPENCLAW_2026_9_6}}) == [
        ("tools.loopDetection.enabled", "Expected boolean, received string")]


def test_each_agent_block_is_validated_by_its_own_profile():
    raw = {
        "tools": {"loopDetection": {"enabled": True}},
        "agents": {"list": [{"id": "old", "tools": {"loopDetection": {"warningThreshold": 5}}},
                            {"id": "new", "tools": {"loopDetection": {"historySize": 50}}}],
                   "entries": {"newer": {"tools": {"loopDetection": {"detectors": {"pingPong": False}}}}}},
        "options": {"profile": OPENCLAW_2026_9_6, "agentProfiles": {"old": OPENCLAW_2026_7}},
    }
    assert [path for path, _ in _issues(raw)] == ["agents.list.1.tools.loopDetection",
                                                  "agents.entries.newer.tools.loopDetection"]


def test_the_same_thresholds_are_valid_under_2026_7():
    validate({"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}}})


def test_unvalidated_threshold_keys_are_ignored_at_runtime_under_2026_9_6():
    config = OpenClawConfig({"tools": {"loopDetection": {"enabled": True, "warningThreshold": 2, "historySize": 4,
                                                         "postCompactionGuard": {"windowSize": 1}}}},
                            profile=OPENCLAW_2026_9_6)
    settings = config.for_agent(None)
    assert (settings.warning_threshold, settings.critical_threshold, settings.global_circuit_breaker_threshold,
            settings.unknown_tool_threshold, settings.history_size, settings.window_size) == (10, 20, 30, 10, 30, 3)


# ------------------------------------------------------------------ §2.3/§2.4 enabled and the overlay


@pytest.mark.parametrize("enabled, detects, records, guard", [
    (True, True, True, True), (None, False, False, True), ("true", False, False, True), (1, False, False, True),
    (False, False, False, False),
])
def test_enabled_is_strict(enabled, detects, records, guard):
    block = {} if enabled is None else {"enabled": enabled}
    settings = OpenClawConfig({"tools": {"loopDetection": block}}, profile=OPENCLAW_2026_9_6).for_agent(None)
    assert (settings.detectors_enabled, settings.records_calls, settings.guard_enabled) == (detects, records, guard)


def test_agent_enabled_null_falls_back_to_global_and_agents_entries_win():
    raw = {"tools": {"loopDetection": {"enabled": True}},
           "agents": {"list": [{"id": "a1", "tools": {"loopDetection": {"enabled": None}}},
                               {"id": "a2", "tools": {"loopDetection": {"enabled": True}}}],
                      "entries": {"A2": {"tools": {"loopDetection": {"enabled": False}}}}}}
    config = OpenClawConfig(raw, profile=OPENCLAW_2026_9_6)
    assert config.for_agent("a1").enabled is True  # 2026.7: null overrode the global true
    assert OpenClawConfig(raw).for_agent("a1").enabled is None
    assert config.for_agent("a2").enabled is False  # agents.entries (keys normalised) before agents.list


# ------------------------------------------------------------------ one engine, two profiles


def test_mixed_fleet_one_engine_two_agents_two_profiles():
    config = {"tools": {"loopDetection": {"enabled": True}},
              "agents": {"list": [{"id": "legacy", "tools": {"loopDetection": {"criticalThreshold": 12}}}]},
              "options": {"profile": OPENCLAW_2026_9_6, "agentProfiles": {"legacy": OPENCLAW_2026_7}}}
    store = SessionStore(Engine(OpenClawConfig(config)))
    legacy, current = [], []
    for n in range(22):
        legacy.append(store.process(call(n, agent_id="legacy", run_id="old", session_id="s-old")))
        current.append(store.process(call(n, agent_id="fresh", run_id="new", session_id="s-new")))
    # 2026.7 agent: its own criticalThreshold 12, sticky blocks (no veto recorded), no 2026.9.6 fields
    assert [v["decision"] for v in legacy[10:15]] == ["warn", "allow", "block", "block", "block"]
    assert legacy[-1]["detection"]["count"] == 12 and "run_terminated" not in legacy[-1]
    assert legacy[12]["detection"]["message"].startswith("CRITICAL: Called read with identical arguments and identical")
    # 2026.9.6 agent: fixed 20, a recovery block, then the terminal one that ends the run
    assert [v["decision"] for v in current[18:22]] == ["allow", "allow", "block", "block"]
    assert [v.get("tool_loop_recovery") for v in current[20:22]] == ["recovery", "terminal"]
    assert [v["verdict"] for v in current[20:22]] == ["block", "abort"]
    assert [v["detection"]["count"] for v in current[20:22]] == [20, 21]  # the veto counts
    assert current[21]["run_terminated"] is True and current[19]["run_terminated"] is False


def test_one_runner_on_2026_9_6_beside_a_2026_7_default_by_the_event_field():
    events = [call(n, profile=OPENCLAW_2026_9_6) for n in range(21)]
    verdicts = run(ON, events, profile=None)
    assert verdicts[20]["tool_loop_recovery"] == "recovery"
    assert verdicts[10]["warning"]["note"].startswith("[System note: Tool-loop warning after 10 repeated calls.")


# ------------------------------------------------------------------ §3 veto, recovery, note


def test_recovery_and_terminal_block_texts():
    verdicts = run(ON, [call(n) for n in range(22)] + [call(99, tool_call_id=None)])
    recovery, terminal, sibling = verdicts[20], verdicts[21], verdicts[22]
    message = "CRITICAL: Called read with identical outcomes 20 times. Session execution blocked to prevent runaway loops."
    assert recovery["block_reason"] == message
    assert recovery["block_text"] == message + "\n\n" + RECOVERY_SUFFIX
    assert recovery["veto_recorded"] is True and recovery["recorded_call"] is False
    assert terminal["block_text"] == terminal["block_reason"] + "\n\n" + TERMINAL_SUFFIX
    assert sibling["block_text"] == SIBLING_TERMINAL  # a call without an id never equals the recorded id
    assert sibling["detection"]["count"] == 22


def test_compaction_retry_clears_the_recovery_flag_and_reports_window_3():
    events = [call(n) for n in range(21)]
    events.append({"type": "compaction_retry", "run_id": "r1", "session_id": "s1"})
    events.append(call(50, tool_call_id=None))
    verdicts = run({"tools": {"loopDetection": {"enabled": True, "postCompactionGuard": {"windowSize": 9}}}}, events)
    assert verdicts[21]["guard"]["window_size"] == 3
    assert verdicts[22]["tool_loop_recovery"] == "recovery" and verdicts[22]["block_text"] == SIBLING_RECOVERY


def test_vetoes_keep_the_streak_growing_to_the_global_breaker():
    events = [call(n) for n in range(20)]
    for n in range(20, 31):  # retries after each new attempt (compaction retry) keep being vetoed
        events.append({"type": "compaction_retry", "run_id": "r1", "session_id": "s1"})
        events.append(call(n))
    verdicts = [v for v in run(ON, events) if v["type"] == "tool_call"]
    assert verdicts[-1]["detection"]["detector"] == "global_circuit_breaker"
    assert verdicts[-1]["detection"]["count"] == 30
    assert verdicts[-1]["block_reason"].startswith("CRITICAL: read repeated identical no-progress outcomes 30 times.")


def test_a_warning_without_call_id_is_emitted_but_carries_no_note():
    verdicts = run(ON, [call(n, tool_call_id=None) for n in range(11)])
    assert verdicts[10]["warning"]["emitted"] is True and "note" not in verdicts[10]["warning"]


def test_a_veto_record_is_recorded_in_history_and_round_trips():
    store = SessionStore(Engine(OpenClawConfig(ON, profile=OPENCLAW_2026_9_6)))
    for n in range(21):
        store.process(call(n))
    state = store.states["s1"]
    assert state.history[-1].kind == KIND_VETO and state.history[-1].result_hash is None
    assert store.guards["r1"].recovery is True and store.guards["r1"].terminated is False
    restored = SessionState.from_bytes(state.to_bytes())
    assert restored == state and restored.history[-1].kind == KIND_VETO


def test_run_state_flags_round_trip_with_the_state():
    engine = Engine(OpenClawConfig(ON, profile=OPENCLAW_2026_9_6))
    state = SessionState()
    for n in range(22):  # guards kept in state.runs, as the worker keeps them
        engine.process(call(n), state)
    assert (state.runs["r1"].recovery, state.runs["r1"].terminated) == (True, True)
    assert not state.runs["r1"].idle
    restored = SessionState.from_bytes(state.to_bytes())
    assert (restored.runs["r1"].recovery, restored.runs["r1"].terminated) == (True, True)
    assert engine.process(call(22), restored)["verdict"] == "abort"


def test_a_2026_7_state_serialises_as_before():
    engine = Engine(OpenClawConfig(ON))
    state = SessionState()
    for n in range(21):
        engine.process(call(n), state)
    data = state.to_bytes()
    assert SessionState.from_bytes(data) == state
    doc = msgpack.unpackb(data, raw=False, strict_map_key=False)
    assert len(doc[3]) == 20 and all(len(row) == 6 for row in doc[3])  # the block left no record (2026.7)
    assert all(len(run) == 5 for run in doc[7].values())


# ------------------------------------------------------------------ §4.3 outcomes


def test_errors_are_no_progress_and_unchanged_writes_hash_as_unchanged():
    verdicts = run(ON, [call(1, tool="web_fetch", result=None, error="HTTP 503"),
                        call(2, tool="write", result={"content": [{"type": "text", "text": "x"}],
                                                       "details": {"changed": False, "path": "/a"}})])
    assert verdicts[0]["outcome"]["no_progress"] is True
    assert verdicts[0]["outcome"]["result_hash"] == digest("HTTP 503", "error:")
    assert verdicts[1]["outcome"] == {"recorded": True, "result_hash": digest({"status": "unchanged"}),
                                      "unknown_tool_name": None, "no_progress": True}


def test_terminal_exec_failure_identity_masks_volatile_output():
    def failed(text):
        return {"content": [], "details": {"status": "failed", "exitCode": 1, "aggregated": text}}
    verdicts = run(ON, [call(1, tool="exec", args={"command": "make"}, result=failed("boom at 10:00:01 pid=7")),
                        call(2, tool="exec", args={"command": "make"}, result=failed("boom at 11:59:59 pid=8"))])
    first, second = (v["outcome"] for v in verdicts)
    assert first["outcome_kind"] == second["outcome_kind"] == "terminal-exec-failure"
    assert first["result_hash"] != second["result_hash"]
    assert first["failure_identity_hash"] == second["failure_identity_hash"] == digest(
        {"status": "failed", "exitCode": 1, "timedOut": False, "output": "boom at # #"})
    assert KIND_TERMINAL_EXEC_FAILURE == 2


@pytest.mark.parametrize("text, masked", [
    ("at 2026-12-03T01:02:03.123456+01:00 done", "at # done"),
    ("at 2026-12-03 01:02:03Z", "at #"),
    ("clock 9:05:07.5 then", "clock # then"),
    ("Attempt #3 of 5, RETRY=2", "# of 5, #"),
    ("took 1.5s, 250 ms, 3 minutes, 2 hours", "took #, #, #, #"),
    ("pid: 4242 ppid#1", "# #"),
    ("error code 0", "error code 0"),
    ("rapid 12", "rapid 12"),  # 'pid' only as a whole word
    ("3 sheep", "3 sheep"),  # a unit only as a whole word
    ("x12:30:45y", "x#y"),  # a clock time needs no word boundary
    ("at 1:02:03.1234567", "at #7"),  # at most 6 fraction digits
    ("5 \u017feconds", "#"),  # JavaScript's /iu folds U+017F (long s) to s
    ("attempt\u212a 3", "attempt\u212a 3"),  # ... and U+212A (Kelvin) is a word character there
])
def test_mask_volatile(text, masked):
    assert mask_volatile(text) == masked


@pytest.mark.parametrize("text, normalised", [
    ('<<<EXTERNAL_UNTRUSTED_CONTENT id="0123456789abcdef">>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id="0123456789abcdef">>>',
     '<<<EXTERNAL_UNTRUSTED_CONTENT id="0000000000000000">>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id="0000000000000000">>>'),
    ('<<<EXTERNAL_UNTRUSTED_CONTENT id=\\"0123456789abcdef\\">>>a \\" b<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\"0123456789abcdef\\">>>',
     '<<<EXTERNAL_UNTRUSTED_CONTENT id=\\"0000000000000000\\">>>a \\" b<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\"0000000000000000\\">>>'),
])
def test_marker_ids_are_canonicalised(text, normalised):
    assert normalize_untrusted_markers(text) == normalised


@pytest.mark.parametrize("text", [
    '<<<EXTERNAL_UNTRUSTED_CONTENT id="0123456789ABCDEF">>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id="0123456789ABCDEF">>>',
    '<<<EXTERNAL_UNTRUSTED_CONTENT id="0123456789abcdef">>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id="1123456789abcdef">>>',
    '<<<EXTERNAL_UNTRUSTED_CONTENT id=\\\\"0123456789abcdef\\\\">>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\\\"0123456789abcdef\\\\">>>',
    '<<<EXTERNAL_UNTRUSTED_CONTENT id=\\"0123456789abcdef\\">>>a " b<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\"0123456789abcdef\\">>>',
], ids=["upper-case", "different-ids", "two-backslashes", "body-quote-not-escaped-alike"])
def test_marker_left_as_is(text):
    assert normalize_untrusted_markers(text) == text


def test_markers_are_normalised_in_outcome_keys_too_but_not_in_args():
    marker = '<<<EXTERNAL_UNTRUSTED_CONTENT id="{}">>>k<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{}">>>'
    results = [{"content": [], "details": {marker.format(i, i): 1}} for i in ("0123456789abcdef", "fedcba9876543210")]
    verdicts = run(ON, [call(n, tool="web_fetch", args={"q": marker.format(i, i)}, result=r)
                        for n, (i, r) in enumerate(zip(("0123456789abcdef", "fedcba9876543210"), results))])
    assert verdicts[0]["outcome"]["result_hash"] == verdicts[1]["outcome"]["result_hash"]
    assert verdicts[0]["args_hash"] != verdicts[1]["args_hash"]


def test_no_normaliser_leaves_stable_stringify_unchanged():
    assert stable_stringify({"b": 1, "a": "x"}) == '{"a":"x","b":1}'


def test_cron_alias_and_conversations_sends_only_under_2026_9_6():
    events = [call(1, tool="cron", args={}), call(2, tool="conversations_turn", args={"to": "x"},
                                                  result={"content": [{"type": "text", "text": "t1"}],
                                                          "details": {"messageId": "1", "ok": True}}),
              call(3, tool="conversations_turn", args={"to": "x"},
                   result={"content": [{"type": "text", "text": "t2"}], "details": {"messageId": "2", "ok": True}})]
    new, old = run(ON, events), run(ON, events, profile=OPENCLAW_2026_7)
    assert (new[0]["tool_name"], old[0]["tool_name"]) == ("automations", "cron")
    assert new[1]["outcome"]["result_hash"] == new[2]["outcome"]["result_hash"]
    assert old[1]["outcome"]["result_hash"] != old[2]["outcome"]["result_hash"]


def _pending_args(calls: list[dict]) -> list[str]:
    store = SessionStore(Engine(OpenClawConfig(ON, profile=OPENCLAW_2026_9_6)))
    for event in calls:
        store.process(event)
    return [record.args_hash for record in store.states["s1"].history]


def test_a_pending_record_takes_the_args_of_the_next_call_without_id_before_it_is_recorded():
    # §3.1 step 5(a): the run's newest pending record of the tool (no result, no kind) and the same call id,
    # any call id when this call has none, takes this call's args hash
    a = call(1, args={"path": "/a"}, result=None, outcome_follows=True, tool_call_id=None)
    b = call(2, args={"path": "/b"}, result=None, outcome_follows=True, tool_call_id=None)
    assert _pending_args([a, b]) == [b_hash := _pending_args([b])[0], b_hash]
    # with their own ids the records keep their args
    a_id, b_id = {**a, "tool_call_id": "x1"}, {**b, "tool_call_id": "x2"}
    assert _pending_args([a_id, b_id]) == [_pending_args([a_id])[0], b_hash]
    # a reused id rebinds too; a record with an outcome never does
    assert _pending_args([a_id, {**b, "tool_call_id": "x1"}]) == [b_hash, b_hash]
    done = call(1, args={"path": "/a"}, tool_call_id=None)
    assert _pending_args([done, b])[0] == _pending_args([done])[0]


def test_agents_entries_when_present_is_the_only_roster():
    """docs/detection-rules.md §11.2.4, as 2026.9.6's agent roster reads it: ``agents.entries``, when the key is
    present, replaces ``agents.list``; only non-array objects are entries; the first key in JavaScript's order wins."""
    listed = {"id": "a1", "tools": {"loopDetection": {"enabled": False}}}
    glob = {"tools": {"loopDetection": {"enabled": True}}}

    def enabled(agents: dict, agent: str) -> object:
        return OpenClawConfig({**glob, "agents": agents}, profile=OPENCLAW_2026_9_6).for_agent(agent).enabled

    assert enabled({"list": [listed]}, "a1") is False                      # no entries: the list as before
    assert enabled({"list": [listed], "entries": {}}, "a1") is True        # entries present: the list is not read
    assert enabled({"list": [listed], "entries": None}, "a1") is True      # not an object: no agent at all
    assert enabled({"list": [listed], "entries": [listed]}, "a1") is True  # an array is no entries object
    off = {"tools": {"loopDetection": {"enabled": False}}}
    # an entry that is an array or not an object is skipped, and the next key with the same normalised id is found
    assert enabled({"entries": {"A1": [1], "a1": off}}, "a1") is False
    assert enabled({"entries": {"A1": "x", " a1": off}}, "a1") is False
    # array-index keys come first in JavaScript, whatever the file's order
    assert OpenClawConfig({**glob, "agents": {"entries": {" 1": glob, "1": off}}},
                          profile=OPENCLAW_2026_9_6).for_agent("1").enabled is False
