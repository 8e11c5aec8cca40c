"""The one-line formats of `loopwatch tail` (and `loopwatch demo`)."""


def test_tail_formats_each_stream():
    from streams.commands.tail import format_dead_letter, format_loop_event, format_verdict

    line = format_verdict({"type": "tool_call", "run_id": "run-a", "tool_name": "read", "verdict": "block",
                           "blocked": True, "warning": None,
                           "detection": {"stuck": True, "detector": "generic_repeat", "level": "critical",
                                         "count": 20}, "verdict_ts": 0})
    assert "run-a" in line and "BLOCK" in line and line.endswith("generic_repeat critical x20")
    line = format_verdict({"type": "tool_call", "run_id": "run-a", "tool_name": "read", "verdict": "allow",
                           "blocked": False, "warning": {"emitted": False},
                           "detection": {"stuck": True, "detector": "generic_repeat", "level": "warning",
                                         "count": 11}})
    assert "ALLOW" in line and line.endswith("generic_repeat warning x11 (suppressed)")
    line = format_verdict({"type": "tool_result", "run_id": "r", "tool_name": "exec", "verdict": "abort",
                           "guard": {"abort": True, "count": 3, "detector": "compaction_loop_persisted"}})
    assert "exec (result)" in line and "ABORT" in line and "compaction_loop_persisted critical x3" in line
    line = format_loop_event({"run_id": "r", "tool_name": "process", "action": "warn", "detector": "ping_pong",
                              "level": "warning", "count": 10, "message": "WARNING: ..."})
    assert "WARN" in line and "ping_pong warning x10: WARNING: ..." in line
    line = format_dead_letter({"reason_class": "decode", "reason": "invalid msgpack",
                               "source": {"topic": "t", "partition": 1, "offset": 7}, "key": b"r1"})
    assert line.startswith("DECODE") and "t:1@7" in line and "key='r1'" in line


def test_tail_shows_ended_runs_and_late_verdicts():
    from streams.commands.tail import format_verdict

    line = format_verdict({"type": "tool_call", "run_id": "r", "tool_name": "exec", "verdict": "abort",
                           "decision": "allow", "detection": {"stuck": False},
                           "run_ended": {"by": "compaction_loop_persisted", "reason": "CRITICAL: ..."}}, ts=0)
    assert "ABORT" in line and line.endswith("run ended (compaction_loop_persisted)")
    line = format_verdict({"type": "tool_result", "run_id": "r", "tool_name": "exec", "verdict": "allow",
                           "late": True, "guard": {"abort": False}}, ts=0)
    assert line.endswith("ALLOW  LATE: ran without a verdict")
    # a call's verdict produced 13.8 s after its runner stopped waiting (the record's Kafka time)
    call = {"type": "tool_call", "run_id": "r", "tool_name": "read", "verdict": "block", "blocked": True,
            "deadline": 1_000_000, "detection": {"stuck": True, "detector": "generic_repeat", "level": "critical",
                                                 "count": 20}}
    line = format_verdict(call, ts=1_013_800)
    assert " LATE " in line and " BLOCK " not in line, line  # the runner ran it: the line does not say blocked
    assert line.endswith("generic_repeat critical x20  block 13.8 s after the runner's deadline, "
                         "the runner ran the call")
    assert " BLOCK " in format_verdict(call, ts=999_000)  # in time: blocked
    assert format_verdict(call, ts=999_000).endswith("generic_repeat critical x20")
    allowed = {**call, "verdict": "allow", "blocked": False, "detection": {"stuck": False}}
    assert format_verdict(allowed, ts=1_013_800).endswith("ALLOW  LATE: 13.8 s after the runner's deadline")


def test_tail_shows_a_late_results_correction():
    from streams.commands.tail import format_loop_event, format_verdict
    from streams.detection.decision import correction

    result = {"type": "tool_result", "run_id": "r", "tool_name": "read", "tool_call_id": "c3", "verdict": "allow",
              "late": True, "guard": {"abort": False},
              "corrects": {"event_id": "e3", "tool_call_id": "c3", "verdict": "block", "by": "generic_repeat"}}
    assert format_verdict(result, ts=0).endswith("ALLOW  LATE: ran without a verdict (its block did not stop it)")
    line = format_loop_event({**correction(result), "run_id": "r", "tool_name": "read"}, ts=0)
    assert " RAN " in line and "block of call c3 did not happen (generic_repeat): the runner ran call c3" in line


def test_tail_shows_a_per_tool_exemption_as_the_rule_that_allowed_the_call():
    from streams.commands.tail import format_loop_event, format_verdict
    from streams.detection import Engine, OpenClawConfig, SessionState

    config = {"tools": {"loopDetection": {"enabled": True}},
              "policies": {"perTool": [{"tool": "exec", "detectors": {"genericRepeat": False}}]}}
    engine, state = Engine(OpenClawConfig(config)), SessionState()
    records = [engine.process({"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": f"c{i}",
                               "tool_name": "exec", "args": {"cmd": "ls"}, "result": "same"}, state) for i in range(11)]
    line = format_verdict({**records[10], "run_id": "r"})
    assert "ALLOW" in line and line.endswith("generic_repeat warning x10 (policy: perTool[0] tool=exec, exempted)")
    event = {**records[10]["decided_by"], "run_id": "r", "tool_name": "exec"}
    assert "ALLOW" in format_loop_event(event) and "exempted): perTool[0] tool=exec: allowed a call" in \
        format_loop_event(event)
