"""The gateway's HTTP API over an in-process engine: answers, refusals, token, body limit, health, metrics.

Broker-backed tests are in test_gateway_broker.py; these check the HTTP layer and the answer shape
with verdicts computed by the engine itself (tests/runners/gateway_support.EngineSource).
"""

from __future__ import annotations

import asyncio
import json

from streams.runners.gateway import GatewayConfig
from streams.runners.gateway.health import KafkaProbe
from tests.runners.gateway_support import JSON, EngineSource, call, result, served


def _run(coro):
    return asyncio.run(coro)


async def _loop(client, run: str, calls: int) -> list[dict]:
    answers = []
    for i in range(calls):
        response = await client.post("/v1/events", json=call(run, i))
        assert response.status == 200
        answers.append(await response.json())
        await client.post("/v1/events", json=result(run, i))
    return answers


def test_a_loop_is_allowed_then_warned_then_blocked_with_the_answer_shape():
    async def main():
        source = EngineSource()
        async with served(source) as client:
            answers = await _loop(client, "r1", 13)
        decisions = [a["decision"] for a in answers]
        assert decisions == ["allow"] * 10 + ["warn", "allow", "block"]
        warn, block = answers[10], answers[12]
        assert (warn["detector"], warn["count"]) == ("generic_repeat", 10)
        assert warn["message"].startswith("WARNING: You have called read 10 times")
        assert (block["detector"], block["count"]) == ("generic_repeat", 12)
        assert block["message"] == block["verdict"]["block_reason"]
        assert block["verdict"]["tool_call_id"] == "r1-12" and block["verdict"]["blocked"] is True
        assert answers[0] | {"verdict": None, "event_id": None, "latency_ms": None} == {
            "decision": "allow", "decided_by": None, "detector": None, "count": None, "message": None,
            "timed_out": False,
            "on_timeout": "allow", "verdict": None, "event_id": None, "latency_ms": None}
    _run(main())


def test_timeout_answers_the_on_timeout_policy_and_says_so():
    async def main():
        for policy in ("allow", "block"):
            source = EngineSource(on_timeout=policy, hang=True)
            async with served(source, GatewayConfig(timeout=0.2, on_timeout=policy)) as client:
                answer = await (await client.post("/v1/events", json=call("r", 0))).json()
                metrics = await (await client.get("/metrics")).text()
            assert answer["decision"] == policy and answer["timed_out"] is True and answer["verdict"] is None
            assert answer["on_timeout"] == policy
            assert "no verdict within" in answer["message"]
            assert 'loopwatch_gateway_timeouts_total{endpoint="/v1/events"} 1.0' in metrics
            assert 'loopwatch_gateway_requests_total{endpoint="/v1/events",outcome="timeout"} 1.0' in metrics
    _run(main())


def test_bad_bodies_get_400_with_the_reason_and_are_not_published():
    bodies = {
        b"": "empty body",
        b"{": "invalid JSON",
        b"[1, 2]": "must be a JSON object, got list",
        b'"text"': "must be a JSON object, got str",
        b"\xff\xfe{}": "not UTF-8",
        b'{"type": "tool_call", "run_id": "r", "x": NaN}': "NaN is not JSON",
        b'{"type": "nope", "session_id": "s"}': "type",
        b'{"type": "tool_call", "run_id": "r", "tool_call_id": "c", "tool_name": "t"}': "session",
        b'{"type": "tool_result", "run_id": "r", "session_id": "s", "tool_call_id": 7}': "tool_call_id",
        b'{"type": "tool_call", "run_id": 5, "session_id": "s", "tool_call_id": "c", "tool_name": "t"}': "run_id",
        (b'{"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": "c", "tool_name": "t", "args": '
         + b"[" * 995 + b"]" * 995 + b"}"): "nested too deeply",
    }

    async def main():
        source = EngineSource()
        async with served(source) as client:
            for body, reason in bodies.items():
                response = await client.post("/v1/events", data=body, headers={"Content-Type": "application/json"})
                answer = await response.json()
                assert response.status == 400, body
                assert reason in answer["error"], (body, answer)
            ok = await client.post("/v1/events", json=call("r", 0))
            assert ok.status == 200
        assert len(source.published) == 1
    _run(main())


