"""The gateway's doors, each fault caused: cross-site requests, the bearer token, slow clients, numbers JSON
cannot hold, readiness, a full outbox, and a drain on SIGTERM with a request in flight.

Verdicts come from the engine in process (tests/runners/gateway_support.EngineSource) or from a client whose
Kafka is unreachable (127.0.0.1:9); nothing here needs a broker.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web

from streams.runners.gateway import GatewayConfig, create_app
from streams.runners.gateway.app import DRAIN_KEY
from streams.runners.gateway.serve import app_runner, drain
from streams.runners.hooks.command import ask_gateway
from streams.runners.token import TOKEN_ENV, TOKEN_FILE_ENV, TokenFileError, gateway_token, read_token, token_path
from tests.runners.gateway_support import JSON, EngineSource, call, served


ROOT = Path(__file__).resolve().parents[2]


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


# ------------------------------------------------------------------ cross-site requests


def test_a_web_page_cannot_post_events_text_plain_or_foreign_origin_are_refused():
    async def main():
        source = EngineSource()
        config = GatewayConfig(token="t0k", allowed_origins=("http://localhost:3000",))
        auth = {"Authorization": "Bearer t0k"}
        body = json.dumps(call("r", 0))
        answers = []
        async with served(source, config) as client:
            # What a page may send without a CORS preflight: text/plain, a form, no type at all.
            for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
                headers = {**auth, **({"Content-Type": content_type} if content_type else {})}
                response = await client.post("/v1/events", data=body.encode(), headers=headers,
                                             skip_auto_headers=("Content-Type",))
                answers.append((response.status, (await response.json())["error"]))
            # A page's fetch carries its Origin: refused whatever else is right.
            foreign = await client.post("/v1/events", data=body, headers={**auth, **JSON,
                                                                          "Origin": "https://evil.example"})
            answers.append((foreign.status, (await foreign.json())["error"]))
            hook = await client.post("/v1/hooks/codex", data=b"{}", headers={**auth, **JSON, "Origin": "null"})
            answers.append((hook.status, (await hook.json())["error"]))
            allowed = await client.post("/v1/events", data=body, headers={
                **auth, "Content-Type": "application/json; charset=utf-8", "Origin": "http://localhost:3000"})
            plain = await client.post("/v1/events", json=call("r", 1), headers=auth)  # a runner: no Origin
            metrics = await (await client.get("/metrics")).text()
        for status, reason in answers[:4]:
            assert status == 415 and reason.startswith("Content-Type must be application/json, got ")
        assert answers[0][1].endswith("'text/plain'") and answers[3][1].endswith("got none")
        assert answers[4] == (403, "cross-origin request refused: Origin 'https://evil.example' is not allowed "
                                   "(loopwatch gateway --allow-origin ORIGIN to allow one)")
        assert answers[5][0] == 403
        assert allowed.status == 200 and plain.status == 200
        # Refused requests never reached Kafka: only the two taken events were published.
        assert [event["tool_call_id"] for event in source.published] == ["r-0", "r-1"]
        assert 'loopwatch_gateway_requests_total{endpoint="/v1/events",outcome="unsupported_media_type"} 4.0' in metrics
        assert 'loopwatch_gateway_requests_total{endpoint="/v1/events",outcome="forbidden"} 1.0' in metrics
    _run(main())


def test_by_default_any_origin_is_refused():
    async def main():
        async with served(EngineSource(), GatewayConfig()) as client:
            response = await client.post("/v1/events", json=call("r", 0), headers={"Origin": "http://127.0.0.1:8787"})
            return response.status
    assert _run(main()) == 403


def test_numbers_json_cannot_hold_are_refused_with_400():
    async def main():
        source = EngineSource()
        out = {}
        async with served(source) as client:
            for number in ("1e999", "-1e999", "NaN", "Infinity", "-Infinity"):
                text = json.dumps(call("r", 0))[:-1] + f', "args": {{"n": {number}}}}}'
                response = await client.post("/v1/events", data=text, headers=JSON)
                out[number] = (response.status, (await response.json())["error"])
            fine = await client.post("/v1/events", data=json.dumps(call("r", 1, path="1.7e308")), headers=JSON)
        return out, fine.status, source.published
    out, fine, published = _run(main())
    assert out["1e999"] == (400, "invalid JSON: number 1e999 is beyond what JSON can hold (about 1.8e308)")
    assert out["-1e999"][1] == "invalid JSON: number -1e999 is beyond what JSON can hold (about 1.8e308)"
    assert {status for status, _ in out.values()} == {400}
    assert out["NaN"][1] == "invalid JSON: NaN is not JSON"
    assert fine == 200 and [event["tool_call_id"] for event in published] == ["r-1"]


# ------------------------------------------------------------------ the token


def test_the_token_is_made_once_with_mode_0600_and_read_back(tmp_path):
    env = {TOKEN_FILE_ENV: str(tmp_path / "cfg" / "gateway-token")}
    token, source = gateway_token(env)
    path = Path(token_path(env))
    assert source == f"{path} (created)" and len(token) == 43
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert gateway_token(env) == (token, str(path))  # the second start reads it: same token
    assert read_token(env) == token
    assert read_token({**env, TOKEN_ENV: "from-env"}) == "from-env"
    assert gateway_token({**env, TOKEN_ENV: "from-env"}) == ("from-env", TOKEN_ENV)
    # XDG_CONFIG_HOME places it when no file is named.
    assert token_path({"XDG_CONFIG_HOME": str(tmp_path)}) == str(tmp_path / "loopwatch" / "gateway-token")
    path.chmod(0o644)
    with pytest.raises(TokenFileError, match="can be read by other users"):
        gateway_token(env)
    path.chmod(0o600)
    path.write_text("\n")
    with pytest.raises(TokenFileError, match="is empty"):
        gateway_token(env)
    assert read_token({TOKEN_FILE_ENV: str(tmp_path / "none")}) is None


def test_the_command_hook_sends_the_token_from_the_gateways_file(tmp_path, monkeypatch):
    monkeypatch.setenv(TOKEN_FILE_ENV, str(tmp_path / "gateway-token"))
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    token, _ = gateway_token()
    payload = json.dumps({"hook_event_name": "PreToolUse", "session_id": "s", "turn_id": "t", "tool_name": "Bash",
                          "tool_input": {"command": "ls"}, "tool_use_id": "c"}).encode()

    async def main():
        async with served(EngineSource(), GatewayConfig(token=token)) as client:
            url = str(client.make_url("")).rstrip("/")
            answer = await asyncio.to_thread(ask_gateway, url, "codex", payload, 5.0, read_token())
            try:
                await asyncio.to_thread(ask_gateway, url, "codex", payload, 5.0, "wrong")
            except Exception as exc:  # GatewayUnavailable
                return answer, str(exc)
        return answer, None
    answer, refused = _run(main())
    assert answer == {}  # allowed: the token from the file was taken
    assert refused is not None and refused.startswith("gateway answered 401: missing or wrong bearer token")


# ------------------------------------------------------------------ slow clients


async def _listening(app: web.Application, config: GatewayConfig) -> tuple[web.AppRunner, int]:
    runner = app_runner(app, config)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, runner.addresses[0][1]


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when that was."""
    started = time.monotonic()
    data = await asyncio.wait_for(reader.read(), seconds)
    return data, time.monotonic() - started


