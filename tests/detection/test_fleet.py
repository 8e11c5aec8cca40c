"""Fleet loops (streams.detection.fleet) and the fleet breaker (streams.detection.fleet_breaker), offline."""

from __future__ import annotations

import pytest

from tests.shared_vectors import shared_path, skip_without
from streams.detection import ConfigError, Engine, OpenClawConfig, validate
from streams.detection.fleet import FleetCorrelator, FleetSettings, fleet_settings, observation, validate_fleet
from streams.offline.replay import Replayer

T0 = 1_764_460_800_000  # 2025-11-30T00:00:00Z, a window boundary for every step that divides a day


def failing_call(run: int, ts: int, agent: str = "a", tool: str = "web_fetch", url: str = "https://api/x",
                 error: object = "HTTP 503 Service Unavailable", event_id: str | None = None) -> dict:
    return {"type": "tool_call", "run_id": f"run-{run}", "session_id": f"s-{run}", "agent_id": agent,
            "tool_call_id": f"c-{run}-{ts}", "tool_name": tool, "args": {"url": url}, "result": None,
            "error": error, "ts": ts, "event_id": event_id or f"e-{run}-{ts}"}


def replayer(**fleet) -> Replayer:
    return Replayer(Engine(OpenClawConfig({"options": {"fleet": fleet}} if fleet else {})), key_by="run")


def test_min_runs_distinct_runs_in_a_window_make_one_record_with_those_runs():
    r = replayer(minRuns=3)
    r.apply(failing_call(1, T0))
    r.apply(failing_call(1, T0 + 1000))  # the same run again: still one run
    r.apply(failing_call(2, T0 + 2000, agent="b"))
    assert r.fleet_loops == []
    r.apply(failing_call(3, T0 + 3000, agent="c"))
    for i in range(4, 9):  # more runs in the same window: no second record
        r.apply(failing_call(i, T0 + 4000 + i))
    [loop] = r.fleet_loops
    assert loop["type"] == "fleet_loop" and loop["kind"] == "error" and loop["tool"] == "web_fetch"
    assert [e["run"] for e in loop["examples"]] == ["run-1", "run-2", "run-3"]
    assert loop["agents"] == ["a", "b", "c"] and loop["runs"] == 3 and loop["events"] == 4
    assert (loop["first_seen"], loop["last_seen"]) == (T0, T0 + 3000)
    assert loop["evidence"] == [f"e-1-{T0}", f"e-2-{T0 + 2000}", f"e-3-{T0 + 3000}"]
    # the earliest window holding all three: it starts one step after T0 - size
    assert loop["window"] == {"start": T0 - 540_000, "end": T0 + 60_000, "size_s": 600, "step_s": 60}


def test_runs_further_apart_than_a_window_make_no_fleet_loop():
    r = replayer(minRuns=3, windowSeconds=60, stepSeconds=10)
    for i in range(6):
        r.apply(failing_call(i, T0 + i * 61_000))
    assert r.fleet_loops == []


def test_a_sustained_loop_reports_once_per_window_length_not_per_step():
    r = replayer(minRuns=2, windowSeconds=600, stepSeconds=60)
    for minute in range(60):  # a new run fails every minute for an hour
        r.apply(failing_call(minute, T0 + minute * 60_000))
    starts = [loop["window"]["start"] for loop in r.fleet_loops]
    # the first window holding minutes 0 and 1 starts 8 min before T0; then one every 10 min, never one per step
    assert starts == [T0 - 480_000 + n * 600_000 for n in range(7)]


def test_what_counts_as_a_signature():
    s = FleetSettings()
    base = {"type": "tool_call", "run_id": "r", "session_id": "s", "event_ts": T0, "tool_name": "exec",
            "args_hash": "exec:1", "verdict": "allow", "detection": {"stuck": False}}
    ok = {**base, "outcome": {"recorded": True, "result_hash": "abc", "unknown_tool_name": None}}
    assert observation(ok, s) is None  # a plain result is not a failure
    assert observation(ok, FleetSettings(count="all"))["kind"] == "result"
    thrown = {**base, "outcome": {"recorded": True, "result_hash": "error:1", "unknown_tool_name": None}}
    other_args = {**thrown, "args_hash": "exec:2"}
    assert observation(thrown, s)["sig"] != observation(other_args, s)["sig"]
    by_tool = FleetSettings(signature="tool")
    assert observation(thrown, by_tool)["sig"] == observation(other_args, by_tool)["sig"]
    assert observation(thrown, by_tool)["match"] == ["exec", None]
    unknown = {**base, "tool_name": "tavily", "args_hash": "tavily:9",
               "outcome": {"recorded": True, "result_hash": "error:7", "unknown_tool_name": "tavily"}}
    assert observation(unknown, s)["kind"] == "unknown_tool" and observation(unknown, s)["match"] == ["tavily", None]
    stuck = {**base, "verdict": "block", "detection": {"stuck": True, "detector": "generic_repeat",
                                                        "level": "critical"},
             "outcome": {"recorded": False}}
    assert observation(stuck, s)["kind"] == "detector"
    # a warning (emitted or suppressed) was an allow: never an observation, so never a fleet-wide block
    warned = {**base, "verdict": "warn", "detection": {"stuck": True, "detector": "ping_pong", "level": "warning"},
              "outcome": {"recorded": True, "result_hash": "r:1", "unknown_tool_name": None}}
    assert observation(warned, s) is None
    assert observation({**thrown, "event_ts": None}, s) is None  # no event time, no window
    assert observation({**thrown, "fleet": {"blocked": True}}, s) is None  # the breaker's own blocks
    assert observation({**thrown, "rule": "fleet_loop"}, s) is None  # ... as workers wrote them before decided_by
    assert observation(thrown, FleetSettings(enabled=False)) is None


