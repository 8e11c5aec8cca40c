"""Running the gateway: the shared client started first, the HTTP site on top, a drain on SIGTERM, both stopped on exit."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import socket
import threading
from typing import Any, Callable, Coroutine, Mapping, Sequence

from aiohttp import web

from streams.runners.client import LoopwatchClient
from .app import DRAIN_KEY, HANDOVER_KEY, INFLIGHT_KEY, METRICS_KEY, GatewayConfig, create_app
from .metrics import GatewayMetrics
from .peers import Peers

__all__ = ["serve", "app_runner", "drain", "run", "LOOPS"]

LOOPS = ("auto", "uvloop", "asyncio")

log = logging.getLogger(__name__)

LINGER_S = 1.0  # after refusing a body, read what the client still sends for at most this long


async def serve(bootstrap: str, config: GatewayConfig, *, host: str = "127.0.0.1", port: int = 8787,
                client_options: Mapping[str, Any] | None = None,
                ready: Callable[[str], None] | None = None, stop: asyncio.Event | None = None,
                socks: Sequence[socket.socket] | None = None, peers: Peers | None = None,
                metrics: GatewayMetrics | None = None) -> None:
    """Serve the gateway until ``stop`` is set, SIGTERM or SIGINT arrives, or the task is cancelled.

    A stop drains: the listening socket is closed (new connections are refused), a request on a
    connection already open gets 503 and the connection closed, and the requests in flight are
    answered (each waits at most ``config.timeout`` for its verdict, ``config.body_timeout`` for its
    body); then the client stops, waiting up to its ``stop_timeout`` for Kafka to take the events
    of its outbox.

    Arguments:
        bootstrap: Kafka's ``host:port[,host:port]``.
        config: :class:`~streams.runners.gateway.app.GatewayConfig` (its ``bootstrap`` is set from
            ``bootstrap`` when None).
        host, port: where to listen (127.0.0.1 by default: say ``0.0.0.0`` to serve other machines).
        client_options: extra keyword arguments of :class:`LoopwatchClient` (topics, ``key_by``, codec,
            outbox bounds, ``stop_timeout``).
        ready: called with the URL once listening.
        stop: set to drain and return; SIGTERM and SIGINT set it too (when called in the main thread).
        socks: listening sockets to serve on instead of binding ``host:port`` here (:mod:`.listen`: the
            command binds them before anything else; one process of a gateway of several gets its own).
        peers: that process's links to the others (:mod:`.peers`); closed after the drain.
        metrics: where to count (default: a fresh :class:`~streams.runners.gateway.metrics.GatewayMetrics`).
    Raises:
        streams.runners.client.TopicNotFoundError: Kafka answers but has no verdicts topic (is the worker running?).
            With Kafka unreachable the gateway starts all the same and answers by ``on_timeout`` until the
            client connects (:mod:`streams.runners.connection`).
        OSError: the port is taken.
    """
    if config.bootstrap is None:
        config = dataclasses.replace(config, bootstrap=bootstrap)
    stop = stop or asyncio.Event()
    client = LoopwatchClient(bootstrap, on_timeout=config.on_timeout, timeout=config.timeout,
                             **dict(client_options or {}))
    await client.start()
    app = create_app(client, config, metrics=metrics, peers=peers)
    runner = app_runner(app, config)
    signals = _on_signals(stop)
    gauges = asyncio.ensure_future(_outbox_gauges(client, app[METRICS_KEY])) if peers is not None else None
    try:
        if peers is not None:
            await peers.open(app[HANDOVER_KEY])
        await runner.setup()
        for site in [web.SockSite(runner, sock) for sock in socks] if socks else [web.TCPSite(runner, host, port)]:
            await site.start()
        url = f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
        log.info("loopwatch gateway on %s (Kafka %s, timeout %g s, on_timeout=%s)",
                 url, bootstrap, config.timeout, config.on_timeout)
        if ready is not None:
            ready(url)
        await stop.wait()
        held, _ = client.outbox
        log.warning("loopwatch gateway: draining (no new connections; requests in flight are answered; "
                    "%d event(s) wait for Kafka)", held)
    finally:
        await drain(app, runner, config)
        if peers is not None:
            peers.close()
        if gauges is not None:
            gauges.cancel()
        await client.stop()
        signals()
    log.warning("loopwatch gateway: stopped")


async def _outbox_gauges(client: LoopwatchClient, metrics: GatewayMetrics, every_s: float = 1.0) -> None:
    """Keep the outbox gauges of one process of several current (a scrape reads every process's last value)."""
    while True:
        metrics.outbox_events.set(client.outbox[0])
        metrics.outbox_bytes.set(client.outbox[1])
        await asyncio.sleep(every_s)


def run(main: Coroutine[Any, Any, Any], loop: str = "auto") -> Any:
    """Run ``main`` to its end on a new event loop: uvloop's (libuv; about a third less CPU per HTTP request
    than asyncio's own loop, measured) for ``uvloop``, or for ``auto`` when uvloop is installed; else asyncio's.

    Raises:
        ValueError: ``loop`` is not one of :data:`LOOPS`.
        ImportError: ``loop="uvloop"`` and uvloop is not installed.
    """
    if loop not in LOOPS:
        main.close()
        raise ValueError(f"loop must be one of {LOOPS}, got {loop!r}")
    if loop != "asyncio":
        try:
            import uvloop
        except ImportError:
            if loop == "uvloop":
                main.close()
                raise
        else:
            return uvloop.run(main)
    return asyncio.run(main)


def app_runner(app: web.Application, config: GatewayConfig) -> web.AppRunner:
    """The gateway's :class:`aiohttp.web.AppRunner`, with its connection limits.

    ``keepalive_timeout``: aiohttp closes a connection whose request headers are not all in within
    ``config.header_timeout`` of its opening (or of the previous answer on a kept-alive connection):
    the header read timeout. ``shutdown_timeout``: how long a drain waits for the requests in flight
    (their body read and verdict wait, and a second more).
    """
    return web.AppRunner(app, access_log=None, keepalive_timeout=config.header_timeout, lingering_time=LINGER_S,
                         shutdown_timeout=config.timeout + config.body_timeout + 1.0)


async def drain(app: web.Application, runner: web.AppRunner, config: GatewayConfig) -> None:
    """Stop ``runner`` gracefully: refuse new connections and requests, answer those in flight, then clean up.

    The listening sockets close first (a new connection is refused); a new request on a connection
    already open gets 503 (``app[DRAIN_KEY]``); the requests in flight, whose bodies may still be
    arriving, are awaited up to ``config.body_timeout + config.timeout`` s; then aiohttp closes the
    connections (:meth:`aiohttp.web.AppRunner.cleanup`).
    """
    app[DRAIN_KEY].set()
    for site in list(runner.sites):
        await site.stop()
    left = await app[INFLIGHT_KEY].idle(config.body_timeout + config.timeout + 1.0)
    if left:
        log.warning("loopwatch gateway: %d request(s) still in flight after the drain's wait; closing them", left)
    await runner.cleanup()


def _on_signals(stop: asyncio.Event) -> Callable[[], None]:
    """Set ``stop`` on SIGTERM and SIGINT (main thread only); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    taken = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
            taken.append(sig)
        except (NotImplementedError, RuntimeError):  # not on this platform or loop
            pass

    def undo() -> None:
        for sig in taken:
            loop.remove_signal_handler(sig)

    return undo
