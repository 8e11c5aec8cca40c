"""Helpers for gateway tests: an in-process verdict source (the engine, no Kafka) and a served app."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any, AsyncIterator

from aiohttp.test_utils import TestClient, TestServer

from streams.detection import Engine, OpenClawConfig
from streams.detection.events import validate_event
from streams.offline.replay import Replayer
from streams.runners.client import Verdict
from streams.runners.gateway import GatewayConfig, create_app

JSON = {"Content-Type": "application/json"}  # what every POST to the gateway must say

# Rolling detectors on: warn at the 10th identical call (warnings are emitted per bucket of ten), block at
# the 12th; post-compaction guard over 2 outcomes.
LOOPY = OpenClawConfig({"tools": {"loopDetection": {
    "enabled": True, "warningThreshold": 10, "criticalThreshold": 12, "globalCircuitBreakerThreshold": 14,
    "postCompactionGuard": {"windowSize": 2}}}})


class EngineSource:
    """``publish`` as LoopwatchClient's, answered by the engine in process (``replay``'s Replayer).

    ``hang=True`` never answers within the timeout (a stopped worker), like the client's timeout.
    """

    def __init__(self, config: OpenClawConfig = LOOPY, key_by: str = "run", on_timeout: str = "allow",
                 hang: bool = False) -> None:
        self.replayer = Replayer(Engine(config), key_by=key_by)
        self.on_timeout = on_timeout
        self.hang = hang
        self.published: list[dict[str, Any]] = []

    async def publish(self, event: Any, timeout: float | None = None) -> "asyncio.Future[Verdict]":
        kind = validate_event(event)  # raises EventError (a ValueError), as the client does
        event = dict(event)
        event.setdefault("event_id", uuid.uuid4().hex)
        future = asyncio.get_running_loop().create_future()
        if self.hang:
            fallback = {"allow": "allow", "block": "block" if kind == "tool_call" else "abort"}[self.on_timeout]
            future.set_result(Verdict(event["event_id"], fallback, None, True, timeout or 0.0))
            return future
        self.published.append(event)
        record = self.replayer.apply(event, event["event_id"])
        future.set_result(Verdict(event["event_id"], record["verdict"], record, False, 0.0))
        return future


@contextlib.asynccontextmanager
async def served(source: Any, config: GatewayConfig | None = None, **kwargs: Any) -> AsyncIterator[TestClient]:
    """An HTTP client on the gateway app around ``source``, served on a free local port."""
    app = create_app(source, config or GatewayConfig(), **kwargs)
    async with TestClient(TestServer(app)) as client:
        yield client


def call(run: str, i: int, path: str = "/same", **extra: Any) -> dict[str, Any]:
    """A tool_call event of run ``run``: read ``path``, with its outcome following."""
    return {"type": "tool_call", "run_id": run, "session_id": f"s-{run}", "tool_call_id": f"{run}-{i}",
            "tool_name": "read", "args": {"path": path}, "outcome_follows": True, **extra}


def result(run: str, i: int, text: str = "same text") -> dict[str, Any]:
    """The tool_result of :func:`call` ``i``."""
    return {"type": "tool_result", "run_id": run, "session_id": f"s-{run}", "tool_call_id": f"{run}-{i}",
            "result": {"content": [{"type": "text", "text": text}], "details": {}}, "error": None}


@contextlib.asynccontextmanager
async def gateway_on_worker(bootstrap: str, tmp_path: Any, config: OpenClawConfig = LOOPY, *, key_by: str = "run",
                            gateway: GatewayConfig | None = None) -> AsyncIterator[tuple[TestClient, Any]]:
    """A real worker (in process, on fresh topics) and a gateway on a LoopwatchClient to it.

    Yields the HTTP client on the gateway and the worker's settings (topics).
    """
    from streams.runners.client import LoopwatchClient
    from tests.worker_harness import running_worker, worker_settings

    settings = worker_settings(bootstrap, tmp_path)
    gateway = gateway or GatewayConfig(timeout=20.0, bootstrap=bootstrap)
    async with running_worker(settings, Engine(config)):
        async with LoopwatchClient(bootstrap, events_topic=settings.input_topics[0],
                                   verdicts_topic=settings.verdicts_topic, on_timeout=gateway.on_timeout,
                                   timeout=gateway.timeout, key_by=key_by) as client:
            async with served(client, gateway) as http:
                yield http, settings