def test_windows_expire_and_memory_stays_bounded():
    settings = FleetSettings(min_runs=3, window_s=60, step_s=10, expires_s=120)
    correlator = FleetCorrelator(settings)
    sizes = []
    for i in range(3000):  # 3,000 s of a new failing signature every second
        obs = observation({"type": "tool_call", "run_id": f"r{i}", "session_id": "s", "event_ts": T0 + i * 1000,
                           "tool_name": "t", "args_hash": f"t:{i % 50}", "verdict": "allow",
                           "outcome": {"recorded": True, "result_hash": "error:x"}}, settings)
        correlator.observe(obs)
        correlator.expire()
        sizes.append(len(correlator.store))
    # 50 signatures x at most (expires + size) / step windows each
    assert max(sizes[1000:]) <= 50 * 19
    assert max(sizes[1000:]) == max(sizes[2000:])


def test_breaker_off_gives_the_engines_verdicts_exactly():
    from bench.workload import generate

    events = generate(runs=300, loop_share=0.03, fleet_share=0.1, seed=3)
    plain, fleet = replayer(), replayer(minRuns=3)
    assert fleet.breaker is None
    for event in events:
        assert fleet.apply(event) == plain.apply(event)
    assert fleet.fleet_loops  # the fleet was seen, and nothing changed


def test_shadow_flags_without_changing_the_decision_and_block_blocks():
    shadow, block, plain = replayer(minRuns=3, breaker="shadow"), replayer(minRuns=3, breaker="block"), replayer()
    for i in range(3):
        for r in (shadow, block, plain):
            r.apply(failing_call(i, T0 + i))
    nxt = failing_call(9, T0 + 10_000, agent="z")
    expected = plain.apply(nxt)
    flagged = shadow.apply(nxt)
    assert flagged["fleet"]["would_block"] is True and "Fleet-wide loop" in flagged["fleet"]["reason"]
    shadow_finding = flagged["decided_by"]
    assert (shadow_finding["kind"], shadow_finding["action"], shadow_finding["enforced"]) == (
        "fleet", "would_block", False)
    assert shadow_finding["rule"] == flagged["fleet"]["signature"] and shadow_finding["count"] == 3
    assert flagged["verdict"] == expected["verdict"] == "allow"
    assert {k: v for k, v in flagged.items() if k not in ("decided_by", "fleet")} == \
        {k: v for k, v in expected.items() if k != "decided_by"}
    blocked = block.apply(nxt)
    assert blocked["verdict"] == "block" and blocked["decided_by"]["kind"] == "fleet"
    assert blocked["decided_by"]["enforced"] is True and blocked["decided_by"]["action"] == "block"
    assert blocked["detection"]["detector"] == "fleet_loop" and blocked["detection"]["level"] == "critical"
    assert "Fleet-wide loop" in blocked["block_reason"] and "3 runs" in blocked["block_reason"]
    assert blocked["evidence"] == [f"e-{i}-{T0 + i}" for i in range(3)]
    other = block.apply(failing_call(10, T0 + 11_000, url="https://api/other"))
    assert other["verdict"] == "allow" and other["decided_by"] is None  # another call is not matched
    assert shadow.summary.fleet_blocks == {"would_block": 1}


def test_breaker_releases_after_hold():
    r = replayer(minRuns=2, breaker="block", holdSeconds=30)
    r.apply(failing_call(1, T0))
    r.apply(failing_call(2, T0 + 1000))
    assert r.apply(failing_call(3, T0 + 20_000))["verdict"] == "block"
    # blocked calls are no observations: 30 s after the last one the call runs again
    assert r.apply(failing_call(4, T0 + 31_001))["verdict"] == "allow"