def test_body_over_the_limit_gets_413_with_and_without_content_length():
    async def main():
        source = EngineSource()
        async with served(source, GatewayConfig(max_body_bytes=1000)) as client:
            big = call("r", 0, path="x" * 2000)
            response = await client.post("/v1/events", json=big)
            assert response.status == 413 and "over the gateway's limit of 1,000 bytes" in (await response.json())["error"]

            async def chunks():
                yield b'{"type": "tool_call", "args": "'
                yield b"y" * 5000
                yield b'"}'
            response = await client.post("/v1/events", data=chunks(), headers={"Content-Type": "application/json"})
            assert response.status == 413 and "limit" in (await response.json())["error"]
            assert (await client.post("/v1/events", json=call("r", 1))).status == 200
        assert [e["tool_call_id"] for e in source.published] == ["r-1"]
    _run(main())


def test_bearer_token_is_asked_of_v1_routes_only():
    async def main():
        async with served(EngineSource(), GatewayConfig(token="s3cret")) as client:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                response = await client.post("/v1/events", json=call("r", 0), headers=headers)
                assert response.status == 401 and "bearer token" in (await response.json())["error"]
                response = await client.post("/v1/hooks/codex", json={}, headers=headers)
                assert response.status == 401
            good = await client.post("/v1/events", json=call("r", 0), headers={"Authorization": "Bearer s3cret"})
            assert good.status == 200 and (await good.json())["decision"] == "allow"
            assert (await client.get("/healthz")).status == 200
            assert (await client.get("/metrics")).status == 200
    _run(main())


def test_readyz_is_503_with_the_reason_when_kafka_is_unreachable_and_healthz_stays_200():
    async def main():
        probe = KafkaProbe("127.0.0.1:9", connect_timeout=0.5)
        async with served(EngineSource(), GatewayConfig(bootstrap="127.0.0.1:9"), probe=probe) as client:
            response = await client.get("/readyz")
            body = await response.json()
            live = await client.get("/healthz")
            live_body = await live.json()
        assert response.status == 503 and body["status"] == "unavailable"
        assert body["reason"].startswith("Kafka unreachable at 127.0.0.1:9")
        # Liveness: the gateway answers; Kafka's state is a field (a gateway restart would not fix it).
        assert live.status == 200 and live_body["status"] == "ok"
        assert live_body["kafka_problem"].startswith("Kafka unreachable at 127.0.0.1:9")
        async with served(EngineSource()) as client:
            response = await client.get("/readyz")
            assert response.status == 200 and (await response.json())["status"] == "ready"
    _run(main())


def test_metrics_count_requests_by_endpoint_and_outcome_and_the_round_trip():
    async def main():
        async with served(EngineSource()) as client:
            await _loop(client, "m", 13)
            await client.post("/v1/events", data=b"nope", headers={"Content-Type": "application/json"})
            await client.post("/v1/hooks/claude-code", json={"hook_event_name": "Stop", "session_id": "s"})
            return await (await client.get("/metrics")).text()
    text = _run(main())
    assert 'loopwatch_gateway_requests_total{endpoint="/v1/events",outcome="allow"} 24.0' in text
    assert 'loopwatch_gateway_requests_total{endpoint="/v1/events",outcome="warn"} 1.0' in text
    assert 'loopwatch_gateway_requests_total{endpoint="/v1/events",outcome="block"} 1.0' in text
    assert 'loopwatch_gateway_requests_total{endpoint="/v1/events",outcome="bad_request"} 1.0' in text
    assert 'loopwatch_gateway_requests_total{endpoint="/v1/hooks/claude-code",outcome="none"} 1.0' in text
    assert 'loopwatch_gateway_roundtrip_seconds_count{endpoint="/v1/events"} 26.0' in text


