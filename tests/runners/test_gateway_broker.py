"""The gateway against the real broker and a running worker: each runner's payloads -> its documented answers.

Hook payload shapes and answers: see tests/runners/test_hooks.py's docstring for the documentation
they are taken from (Claude Code hooks reference https://code.claude.com/docs/en/hooks; Codex hooks
https://developers.openai.com/codex/hooks). The Codex command hook runs as the real
``loopwatch hook codex`` process, so its exit status is checked as Codex sees it.
"""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from streams.runners.gateway import GatewayConfig
from streams.runners.client import LoopwatchClient
from tests.runners.gateway_support import JSON, call, gateway_on_worker, result, served
from tests.runners.recorded_hooks import decision_of
from tests.runners.test_hooks import CC_COMMON, cc_post, cc_pre, cx_post, cx_pre
from tests.worker_harness import create_topics, topic_tag, whole_topic

pytestmark = [pytest.mark.kafka]


async def _hook_command(url: str, runner: str, payload: dict, *extra: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from streams.cli import main; main()", "hook", runner, "--url", url, *extra,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate(json.dumps(payload).encode())
    return process.returncode, out.decode(), err.decode()


@pytest.mark.timeout(180)
def test_events_claude_code_and_codex_get_allow_warn_block_and_abort_from_the_worker(kafka_bootstrap, tmp_path):
    async def main():
        async with gateway_on_worker(kafka_bootstrap, tmp_path) as (http, _):
            url = str(http.make_url("")).rstrip("/")
            # /v1/events: 13 identical calls -> allow x10, warn, allow (suppressed), block
            events = []
            for i in range(13):
                events.append(await (await http.post("/v1/events", json=call("ev", i))).json())
                await http.post("/v1/events", json=result("ev", i))
            compaction = {"type": "compaction_retry", "run_id": "ev2", "session_id": "s-ev2"}
            await http.post("/v1/events", json=compaction)
            aborts = []
            for i in range(2):
                await http.post("/v1/events", json=call("ev2", i, path="/after"))
                aborts.append(await (await http.post("/v1/events", json=result("ev2", i))).json())

            claude = []
            for i in range(13):
                claude.append(await (await http.post("/v1/hooks/claude-code", json=cc_pre(i))).json())
                await http.post("/v1/hooks/claude-code", json=cc_post(i))
            # the command hook form: the 14th identical call is blocked too
            claude_command = await _hook_command(url, "claude-code", cc_pre(13))
            await http.post("/v1/hooks/claude-code", json={**CC_COMMON, "hook_event_name": "SessionStart",
                                                           "source": "compact"})
            stop = []
            for i in (20, 21):
                await http.post("/v1/hooks/claude-code", json=cc_pre(i, command="ls"))
                stop.append(await (await http.post("/v1/hooks/claude-code", json=cc_post(i, stdout="same"))).json())

            codex = []
            for i in range(13):
                if i in (0, 10, 12):  # allow, warn, block through the real command hook
                    codex.append(await _hook_command(url, "codex", cx_pre(i)))
                else:
                    await http.post("/v1/hooks/codex", json=cx_pre(i))
                await http.post("/v1/hooks/codex", json=cx_post(i))
            compact = {**{k: v for k, v in cx_pre(0).items() if k.startswith(("session", "turn"))},
                       "hook_event_name": "PostCompact", "trigger": "auto"}
            await http.post("/v1/hooks/codex", json=compact)
            codex_stop = []
            for i in (20, 21):
                await http.post("/v1/hooks/codex", json={**cx_pre(i), "tool_input": {"command": "ls"}})
                codex_stop.append(await _hook_command(url, "codex", {**cx_post(i), "tool_input": {"command": "ls"}}))
            return events, aborts, claude, claude_command, stop, codex, codex_stop

    events, aborts, claude, claude_command, stop, codex, codex_stop = asyncio.run(main())
    assert [a["decision"] for a in events] == ["allow"] * 10 + ["warn", "allow", "block"]
    assert events[10]["detector"] == "generic_repeat" and events[10]["count"] == 10
    assert events[12]["verdict"]["block_reason"] == events[12]["message"] and not events[12]["timed_out"]
    assert [a["decision"] for a in aborts] == ["allow", "abort"]
    assert aborts[1]["detector"] == "compaction_loop_persisted" and "Aborting" in aborts[1]["message"]

    assert [decision_of(o) for o in claude] == ["allow"] * 10 + ["warn", "allow", "block"]
    assert claude[0] == {} and claude[12]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert claude[12]["hookSpecificOutput"]["permissionDecisionReason"].startswith("CRITICAL: Called exec")
    status, out, err = claude_command  # Claude Code reads a deny as JSON on stdout with exit 0
    assert status == 0 and err == "" and json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert stop[0] == {} and stop[1]["continue"] is False and "Aborting" in stop[1]["stopReason"]

    (allow_status, allow_out, _), (warn_status, warn_out, _), (block_status, block_out, block_err) = codex
    assert (allow_status, allow_out) == (0, "")
    assert warn_status == 0 and json.loads(warn_out)["systemMessage"].startswith("WARNING: You have called shell 10")
    assert block_status == 2 and block_out == "" and block_err.startswith("CRITICAL: Called shell with identical")
    assert codex_stop[0] == (0, "", "")
    status, out, _ = codex_stop[1]  # no Codex hook answer ends a turn: the model is told, the next call denied
    specific = json.loads(out)["hookSpecificOutput"]
    assert status == 0 and "continue" not in json.loads(out)
    assert specific["hookEventName"] == "PostToolUse" and "Aborting" in specific["additionalContext"]


@pytest.mark.timeout(120)
def test_fuzzed_bodies_get_4xx_keep_the_gateway_serving_and_never_reach_kafka(kafka_bootstrap, tmp_path):
    valid = json.dumps(call("fz", 0)).encode()
    bodies = [b"", b"{", b"}", b"null", b"[]", b"[{}]", b"0", b'"x"', b"\xff" * 20, b"\x00" * 5, b"{" * 5000,
              b"[" * 100_000, b'{"type": "tool_call"}', b'{"type": 1}', b'{"type": "tool_call", "session_id": []}',
              b'{"type": "tool_result", "run_id": "r", "session_id": "s", "tool_call_id": 3}', b'{"a": NaN}', b'{"a": Infinity}',
              json.dumps({**call("fz", 1), "tool_call_id": 5}).encode(),
              json.dumps({**call("fz", 2), "session_key": {"x": 1}}).encode(),
              b"x" * 2_000_000]
    bodies += [valid[:n] for n in range(0, len(valid), 7)]  # every truncation
    hook_bodies = [b"{}", b'{"hook_event_name": 3}', b'{"hook_event_name": "PreToolUse", "session_id": ""}',
                   b'{"hook_event_name": "PostToolUse", "session_id": "s"}', b"[", b"\xc3\x28"]

    async def main():
        async with gateway_on_worker(kafka_bootstrap, tmp_path) as (http, settings):
            answers = []
            for body in bodies:
                response = await http.post("/v1/events", data=body, headers=JSON)
                answers.append((response.status, (await response.json())["error"]))
            for body in hook_bodies:
                for runner in ("claude-code", "codex"):
                    response = await http.post(f"/v1/hooks/{runner}", data=body, headers=JSON)
                    answers.append((response.status, (await response.json())["error"]))
            still = await (await http.post("/v1/events", data=valid, headers=JSON)).json()
            health = (await http.get("/healthz")).status
            sent = len(await whole_topic(kafka_bootstrap, settings.input_topics[0], settings.partitions))
            return answers, still, health, sent

    answers, still, health, sent = asyncio.run(main())
    assert len(answers) == len(bodies) + 2 * len(hook_bodies)
    for status, reason in answers:
        assert status in (400, 413) and isinstance(reason, str) and reason
    assert [s for s, _ in answers].count(413) == 1
    assert still["decision"] == "allow" and still["verdict"]["tool_call_id"] == "fz-0" and health == 200
    assert sent == 1  # only the valid event reached Kafka


@pytest.mark.timeout(60)
def test_no_worker_means_the_on_timeout_policy_in_every_answer(kafka_bootstrap):
    tag = topic_tag()
    events, verdicts = f"test.lw.{tag}.events", f"test.lw.{tag}.verdicts"

    async def main():
        await create_topics(kafka_bootstrap, [events, verdicts], 1)
        answers = {}
        for policy in ("allow", "block"):
            config = GatewayConfig(timeout=0.5, on_timeout=policy, bootstrap=kafka_bootstrap)
            async with LoopwatchClient(kafka_bootstrap, events_topic=events, verdicts_topic=verdicts,
                                       on_timeout=policy, timeout=0.5) as client:
                async with served(client, config) as http:
                    answers[policy] = (await (await http.post("/v1/events", json=call("to", 0))).json(),
                                       await (await http.post("/v1/hooks/claude-code", json=cc_pre(0))).json(),
                                       await (await http.get("/healthz")).json())
        return answers

    answers = asyncio.run(main())
    for policy, (event, hook, health) in answers.items():
        assert event["decision"] == policy and event["timed_out"] is True and event["on_timeout"] == policy
        # the wait it made: the timeout, or a little more when the timer fires late on a loaded machine
        waited_s = event["latency_ms"] / 1000
        assert event["verdict"] is None and waited_s >= 0.5
        assert f"no verdict within {round(waited_s, 1):g} s" in event["message"]
        assert health["status"] == "ok" and health["on_timeout"] == policy
    assert answers["allow"][1] == {"systemMessage": answers["allow"][0]["message"]}  # shown to the user; the call runs
    assert answers["block"][1]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "failing closed" in answers["block"][1]["hookSpecificOutput"]["permissionDecisionReason"]
