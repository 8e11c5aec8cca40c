"""Running the gateway: the shared client started first, the HTTP site on top, both stopped on exit."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any, Callable, Mapping

from aiohttp import web

from streams.runners.client import LoopwatchClient
from .app import GatewayConfig, create_app

__all__ = ["serve"]

log = logging.getLogger(__name__)


async def serve(bootstrap: str, config: GatewayConfig, *, host: str = "127.0.0.1", port: int = 8787,
                client_options: Mapping[str, Any] | None = None,
                ready: Callable[[str], None] | None = None) -> None:
    """Serve the gateway until cancelled.

    Arguments:
        bootstrap: Kafka's ``host:port[,host:port]``.
        config: :class:`~streams.runners.gateway.app.GatewayConfig` (its ``bootstrap`` is set from
            ``bootstrap`` when None).
        host, port: where to listen (127.0.0.1 by default: say ``0.0.0.0`` to serve other machines).
        client_options: extra keyword arguments of :class:`LoopwatchClient` (topics, ``key_by``, codec).
        ready: called with the URL once listening.
    Raises:
        streams.runners.client.TopicNotFoundError: Kafka answers but has no verdicts topic (is the worker running?).
            With Kafka unreachable the gateway starts all the same and answers by ``on_timeout`` until the
            client connects (:mod:`streams.runners.connection`).
        OSError: the port is taken.
    """
    if config.bootstrap is None:
        config = dataclasses.replace(config, bootstrap=bootstrap)
    client = LoopwatchClient(bootstrap, on_timeout=config.on_timeout, timeout=config.timeout,
                             **dict(client_options or {}))
    await client.start()
    runner = web.AppRunner(create_app(client, config), access_log=None)
    try:
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        url = f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
        log.info("loopwatch gateway on %s (Kafka %s, timeout %g s, on_timeout=%s)",
                 url, bootstrap, config.timeout, config.on_timeout)
        if ready is not None:
            ready(url)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        await client.stop()