def test_kafka_down_gets_the_on_timeout_policy_at_once_and_healthz_503():
    from streams.runners.client import LoopwatchClient

    async def main():
        answers = {}
        for policy in ("allow", "block"):
            client = LoopwatchClient("127.0.0.1:9", on_timeout=policy, timeout=20.0)
            await client.start()  # starts all the same; connects in the background
            try:
                config = GatewayConfig(on_timeout=policy, bootstrap="127.0.0.1:9", timeout=20.0)
                async with served(client, config) as http:
                    event = await (await http.post("/v1/events", json=call("down", 0))).json()
                    hook = await (await http.post("/v1/hooks/codex", json={
                        "hook_event_name": "PreToolUse", "session_id": "s", "turn_id": "t", "tool_name": "Bash",
                        "tool_input": {"command": "ls"}, "tool_use_id": "c"})).json()
                    health = await http.get("/readyz")
                    metrics = await (await http.get("/metrics")).text()
                answers[policy] = (event, hook, health.status, metrics)
            finally:
                await client.stop()
        return answers

    answers = asyncio.run(asyncio.wait_for(main(), 120))
    for policy, (event, hook, health, metrics) in answers.items():
        assert event["decision"] == policy and event["timed_out"] is False and event["verdict"] is None
        assert "not connected to Kafka at 127.0.0.1:9" in event["error"] and event["latency_ms"] < 10_000  # at once, not after the 20 s timeout
        assert f"on_timeout='{policy}'" in event["message"]
        assert health == 503
        assert 'loopwatch_gateway_requests_total{endpoint="/v1/events",outcome="send_error"} 1.0' in metrics
    # fail-open: the call runs, and the user is told why (nothing for the model)
    shown = answers["allow"][1]["systemMessage"]
    assert list(answers["allow"][1]) == ["systemMessage"] and "not connected to Kafka at 127.0.0.1:9" in shown
    assert shown.endswith("failing open (on_timeout='allow'): going on without a loop check")
    assert answers["block"][1]["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_event_answer_names_the_rule_that_decided_and_fails_closed_as_the_client_does():
    from streams.runners.gateway.answers import event_answer
    from streams.runners.verdict import Verdict

    escalated = Verdict("e1", "abort", {"decision": "block", "detection": {"stuck": True, "detector": "generic_repeat",
                                                                          "count": 20},
                                        "policy": {"name": "escalation", "detector": "escalation", "verdict": "abort",
                                                   "count": 3, "message": "CRITICAL: escalated"}})
    answer = event_answer(escalated, "allow")
    assert (answer["decision"], answer["detector"], answer["count"], answer["message"]) == \
        ("abort", "escalation", 3, "CRITICAL: escalated")
    guard = Verdict("e2", "abort", {"guard": {"abort": True, "detector": "compaction_loop_persisted", "count": 3,
                                              "message": "CRITICAL: guard"}})
    assert (event_answer(guard, "allow")["detector"], event_answer(guard, "allow")["count"]) == \
        ("compaction_loop_persisted", 3)
    # no verdict in time for a result, fail-closed: the client's stand-in (abort: stop the run), not "block"
    late = Verdict("e3", "abort", None, timed_out=True, latency_s=2.0)
    answer = event_answer(late, "block")
    assert (answer["decision"], answer["timed_out"], answer["verdict"], answer["detector"]) == \
        ("abort", True, None, None)
    assert answer["message"].endswith("failing closed (on_timeout='block'): the run is stopped")


def test_fail_open_costs_one_timeout_per_hook_call_and_the_result_says_the_call_ran():
    """A PreToolUse that times out (no worker) answers allow; its PostToolUse is sent marked and answered
    without a second wait; the events carry the deadline and ran_without_verdict."""
    from streams.wire.codecs import decode_event

    from .test_client import _sending_client

    client, producer = _sending_client(clock=lambda: 5_000.0)
    pre = {"hook_event_name": "PreToolUse", "session_id": "S", "transcript_path": "/nonexistent", "cwd": "/",
           "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "tu1"}
    post = {**pre, "hook_event_name": "PostToolUse", "tool_response": {"stdout": "a"}}

    async def main():
        async with served(client, GatewayConfig(timeout=0.05, on_timeout="allow")) as http:
            first = await (await http.post("/v1/hooks/claude-code", json=pre)).json()
            second = await (await http.post("/v1/hooks/claude-code", json=post)).json()
            metrics = await (await http.get("/metrics")).text()
        return first, second, metrics

    first, second, metrics = _run(main())
    # allow: the tool runs, the user is told it ran unchecked; nothing to say after it
    assert list(first) == ["systemMessage"] and "failing open" in first["systemMessage"] and second == {}
    sent = [decode_event(value) for _, value in producer.records]
    assert [e["type"] for e in sent] == ["tool_call", "tool_result"]
    assert sent[0]["deadline"] == 5_000_050 and "ran_without_verdict" not in sent[0]
    assert sent[1]["ran_without_verdict"] is True and sent[1]["tool_call_id"] == "tu1"
    assert 'loopwatch_gateway_requests_total{endpoint="/v1/hooks/claude-code",outcome="timeout"} 1.0' in metrics
    assert 'loopwatch_gateway_requests_total{endpoint="/v1/hooks/claude-code",outcome="not_waited"} 1.0' in metrics
    assert 'loopwatch_gateway_timeouts_total{endpoint="/v1/hooks/claude-code"} 1.0' in metrics


def test_a_command_hooks_timeout_shortens_the_gateways_wait_so_the_gateway_gives_up_first():
    from streams.runners.hooks.command import TIMEOUT_HEADER
    from streams.wire.codecs import decode_event

    from .test_client import _sending_client

    client, producer = _sending_client(clock=lambda: 5_000.0)
    pre = {"hook_event_name": "PreToolUse", "session_id": "S", "transcript_path": "/nonexistent", "cwd": "/",
           "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "tu1"}

    async def main():
        async with served(client, GatewayConfig(timeout=20.0, on_timeout="allow")) as http:
            await http.post("/v1/hooks/claude-code", json=pre, headers={TIMEOUT_HEADER: "0.4"})
        async with served(client, GatewayConfig(timeout=0.05, on_timeout="allow")) as http:
            for header in ("nan", "x", "0", "60"):  # not a timeout, or a longer one: the gateway's own
                await http.post("/v1/hooks/claude-code", json={**pre, "tool_use_id": header},
                                headers={TIMEOUT_HEADER: header})

    _run(main())
    deadlines = [decode_event(sent)["deadline"] for _, sent in producer.records]
    # 0.4 s less the 0.25 s left for the hook's round trip; then the gateway's 0.05 s
    assert deadlines == [5_000_150] + [5_000_050] * 4


def test_an_openclaw_2026_9_6_runner_beside_a_2026_7_config_gets_that_releases_answers():
    """The event's profile field (the OpenClaw plugin sets it from its host) picks the behaviour: LOOPY's
    thresholds (12) are ignored, the first critical is a recovery block with its text, the second ends the run."""
    async def main():
        source = EngineSource()
        answers = []
        async with served(source) as client:
            for i in range(22):
                response = await client.post("/v1/events", json=call("r9", i, profile="openclaw-2026.9.6"))
                answers.append(await response.json())
                await client.post("/v1/events", json={**result("r9", i), "profile": "openclaw-2026.9.6"})
        assert [a["decision"] for a in answers[9:]] == ["allow", "warn"] + ["allow"] * 9 + ["block", "abort"]
        warn, recovery, terminal = answers[10], answers[20], answers[21]
        assert warn["message"] == warn["verdict"]["warning"]["note"]
        assert warn["message"].startswith("[System note: Tool-loop warning after 10 repeated calls.")
        assert recovery["message"] == recovery["verdict"]["block_text"]
        assert recovery["message"].endswith("continue with a different tool or different arguments.")
        assert (terminal["detector"], terminal["count"]) == ("generic_repeat", 21)
        assert terminal["message"].endswith("This run is stopping now.")
        assert terminal["verdict"]["run_terminated"] is True
    _run(main())


def test_the_gateway_runs_on_the_event_loop_asked_for():
    import pytest
    import uvloop

    from streams.runners.gateway import run

    async def loop_type():
        return type(asyncio.get_running_loop())

    assert run(loop_type(), "uvloop") is uvloop.Loop
    assert run(loop_type(), "auto") is uvloop.Loop  # installed with loopwatch on CPython
    assert not issubclass(run(loop_type(), "asyncio"), uvloop.Loop)
    with pytest.raises(ValueError, match="loop must be one of"):
        run(loop_type(), "trio")


def test_bodies_the_gateway_does_not_probe_are_far_too_shallow_for_the_engine_to_refuse():
    """Bodies with fewer than SHALLOW_BRACKETS brackets skip the engine's probe: the engine must hash
    anything that shallow, with room for the stack of a request handler (hundreds of frames)."""
    from streams.detection import Engine, EventError, SessionState
    from streams.runners.gateway.app import SHALLOW_BRACKETS

    def refused(depth: int) -> bool:
        nested: list = []
        inner = nested
        for _ in range(depth):
            inner.append([])
            inner = inner[0]
        event = {**call("r", 0), "args": {"a": nested}}
        try:
            Engine().process(event, SessionState())
        except EventError:
            return True
        return False

    assert not refused(4 * SHALLOW_BRACKETS)
    assert refused(1200)  # the engine's limit exists: the probe still runs on bodies with this many brackets

    async def main():
        async with served(EngineSource()) as client:
            deep = {"session_id": "s", "transcript_path": "/nonexistent", "hook_event_name": "PreToolUse",
                    "tool_name": "Read", "tool_use_id": "t1", "tool_input": {"a": [[[[[[]]]]]]}}
            body = json.dumps(deep).replace("[[[[[[]]]]]]", "[" * 1200 + "]" * 1200).encode()
            refused_hook = await client.post("/v1/hooks/claude-code", data=body, headers=JSON)
            shallow = await client.post("/v1/hooks/claude-code", data=json.dumps(deep).encode(), headers=JSON)
            return refused_hook.status, (await refused_hook.json())["error"], shallow.status

    status, error, shallow = _run(main())
    assert status == 400 and "nested too deeply" in error and shallow == 200