def test_slow_clients_are_closed_headers_trickled_body_never_sent_or_nothing_sent():
    async def main():
        config = GatewayConfig(header_timeout=1.0, body_timeout=1.0)
        source = EngineSource()
        runner, port = await _listening(create_app(source, config), config)
        try:
            # 1. Headers trickled one byte every 0.2 s (slowloris): closed, no answer.
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            started = time.monotonic()
            writer.write(b"POST /v1/events HTTP/1.1\r\nHost: x\r\n")
            try:
                for byte in b"Content-Type: application/json\r\nX-Slow: " + b"a" * 100:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(0.2)
                    if reader.at_eof():
                        break
            except ConnectionError:
                pass
            header_data, _ = await _closed_within(reader, 10)
            header_closed = time.monotonic() - started
            writer.close()
            # 2. Headers in full, the body promised and not sent: 408 with the reason, then closed.
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 200\r\n\r\n{\"type\": ")
            body_data, body_closed = await _closed_within(reader, 10)
            writer.close()
            # 3. A connection that sends nothing: closed.
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            idle_data, idle_closed = await _closed_within(reader, 10)
            writer.close()
        finally:
            await runner.cleanup()
        return header_data, header_closed, body_data, body_closed, idle_data, idle_closed, source.published

    header_data, header_closed, body_data, body_closed, idle_data, idle_closed, published = _run(main())
    assert header_data == b"" and header_closed < 16  # closed early: the trickle would have taken 32 s
    head, _, answer = body_data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and json.loads(answer) == {"error": "body not received within 1 s"}
    assert body_closed < 5
    assert idle_data == b"" and idle_closed < 5
    assert published == []


# ------------------------------------------------------------------ readiness and a full outbox


