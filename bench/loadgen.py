"""The gateway benchmark's load generator, a process of its own: requests at a fixed rate, each timed.

Two modes, the same pacing and the same figures, so that they differ only in the path measured:

* ``http``: Claude Code ``PreToolUse`` hook calls POSTed to a gateway's ``/v1/hooks/claude-code``
  over keep-alive connections, by a raw asyncio protocol (each request's bytes made before the
  phase starts; an answer read by its ``Content-Length``), so that the generator's own CPU per
  request is a small fraction of the gateway's (aiohttp's client needed about twice the
  gateway's);
* ``direct``: the same calls as ``tool_call`` events through ``LoopwatchClient.check()`` in this
  process (the floor: what an embedded Python runner pays; its CPU is the client's work).

Both modes have at most :data:`RUNS` requests in flight (a fleet of 200 runs, each waiting for its
verdict): the HTTP side's connections, the direct side's concurrent checks; a request due while
all are busy waits, and the wait counts in its round trip.

Pacing is open-loop: request ``i`` is due at ``start + i / rate`` whatever the answers do (a slow
answer does not hold the next request back, so queueing shows in the round trips); the round trip
is timed from when the request is due to its answer, so a generator that falls behind shows it.

Run by ``bench/gateway.py`` (possibly pinned to a core: ``--loadgen-cpus``), it prints one JSON
object: offered and achieved rate, answered and failed requests, p50/p99/max round trip in ms, and
its own CPU time per request in µs.

    .venv/bin/python bench/loadgen.py http --url http://127.0.0.1:8787 --token T --rate 1000 --duration 10
    .venv/bin/python bench/loadgen.py direct --bootstrap 127.0.0.1:9092 --events-topic E --verdicts-topic V ...
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import time
from time import perf_counter  # uvloop's loop.time() counts whole milliseconds
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TIMEOUT_S = 10.0  # per request: far above any healthy round trip, so a slow one is measured, not cut
WARM_UP = 20  # requests before the phase (connections opened, partitions assigned); not timed
RUNS = 200  # runs (and sessions) in flight, like a fleet of agents


def tool_call(i: int, tag: str) -> dict[str, Any]:
    run = f"{tag}-r{i % RUNS}"
    return {"type": "tool_call", "run_id": run, "session_id": f"{tag}-s{i % RUNS}", "tool_call_id": f"{tag}-c{i}",
            "tool_name": "read", "args": {"path": f"/src/file{i % 37}.py"}, "outcome_follows": True}


def pre_tool_use(i: int, tag: str) -> dict[str, Any]:
    return {"session_id": f"{tag}-s{i % RUNS}", "transcript_path": "/tmp/t.jsonl", "cwd": "/src",
            "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Read",
            "tool_input": {"file_path": f"/src/file{i % 37}.py"}, "tool_use_id": f"{tag}-toolu{i}"}


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def paced(rate: float, duration: float, send: Callable[[int], Awaitable[bool]]) -> dict[str, Any]:
    """Start ``send(i)`` at ``start + i / rate`` for ``duration`` s; figures of the round trips.

    One timer wake-up sends every request then due (no task per sleep), so the pacing costs little
    however high the rate.
    """
    count = int(rate * duration)
    latencies: list[float] = []
    failed = 0
    pending: set[asyncio.Future] = set()

    async def timed(i: int, due: float) -> None:
        nonlocal failed
        try:
            ok = await send(i)
        except (asyncio.TimeoutError, OSError, ConnectionError):
            ok = False
        took = perf_counter() - due
        if ok and took < TIMEOUT_S:
            latencies.append(took * 1000)
        else:
            failed += 1

    cpu0 = time.process_time()
    start = perf_counter() + 0.01
    i = 0
    while i < count:
        now = perf_counter()
        while i < count and start + i / rate <= now:
            task = asyncio.ensure_future(timed(i, start + i / rate))
            pending.add(task)
            task.add_done_callback(pending.discard)
            i += 1
        if i < count:
            await asyncio.sleep(max(0.0, start + i / rate - perf_counter()))
    sent_in = perf_counter() - start
    if pending:  # those not answered within TIMEOUT_S of the last send are counted as failed
        _, late = await asyncio.wait(list(pending), timeout=TIMEOUT_S)
        failed += len(late)
        for task in late:
            task.cancel()
    cpu = time.process_time() - cpu0
    return {"offered": rate, "achieved": count / sent_in if sent_in > 0 else 0.0, "answered": len(latencies),
            "failed": failed, "p50_ms": quantile(latencies, 0.50), "p99_ms": quantile(latencies, 0.99),
            "max_ms": max(latencies, default=float("nan")), "loadgen_us": cpu / count * 1e6 if count else None}


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: one request at a time, its answer read by ``Content-Length``."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.answer: asyncio.Future | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0 or self.answer is None:
            return
        head = bytes(self.buffer[:head_end]).lower()
        length = 0
        at = head.find(b"\r\ncontent-length:")
        if at >= 0:
            end = head.find(b"\r\n", at + 2)
            length = int(head[at + 17:end if end >= 0 else None])
        if len(self.buffer) < head_end + 4 + length:
            return
        status = int(self.buffer[9:12])
        body = bytes(self.buffer[head_end + 4:head_end + 4 + length])
        del self.buffer[:head_end + 4 + length]
        answer, self.answer = self.answer, None
        if not answer.done():
            answer.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(ConnectionError("connection closed before the answer"))

    def ask(self, request: bytes) -> asyncio.Future:
        self.answer = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(request)
        return self.answer


class HttpLoad:
    """Keep-alive connections to the gateway, opened as needed (at most ``limit``, one per run of the fleet)
    and reused once answered; a request finding them all busy waits for one (its wait counts in its round trip)."""

    def __init__(self, url: str, token: str, path: str = "/v1/hooks/claude-code", limit: int = RUNS) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, path
        self.head = (f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {token}\r\n"
                     "Content-Type: application/json\r\nContent-Length: ").encode()
        self.idle: list[_Connection] = []
        self.opened = 0
        self.open_now = 0
        self.limit = limit
        self.waiting: collections.deque[asyncio.Future] = collections.deque()

    def request(self, body: bytes) -> bytes:
        return self.head + str(len(body)).encode() + b"\r\n\r\n" + body

    async def _connection(self) -> _Connection:
        while True:
            while self.idle:
                connection = self.idle.pop()
                if not connection.lost:
                    return connection
                self.open_now -= 1
            if self.open_now < self.limit:
                self.open_now += 1
                try:
                    _, connection = await asyncio.get_running_loop().create_connection(_Connection, self.host,
                                                                                        self.port)
                except BaseException:
                    self.open_now -= 1
                    raise
                self.opened += 1
                return connection
            waiter = asyncio.get_running_loop().create_future()
            self.waiting.append(waiter)
            await waiter

    def _release(self, connection: _Connection) -> None:
        if connection.lost:
            self.open_now -= 1
        else:
            self.idle.append(connection)
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

    async def send(self, request: bytes) -> bool:
        connection = await self._connection()
        try:
            status, body = await connection.ask(request)
        finally:
            self._release(connection)
        return status == 200 and body.startswith(b"{")

    def close(self) -> None:
        for connection in self.idle:
            if connection.transport is not None:
                connection.transport.close()


async def http_phase(url: str, token: str, rate: float, duration: float) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    load = HttpLoad(url, token)
    requests = [load.request(json.dumps(pre_tool_use(i, tag), separators=(",", ":")).encode())
                for i in range(int(rate * duration))]
    warm = [load.request(json.dumps(pre_tool_use(i, f"w{tag}")).encode()) for i in range(WARM_UP)]
    try:
        for request in warm:
            await load.send(request)
        result = await paced(rate, duration, lambda i: load.send(requests[i]))
    finally:
        load.close()
    return {**result, "connections": load.opened}


async def direct_phase(bootstrap: str, events_topic: str, verdicts_topic: str, rate: float,
                       duration: float) -> dict[str, Any]:
    from streams.runners.client import LoopwatchClient

    tag = uuid.uuid4().hex[:6]
    events = [tool_call(i, tag) for i in range(int(rate * duration))]
    async with LoopwatchClient(bootstrap, events_topic=events_topic, verdicts_topic=verdicts_topic,
                               timeout=TIMEOUT_S) as client:
        for i in range(WARM_UP):
            await client.check(tool_call(i, f"w{tag}"))

        in_flight = asyncio.Semaphore(RUNS)  # as many requests at once as the HTTP side has connections

        async def one(i: int) -> bool:
            async with in_flight:
                verdict = await client.check(events[i])
            return not verdict.timed_out and verdict.error is None
        return await paced(rate, duration, one)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["http", "direct"])
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--url", help="http: the gateway's URL")
    parser.add_argument("--token", default=os.environ.get("LOOPWATCH_GATEWAY_TOKEN", ""), help="http: bearer token")
    parser.add_argument("--bootstrap", help="direct: Kafka")
    parser.add_argument("--events-topic")
    parser.add_argument("--verdicts-topic")
    options = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    if options.mode == "http":
        result = runner(http_phase(options.url, options.token, options.rate, options.duration))
    else:
        result = runner(direct_phase(options.bootstrap, options.events_topic, options.verdicts_topic,
                                     options.rate, options.duration))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
