"""A gateway of several processes: each session answered by its owner, whichever process reads it (streams/runners/gateway/peers.py).

Two gateway apps in this process stand for two processes: each has its own verdict source (the
engine, tests/runners/gateway_support.EngineSource) and they are linked by a Unix socket pair, as
``loopwatch gateway --processes 2`` links its processes. The processes themselves (fork,
SO_REUSEPORT) are tested through the command in test_gateway_broker.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path
from typing import Any, AsyncIterator

from aiohttp.test_utils import TestClient, TestServer

from streams.runners.gateway import GatewayConfig, create_app
from streams.runners.gateway.app import HANDOVER_KEY
from streams.runners.gateway.peers import Peers, affinity_key, owner_of
from tests.runners.gateway_support import JSON, EngineSource

TOKEN = {"Authorization": "Bearer t0ken", **JSON}


def _session(owner: int, count: int = 2, start: int = 0) -> str:
    """A session id that process ``owner`` owns among ``count``."""
    return next(f"s{i}" for i in range(start, start + 1000) if owner_of(f"s{i}", count) == owner)


def _pre_tool_use(session: str, i: int, path: str = "/same") -> dict[str, Any]:
    return {"session_id": session, "transcript_path": "/nonexistent/t.jsonl", "cwd": "/src",
            "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": path},
            "tool_use_id": f"{session}-toolu{i}"}


def _post_tool_use(session: str, i: int, path: str = "/same") -> dict[str, Any]:
    return {**_pre_tool_use(session, i, path), "hook_event_name": "PostToolUse",
            "tool_response": {"content": "same text"}}


class Hanging(EngineSource):
    """A source whose verdicts never come (the owner's answer is still owed when its link closes)."""

    async def publish(self, event: Any, timeout: float | None = None) -> "asyncio.Future":
        self.published.append(dict(event))
        return asyncio.get_running_loop().create_future()


@contextlib.asynccontextmanager
async def two_processes(sources: list[Any]) -> AsyncIterator[tuple[list[TestClient], list[Peers]]]:
    config = GatewayConfig(token="t0ken", timeout=1.0)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    peers = [Peers(0, 2, {1: a}, config.timeout), Peers(1, 2, {0: b}, config.timeout)]
    apps = [create_app(source, config, peers=peer) for source, peer in zip(sources, peers)]
    for app, peer in zip(apps, peers):
        await peer.open(app[HANDOVER_KEY])
    async with TestClient(TestServer(apps[0])) as first, TestClient(TestServer(apps[1])) as second:
        try:
            yield [first, second], peers
        finally:
            for peer in peers:
                peer.close()


def test_the_session_key_of_a_request_and_its_owner():
    assert affinity_key({"session_id": "s1", "run_id": "r1"}) == "s1"
    assert affinity_key({"session_id": "", "session_key": "agent:main", "run_id": "r1"}) == "agent:main"
    assert affinity_key({"session_id": 7, "run_id": "r1"}) == "r1"
    assert affinity_key({"type": "tool_call"}) is None
    owners = [owner_of(f"session-{i}", 3) for i in range(300)]
    assert set(owners) == {0, 1, 2} and all(owners.count(k) > 60 for k in range(3))  # spread
    assert owner_of("session-1", 3) == owner_of("session-1", 3)


def test_a_sessions_hook_calls_are_answered_by_its_owner_whichever_process_reads_them():
    async def main():
        sources = [EngineSource(), EngineSource()]
        session = _session(owner=1)
        async with two_processes(sources) as (clients, peers):
            decisions = []
            for i in range(13):  # alternately to each process: the loop is still seen whole
                client = clients[i % 2]
                response = await client.post("/v1/hooks/claude-code", json=_pre_tool_use(session, i), headers=TOKEN)
                assert response.status == 200
                answer = await response.json()
                decisions.append(answer.get("hookSpecificOutput", {}).get("permissionDecision", "allow"))
                response = await client.post("/v1/hooks/claude-code", json=_post_tool_use(session, i), headers=TOKEN)
                assert response.status == 200
            counts = [(peer.handed_over, peer.taken_over) for peer in peers]
        return decisions, sources, counts

    decisions, sources, counts = asyncio.run(main())
    assert sources[0].published == []  # process 0 read half of the requests and answered none itself
    assert [event["type"] for event in sources[1].published] == ["tool_call", "tool_result"] * 13
    assert [event["tool_call_id"] for event in sources[1].published[::2]] == [
        f"{_session(owner=1)}-toolu{i}" for i in range(13)]
    assert decisions[:10] == ["allow"] * 10 and decisions[12] == "deny"  # the 12th identical call is blocked
    assert counts == [(14, 0), (0, 14)]  # process 0 read 7 calls and their results, and handed over every one


def test_events_of_a_session_owned_here_are_answered_here_and_refusals_at_the_door_never_reach_the_owner():
    async def main():
        sources = [EngineSource(), EngineSource()]
        mine, theirs = _session(owner=0), _session(owner=1)
        event = {"type": "tool_call", "run_id": "r1", "session_id": mine, "tool_call_id": "c1", "tool_name": "read",
                 "args": {"path": "/a"}, "outcome_follows": True}
        async with two_processes(sources) as (clients, peers):
            here = await clients[0].post("/v1/events", json=event, headers=TOKEN)
            decision = (await here.json())["decision"]
            no_token = await clients[0].post("/v1/events", json={**event, "session_id": theirs}, headers=JSON)
            bad = await clients[0].post("/v1/events", json={**event, "session_id": theirs, "type": "nope"},
                                        headers=TOKEN)
            bad_answer = await bad.json()
            handed = peers[0].handed_over
        return here.status, decision, no_token.status, bad.status, bad_answer, sources, handed

    status, decision, no_token, bad, bad_answer, sources, handed = asyncio.run(main())
    assert (status, decision) == (200, "allow")
    assert [event["session_id"] for event in sources[0].published] == [_session(owner=0)]
    assert no_token == 401 and handed == 1  # the 401 was the reader's; only the invalid event was handed over
    assert bad == 400 and "type must be one of" in bad_answer["error"]  # the owner's check, sent back by the reader
    assert sources[1].published == []


def test_a_link_down_is_answered_here_and_an_owner_gone_mid_request_gets_503():
    async def main():
        sources = [EngineSource(), Hanging()]
        theirs = _session(owner=1)
        async with two_processes(sources) as (clients, peers):
            waiting = asyncio.ensure_future(
                clients[0].post("/v1/hooks/claude-code", json=_pre_tool_use(theirs, 0), headers=TOKEN))
            while not sources[1].published:  # the owner has it and owes the answer
                await asyncio.sleep(0.01)
            peers[1].close()  # the owner stops
            gone = await waiting
            gone_answer = await gone.json()
            await asyncio.sleep(0.05)
            after = await clients[0].post("/v1/hooks/claude-code", json=_pre_tool_use(theirs, 1), headers=TOKEN)
        return gone.status, gone_answer, after.status, sources

    gone, gone_answer, after, sources = asyncio.run(main())
    assert gone == 503 and "stopped before answering" in gone_answer["error"]
    assert after == 200
    assert [event["tool_call_id"] for event in sources[0].published] == [f"{_session(owner=1)}-toolu1"]


# ------------------------------------------------------------------ the command line: loopwatch gateway --processes


def _metric(port: int, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(float(line.rpartition(" ")[2]) for line in text.splitlines() if line.startswith(name))


def test_processes_share_the_port_and_one_metrics_page_and_a_second_gateway_cannot_join_them(tmp_path):
    import json
    import signal
    import subprocess
    import sys

    from tests.runners.gateway_support import call
    from tests.runners.test_gateway_doors import ROOT, _gateway, _post

    # Kafka unreachable: every event is answered at once by the on_timeout policy, by whichever process owns it.
    proc, port, log = _gateway(tmp_path, "--no-token", "--processes", "2")
    try:
        assert "2 processes" in log.read_text()
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 2
        answers = [_post(port, json.dumps(call(f"multi{i}", 0)).encode(), {}) for i in range(20)]  # a connection each
        assert [(status, body["decision"], body["verdict"]) for status, body in answers] == [(200, "allow", None)] * 20
        # whichever process a scrape reaches, it counts every process's requests
        scraped = [_metric(port, 'loopwatch_gateway_requests_total{endpoint="/v1/events",outcome="send_error"}')
                   for _ in range(6)]
        assert scraped == [20.0] * 6
        second = subprocess.run([sys.executable, "-c", "from streams.cli import main; main()", "gateway", "--no-token",
                                 "--bootstrap", "127.0.0.1:9", "--port", str(port), "--processes", "2"],
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and "in use" in second.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()[-3000:]
        assert log.read_text().count("loopwatch gateway: stopped") == 2
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
