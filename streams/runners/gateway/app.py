"""The gateway's aiohttp application: routes, bearer token, body limit, and one shared client.

Routes (docs/runners/gateway.md has the full API):

* ``POST /v1/events``: one event object (the shape of a line of an event file) -> its verdict as
  :func:`~streams.runners.gateway.answers.event_answer` gives it.
* ``POST /v1/hooks/claude-code``, ``POST /v1/hooks/codex``: the runner's hook JSON -> the runner's
  hook output (:mod:`streams.runners.hooks`).
* ``GET /healthz``: 200 ``{"status": "ok", ...}``, or 503 with the reason (Kafka unreachable, client
  not started).
* ``GET /metrics``: Prometheus (:class:`~streams.runners.gateway.metrics.GatewayMetrics`).

Refusals are JSON ``{"error": <reason>}``: 400 for a body that is not a JSON object or an event the
worker would dead-letter (checked before anything is sent, so a refused request never reaches
Kafka), 401 without the bearer token (``/v1/`` routes, when a token is set), 413 for a body over
the limit, 503 when the client is stopped.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from aiohttp import web

from streams.detection import Engine, EventError, SessionState
from streams.runners.client import ClientClosedError, Verdict
from streams.runners.hooks import HookInputError, RunTracker, mapper
from streams.runners.hooks.command import TIMEOUT_HEADER
from streams.wire.codecs import encode_json
from .answers import BadRequest, event_answer, parse_object
from .health import KafkaProbe
from .metrics import CONTENT_TYPE_LATEST, GatewayMetrics

__all__ = ["GatewayConfig", "create_app", "VerdictSource", "DEFAULT_MAX_BODY_BYTES", "METRICS_KEY"]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
HOOK_MARGIN_S = 0.25  # of a command hook's timeout, left for its HTTP round trip to the gateway
MIN_HOOK_WAIT_S = 0.05
METRICS_KEY: web.AppKey = web.AppKey("metrics", GatewayMetrics)


class VerdictSource(Protocol):
    """What the gateway needs of :class:`~streams.runners.client.LoopwatchClient`."""

    async def publish(self, event: Any, timeout: float | None = None) -> "asyncio.Future[Verdict]": ...


@dataclass(frozen=True)
class GatewayConfig:
    """The gateway's settings.

    Attributes:
        timeout: seconds to wait for a verdict (send included), > 0.
        on_timeout: ``allow`` (fail-open) or ``block`` (fail-closed): the decision when no verdict
            comes in time or Kafka refuses the event; also the client's.
        token: the bearer token ``/v1/`` requests must carry; None = no token asked.
        max_body_bytes: the largest request body taken; larger gets 413.
        bootstrap: ``host:port[,host:port]`` the health check probes; None = no probe.
    """

    timeout: float = 2.0
    on_timeout: str = "allow"
    token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    bootstrap: str | None = None


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=encode_json(body), content_type="application/json", headers=headers)


def create_app(client: VerdictSource, config: GatewayConfig, *, probe: KafkaProbe | None = None,
               metrics: GatewayMetrics | None = None) -> web.Application:
    """The gateway application around a started ``client``.

    Arguments:
        client: a started :class:`~streams.runners.client.LoopwatchClient` (or anything with its
            ``publish``), shared by all requests; the caller starts and stops it.
        config: :class:`GatewayConfig`.
        probe: the Kafka reachability check of ``/healthz`` (default: a TCP probe of ``config.bootstrap``).
        metrics: where to count (default: a fresh :class:`GatewayMetrics`).
    Returns:
        An :class:`aiohttp.web.Application`; ``app[METRICS_KEY]`` is its metrics.
    """
    metrics = metrics or GatewayMetrics()
    probe = probe or KafkaProbe(config.bootstrap)
    runs = RunTracker()
    mappers = {name: mapper(name, runs) for name in ("claude-code", "codex")}
    expected = f"Bearer {config.token}".encode() if config.token else None

    @web.middleware
    async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
        endpoint = request.match_info.route.resource.canonical if request.match_info.route.resource else "other"
        if expected is not None and request.path.startswith("/v1/"):
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                metrics.requests.labels(endpoint, "unauthorized").inc()
                return _json(401, {"error": "missing or wrong bearer token (Authorization: Bearer <token>)"},
                             {"WWW-Authenticate": "Bearer"})
        try:
            return await handler(request)
        except BadRequest as exc:
            outcome = {400: "bad_request", 413: "too_large", 503: "unavailable"}.get(exc.status, "bad_request")
            metrics.requests.labels(endpoint, outcome).inc()
            return _json(exc.status, {"error": exc.reason})

    async def body(request: web.Request) -> dict[str, Any]:
        length = request.content_length
        if length is not None and length > config.max_body_bytes:
            raise BadRequest(413, f"body of {length:,} bytes is over the gateway's limit of "
                                  f"{config.max_body_bytes:,} bytes")
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise BadRequest(413, f"body is over the gateway's limit of {config.max_body_bytes:,} bytes") from None
        return parse_object(raw)

    # The client checks an event's fields; whether its args and outcome can be hashed (nesting about
    # 1,000 deep is too deep for Python) only the engine finds out: one pass over an empty state here
    # refuses with 400 what the worker would dead-letter, instead of a wait for the on_timeout answer.
    probe_engine = Engine()

    async def verdict_of(event: dict[str, Any], endpoint: str, timeout: float | None = None) -> dict[str, Any]:
        try:
            probe_engine.process(event, SessionState())
        except EventError as exc:
            raise BadRequest(400, f"invalid event (the worker would dead-letter it): {exc}") from None
        started = time.monotonic()
        try:
            future = await client.publish(event, timeout=timeout or config.timeout)
        except ClientClosedError as exc:
            raise BadRequest(503, f"loopwatch gateway is stopping: {exc}") from None
        except ValueError as exc:  # EventError included: the worker would dead-letter it
            raise BadRequest(400, str(exc)) from None
        verdict = await future
        metrics.roundtrip.labels(endpoint).observe(time.monotonic() - started)
        if verdict.timed_out:
            metrics.timeouts.labels(endpoint).inc()
        return event_answer(verdict, config.on_timeout)

    def outcome_of(answer: dict[str, Any]) -> str:
        if answer.get("waited") is False:
            return "not_waited"
        if answer["timed_out"]:
            return "timeout"
        if answer["verdict"] is None:
            return "send_error"
        return answer["decision"]

    async def events(request: web.Request) -> web.Response:
        event = await body(request)
        answer = await verdict_of(event, "/v1/events")
        metrics.requests.labels("/v1/events", outcome_of(answer)).inc()
        return _json(200, answer)

    def hook_wait(request: web.Request) -> float:
        """How long to wait for a hook call's verdict: the gateway's timeout, shortened to end before the
        calling hook's own (``X-Loopwatch-Timeout``, minus :data:`HOOK_MARGIN_S` for the HTTP round trip), so
        that the gateway, not the hook, is the one that gives up and can mark the call's result."""
        try:
            hook = float(request.headers.get(TIMEOUT_HEADER, ""))
        except ValueError:
            return config.timeout
        if not hook > 0:  # NaN, 0, negative: not a timeout
            return config.timeout
        return max(MIN_HOOK_WAIT_S, min(config.timeout, hook - HOOK_MARGIN_S))

    def hook_handler(runner: str):
        hooks = mappers[runner]
        endpoint = f"/v1/hooks/{runner}"

        async def handle(request: web.Request) -> web.Response:
            payload = await body(request)
            try:
                event = hooks.event(payload)
            except HookInputError as exc:
                raise BadRequest(400, f"not a {runner} hook call: {exc}") from None
            if event is None:
                metrics.requests.labels(endpoint, "none").inc()
                return _json(200, {})
            answer = await verdict_of(event, endpoint, hook_wait(request))
            metrics.requests.labels(endpoint, outcome_of(answer)).inc()
            return _json(200, hooks.answer(payload, answer))

        return handle

    async def healthz(request: web.Request) -> web.Response:
        reason = await probe.problem()
        status = {"status": "ok" if reason is None else "unavailable", "kafka": config.bootstrap,
                  "timeout_s": config.timeout, "on_timeout": config.on_timeout}
        if reason is not None:
            status["reason"] = reason
            return _json(503, status)
        return _json(200, status)

    async def metrics_page(request: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    # aiohttp's own size check backs ours up for bodies sent without a Content-Length (chunked).
    app = web.Application(middlewares=[guard], client_max_size=config.max_body_bytes)
    app[METRICS_KEY] = metrics
    app.router.add_post("/v1/events", events)
    for runner in mappers:
        app.router.add_post(f"/v1/hooks/{runner}", hook_handler(runner))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)
    return app