def test_breaker_forgets_loops_held_long_enough():
    from streams.detection.fleet_breaker import FleetBreaker

    breaker = FleetBreaker(FleetSettings(breaker="block", hold_s=10))
    for n in range(50):  # one loop a minute, each on its own tool, never called again
        breaker.add({"match": [f"tool-{n}", None], "last_seen": T0 + n * 60_000, "signature": f"s{n}"})
    assert len(breaker) == 1  # the older ones were held 10 s and are gone


def test_config_options_fleet_is_validated_and_never_read_from_loop_detection():
    good = {"options": {"fleet": {"minRuns": 4, "windowSeconds": 300, "stepSeconds": 30, "breaker": "shadow"}}}
    validate(good)
    settings = fleet_settings(good)
    assert (settings.min_runs, settings.window_s, settings.step_s, settings.breaker) == (4, 300, 30, "shadow")
    with pytest.raises(ConfigError) as bad:
        validate({"options": {"fleet": {"minRuns": 1, "breaker": "yes", "windowSeconds": 10, "stepSeconds": 20,
                                        "nope": 1}}})
    text = str(bad.value)
    for part in ("options.fleet.minRuns", "options.fleet.breaker", "options.fleet.stepSeconds", "'nope'"):
        assert part in text
    with pytest.raises(ConfigError):  # not an OpenClaw key
        validate({"tools": {"loopDetection": {"fleet": {"breaker": "block"}}}})
    assert fleet_settings({"tools": {"loopDetection": {"fleet": {"breaker": "block"}}}}).breaker == "off"


@skip_without("vectors.jsonl")
def test_conformance_vectors_with_the_fleet_view_on_and_the_breaker_off_keep_every_verdict():
    from streams.offline.conformance import load_scenarios, run_scenario

    vectors = shared_path("vectors.jsonl")  # not part of the project: skipped where absent
    fleet = {"minRuns": 2, "windowSeconds": 60, "stepSeconds": 10, "count": "all", "breaker": "off"}
    assert validate_fleet(fleet) == []
    loops = 0
    for scenario in load_scenarios(vectors):
        config = dict(scenario.get("config") or {})
        with_fleet = {**config, "options": {**(config.get("options") or {}), "fleet": fleet}}
        assert run_scenario({**scenario, "config": with_fleet}) is None, scenario["name"]
        plain, watched = (Replayer(Engine(OpenClawConfig(c))) for c in (config, with_fleet))
        for index, event in enumerate(scenario["events"]):
            event = {**event, "ts": T0 + 1000 * index}  # event time, so that the windows are counted
            assert watched.apply(event, index) == plain.apply(event, index), (scenario["name"], index)
        loops += len(watched.fleet_loops)
    assert loops > 0  # fleet loops were found along the way, and changed nothing


def _ping_pong_run(run: int, t0: int, calls: int = 12) -> list[dict]:
    """A run alternating two reads with unchanging results: ping_pong warns (an allow), never blocks at 12 calls."""
    out = []
    for i in range(calls):
        path = "/a" if i % 2 == 0 else "/b"
        out.append({"type": "tool_call", "run_id": f"pp-{run}", "session_id": f"s-pp-{run}",
                    "tool_call_id": f"pp-{run}-{i}", "tool_name": "read", "args": {"path": path},
                    "result": f"content of {path}", "ts": t0 + 1000 * run + 10 * i, "event_id": f"pp-{run}-{i}"})
    return out


def test_a_warning_seen_in_many_runs_never_blocks_fleet_wide():
    config = {"tools": {"loopDetection": {"enabled": True}},
              "options": {"fleet": {"minRuns": 3, "breaker": "block"}}}
    r = Replayer(Engine(OpenClawConfig(config)), key_by="run")
    records = [r.apply(event) for run in range(6) for event in _ping_pong_run(run, T0)]
    warned = [rec for rec in records if (rec["decided_by"] or {}).get("detector") == "ping_pong"]
    assert warned and {rec["decided_by"]["level"] for rec in warned} == {"warning"}  # the runs did warn ...
    assert r.fleet_loops == []  # ... yet no fleet loop, and no call of a later run is blocked
    later = [r.apply(event) for event in _ping_pong_run(9, T0 + 60_000, calls=2)]
    assert [rec["verdict"] for rec in later] == ["allow", "allow"]