class _Slow(EngineSource):
    """The engine's verdicts, each after ``delay`` s (a worker that takes its time)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def publish(self, event, timeout=None):
        await asyncio.sleep(self.delay)
        return await super().publish(event, timeout)


def test_readyz_is_200_only_while_verdicts_come_back():
    async def main():
        good, hung = EngineSource(), EngineSource(hang=True)
        async with served(good, GatewayConfig(timeout=15.0)) as client:  # its probe must succeed
            ready = await client.get("/readyz")
            ready_body = await ready.json()
            await client.post("/v1/events", json=call("r", 0))
            again = await client.get("/readyz")  # a verdict just came: no probe
            client.app[DRAIN_KEY].set()
            draining = await client.get("/readyz")
            draining_body = await draining.json()
            live = await client.get("/healthz")
        async with served(hung, GatewayConfig(timeout=0.5)) as client:
            not_ready = await client.get("/readyz")
            not_ready_body = await not_ready.json()
        return (ready.status, ready_body, again.status, good.published, draining.status, draining_body, live.status,
                not_ready.status, not_ready_body)

    (ready, ready_body, again, published, draining, draining_body, live, not_ready, not_ready_body) = _run(main())
    assert ready == 200 and ready_body["status"] == "ready"
    assert again == 200
    # One probe (before any traffic), then the real event: the second /readyz sent none.
    assert [(e["type"], e["run_id"]) for e in published] == [("compaction_retry", "loopwatch-gateway-readyz"),
                                                             ("tool_call", "r")]
    assert draining == 503 and draining_body["error"].startswith("loopwatch gateway is draining")
    assert live == 200
    assert not_ready == 503 and not_ready_body["status"] == "unavailable"
    assert not_ready_body["reason"] == ("the last event's verdict did not come within 0.5 s (is the loopwatch "
                                        "worker running and keeping up?)")


def test_a_full_outbox_answers_503_and_what_it_took_is_kept():
    from streams.runners.client import LoopwatchClient

    async def main():
        client = LoopwatchClient("127.0.0.1:9", timeout=1.0, outbox_events=2, stop_timeout=0.5)
        await client.start()  # Kafka unreachable: events are answered at once and kept
        try:
            async with served(client, GatewayConfig(bootstrap="127.0.0.1:9")) as http:
                answers = []
                for i in range(3):
                    response = await http.post("/v1/events", json=call("full", i))
                    answers.append((response.status, await response.json()))
                held = client.outbox
                metrics = await (await http.get("/metrics")).text()
        finally:
            await client.stop()
        return answers, held, metrics

    answers, held, metrics = _run(main())
    for status, body in answers[:2]:
        assert status == 200 and body["decision"] == "allow" and body["verdict"] is None
        assert "the event is kept and sent once connected" in body["error"]
    status, body = answers[2]
    assert status == 503 and body["error"].startswith("loopwatch outbox full: 2 events (")
    assert "the bound is 2 events" in body["error"] and "the event is not taken" in body["error"]
    assert held[0] == 2
    assert 'loopwatch_gateway_requests_total{endpoint="/v1/events",outcome="unavailable"} 1.0' in metrics
    assert "loopwatch_gateway_outbox_events 2.0" in metrics


def test_a_drain_answers_requests_in_flight_and_refuses_new_ones():
    async def main():
        config = GatewayConfig(timeout=2.0)
        app = create_app(_Slow(1.0), config)
        runner, port = await _listening(app, config)
        import aiohttp

        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{port}/v1/events"

            async def one(i: int) -> int:
                async with http.post(url, json=call("d", i)) as response:
                    await response.read()
                    return response.status

            in_flight = [asyncio.ensure_future(one(i)) for i in range(8)]
            await asyncio.sleep(0.3)
            cleanup = asyncio.ensure_future(drain(app, runner, config))
            await asyncio.sleep(0.1)
            try:
                await asyncio.open_connection("127.0.0.1", port)
                refused = False
            except ConnectionRefusedError:
                refused = True
            statuses = await asyncio.gather(*in_flight)
            await cleanup
        return statuses, refused

    statuses, refused = _run(main())
    assert statuses == [200] * 8
    assert refused


# ------------------------------------------------------------------ the command line


def _gateway(tmp_path: Path, *args: str, bootstrap: str = "127.0.0.1:9") -> tuple[subprocess.Popen, int, Path]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path / f"gateway-{port}.log"
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    env[TOKEN_FILE_ENV] = str(tmp_path / "gateway-token")
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", "from streams.cli import main; main()", "gateway",
                                 "--bootstrap", bootstrap, "--port", str(port), *args],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while f"loopwatch gateway: http://127.0.0.1:{port}" not in log.read_text("utf-8", "replace"):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return proc, port, log


def _post(port: int, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/events", data=body, method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_command_line_makes_and_asks_the_token_unless_no_token_and_drains_on_sigterm(tmp_path):
    printed = subprocess.run([sys.executable, "-c", "from streams.cli import main; main()", "gateway", "--print-token"],
                             cwd=ROOT, capture_output=True, text=True, timeout=60,
                             env={**{k: v for k, v in os.environ.items() if k != TOKEN_ENV},
                                  TOKEN_FILE_ENV: str(tmp_path / "gateway-token")})
    token = printed.stdout.strip()
    assert printed.returncode == 0 and len(token) == 43
    assert stat.S_IMODE((tmp_path / "gateway-token").stat().st_mode) == 0o600

    body = json.dumps(call("cli", 0)).encode()
    proc, port, log = _gateway(tmp_path)
    try:
        assert f"bearer token from {tmp_path / 'gateway-token'}" in log.read_text()
        assert _post(port, body, {})[0] == 401
        status, answer = _post(port, body, {"Authorization": f"Bearer {token}"})
        assert status == 200 and answer["decision"] == "allow"
        # SIGTERM with a request in flight (its body half sent): it is answered, new connections are refused.
        sock = socket.create_connection(("127.0.0.1", port))
        head = (f"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        sock.sendall(head + body[:20])
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5  # the drain closes the listening socket first (a loaded machine: slack)
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
            except ConnectionRefusedError:
                break
            assert time.monotonic() < deadline, "new connections still taken 5 s after SIGTERM"
            time.sleep(0.1)
        sock.sendall(body[20:])
        sock.settimeout(10)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        sock.close()
        assert answer.startswith(b"HTTP/1.1 200 ") and b'"decision":"allow"' in answer.replace(b" ", b"")
        assert proc.wait(30) == 0
        assert "draining" in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    proc, port, log = _gateway(tmp_path, "--no-token")
    try:
        assert "WARNING: --no-token: no bearer token is asked" in log.read_text()
        assert _post(port, body, {})[0] == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_taken_port_stops_the_start_in_one_line_before_any_token_file_is_made(tmp_path, processes):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        env[TOKEN_FILE_ENV] = str(tmp_path / "cfg" / "gateway-token")
        done = subprocess.run([sys.executable, "-c", "from streams.cli import main; main()", "gateway",
                               "--bootstrap", "127.0.0.1:9", "--port", str(port), "--processes", processes],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"loopwatch gateway: port {port} is in use on 127.0.0.1 (another loopwatch gateway, or another program, "
        f"listens there; `ss -ltnp 'sport = :{port}'` shows which): stop it, or start this gateway on a free port "
        "with --port N (or LOOPWATCH_GATEWAY_PORT) and point the runners at that port"]
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "cfg").exists()  # no token file (nor its folder) from a start that failed


def test_an_address_that_is_not_this_machines_is_said_so():
    from streams.runners.gateway.listen import bind_problem, bound

    with pytest.raises(OSError) as caught:
        bound("192.0.2.1", 0)  # TEST-NET-1: never a local address
    assert bind_problem("192.0.2.1", 8787, caught.value) == (
        "cannot listen on 192.0.2.1:8787: 192.0.2.1 is not an address of this machine "
        "(--host 127.0.0.1 for this machine only, 0.0.0.0 for every interface)")


@pytest.mark.kafka
@pytest.mark.parametrize("processes", [1, 2])
def test_sigterm_answers_every_request_waiting_for_its_verdict_and_their_events_reach_kafka(kafka_bootstrap, tmp_path,
                                                                                           processes):
    from concurrent.futures import ThreadPoolExecutor

    from tests.worker_harness import count_records, create_topics, topic_tag

    tag = topic_tag()
    events, verdicts = f"test.lw.{tag}.events", f"test.lw.{tag}.verdicts"
    asyncio.run(create_topics(kafka_bootstrap, [events, verdicts], 2))
    # No worker: each request waits its 5 s for a verdict, so all are in flight when SIGTERM comes.
    # With 2 processes, the requests read by the one that does not own the session wait on the other's answer.
    proc, port, log = _gateway(tmp_path, "--no-token", "--timeout", "5", "--events-topic", events,
                               "--verdicts-topic", verdicts, "--processes", str(processes), bootstrap=kafka_bootstrap)
    try:
        with ThreadPoolExecutor(10) as pool:
            waiting = [pool.submit(_post, port, json.dumps(call("drain", i)).encode(), {}) for i in range(10)]
            # all ten taken (their events in Kafka) before SIGTERM, however long a loaded machine takes
            assert asyncio.run(count_records(kafka_bootstrap, events, at_least=10, timeout=60)) == 10
            proc.send_signal(signal.SIGTERM)
            answers = [future.result() for future in waiting]
        assert proc.wait(30) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [(status, body["timed_out"], body["decision"]) for status, body in answers] == [(200, True, "allow")] * 10
    assert asyncio.run(count_records(kafka_bootstrap, events, at_least=10, timeout=60)) == 10