def test_no_fleet_block_of_a_call_whose_own_run_shows_progress():
    r = replayer(minRuns=3, breaker="block")
    for i in range(3):
        r.apply(failing_call(i, T0 + i))
    assert len(r.fleet_loops) == 1
    # run 7 made the same call before, and it worked there: its run shows progress, the call goes to the engine
    worked = {**failing_call(7, T0 + 100), "error": None, "result": {"quote": 1}}
    assert r.apply(worked)["verdict"] == "block"  # (no outcome of it in run 7 yet: blocked like any other run)
    r2 = replayer(minRuns=3, breaker="block")
    r2.apply(worked)  # run 7 first: the call works
    for i in range(3):
        r2.apply(failing_call(i, T0 + i))
    again = r2.apply(failing_call(7, T0 + 200))
    assert again["verdict"] == "allow" and "fleet" not in again and again["decided_by"] is None
    other = r2.apply(failing_call(8, T0 + 300))  # a run without an outcome of it: blocked, with the reason
    assert other["verdict"] == "block" and other["decided_by"]["kind"] == "fleet"
    assert other["fleet"]["reason"].startswith("Fleet-wide loop: web_fetch threw the same error in 3 runs")
    assert other["decided_by"]["message"] == other["block_reason"]
    # a run whose latest outcome of the call is the failure again shows no progress: blocked
    r2.apply({**failing_call(7, T0 + 400)})
    assert r2.apply(failing_call(7, T0 + 500))["verdict"] == "block"


def test_run_progress_by_loop_kind():
    from streams.detection.fleet_breaker import run_progress
    from streams.detection.state import CallRecord

    event = {"type": "tool_call", "run_id": " r1 ", "tool_name": "exec"}
    error = {"kind": "error", "match": ["exec", "exec:aaaa" + "0" * 32], "result_hash": "error:e" + "0" * 32}
    ok = CallRecord("exec", "exec:aaaa" + "0" * 32, "c1", "r1", "r:ok" + "0" * 32)
    failed = CallRecord("exec", "exec:aaaa" + "0" * 32, "c2", "r1", "error:e" + "0" * 32)
    other_run = CallRecord("exec", "exec:aaaa" + "0" * 32, "c3", "r2", "r:ok" + "0" * 32)
    other_args = CallRecord("exec", "exec:bbbb" + "0" * 32, "c4", "r1", "r:ok" + "0" * 32)
    assert run_progress([ok], event, error) is True
    assert run_progress([ok, failed], event, error) is False  # the latest outcome is the failure
    assert run_progress([other_run, other_args], event, error) is False  # other runs' and other calls' outcomes
    assert run_progress([other_args], event, {**error, "match": ["exec", None]}) is True  # a tool-wide loop
    detector = {"kind": "detector", "match": ["exec", "exec:aaaa" + "0" * 32]}
    assert run_progress([ok, ok], event, detector) is False  # the same result again: no progress
    assert run_progress([failed, ok], event, detector) is True  # the results change
    assert run_progress([], event, detector) is False


def test_clear_forgets_a_signature_until_it_is_published_again():
    from streams.detection.fleet import FleetSettings
    from streams.detection.fleet_breaker import FleetBreaker

    r = replayer(minRuns=3)
    for i in range(3):
        r.apply(failing_call(i, T0 + i))
    [loop] = r.fleet_loops
    breaker = FleetBreaker(FleetSettings(breaker="block", min_runs=3))
    breaker.add(loop)
    assert [held["signature"] for _, held in breaker.active()] == [loop["signature"]]
    assert breaker.match(failing_call(5, T0 + 10)) is not None
    assert breaker.clear("no-such-signature") == 0 and len(breaker) == 1
    assert breaker.clear(loop["signature"]) == 1 and breaker.active() == []
    assert breaker.match(failing_call(5, T0 + 20)) is None
    breaker.add(loop)  # published again (a later window): active again
    assert breaker.match(failing_call(5, T0 + 30)) is not None
    assert breaker.clear("*") == 1 and len(breaker) == 0


def test_a_call_of_an_ended_run_the_breaker_blocks_is_refused_as_the_engine_refuses_it():
    for key_by in ("run", "session"):
        r = Replayer(Engine(OpenClawConfig({"options": {"fleet": {"minRuns": 2, "breaker": "block"}}})), key_by=key_by)
        ended = {"run_id": "run-9", "session_id": "s-9"}
        r.apply({"type": "compaction_retry", **ended, "event_id": "k9", "ts": T0})
        for i in range(3):  # the guard's abort: the same outcome three times after the compaction
            r.apply({"type": "tool_call", **ended, "tool_call_id": f"g{i}", "tool_name": "read", "args": {"p": 1},
                     "result": "same", "error": None, "event_id": f"g{i}", "ts": T0 + i})
        r.apply(failing_call(1, T0 + 10))
        r.apply(failing_call(2, T0 + 20))
        assert r.apply(failing_call(3, T0 + 30))["verdict"] == "block"  # a run that goes on: the breaker's block
        refused = r.apply({**failing_call(9, T0 + 40), "session_id": "s-9"})
        assert refused["verdict"] == "abort" and refused["run_ended"]["by"] == "compaction_loop_persisted", key_by
        assert refused["detection"]["detector"] == "fleet_loop" and refused["decided_by"]["kind"] == "run_end"
