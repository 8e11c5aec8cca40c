"""The gateway's aiohttp application: routes, the doors (token, origin, content type, limits), one shared client.

Routes (docs/runners/gateway.md has the full API):

* ``POST /v1/events``: one event object (the shape of a line of an event file) -> its verdict as
  :func:`~streams.runners.gateway.answers.event_answer` gives it.
* ``POST /v1/hooks/claude-code``, ``POST /v1/hooks/codex``: the runner's hook JSON -> the runner's
  hook output (:mod:`streams.runners.hooks`).
* ``GET /healthz``: liveness, 200 ``{"status": "ok", ...}`` while the gateway serves (Kafka's
  reachability is a field, not the status).
* ``GET /readyz``: 200 while verdicts come back (:class:`~streams.runners.gateway.health.Readiness`),
  else 503 with the reason (Kafka unreachable, the worker not answering, draining).
* ``GET /metrics``: Prometheus (:class:`~streams.runners.gateway.metrics.GatewayMetrics`).

The doors, checked before a body is read, in this order (every refusal is JSON ``{"error": <reason>}``):
an ``Origin`` header not in ``allowed_origins`` gets 403 (browsers send one on every cross-site
POST; runners send none), a ``/v1/`` request without the bearer token 401 (when a token is set), a
POST whose ``Content-Type`` is not ``application/json`` 415 (a web page can send ``text/plain``
without asking the browser's CORS preflight), and while draining 503. Then: a body over the limit
413, one not read within ``body_timeout`` 408 (the connection is closed), a body that is not a JSON
object (``1e999``, ``NaN`` included) or an event the worker would dead-letter 400 (checked before
anything is sent, so a refused request never reaches Kafka), a full outbox 503
(:class:`~streams.runners.client.OutboxFullError`: the event is not taken, the runner's own
fail-open/fail-closed choice applies).

One process of several (``peers``, :mod:`.peers`): a request that passed the doors and whose
session another process owns is handed to that process, and its answer sent back as it gave it.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from aiohttp import web

from streams.detection import Engine, EventError, SessionState
from streams.runners.client import ClientClosedError, OutboxFullError, Verdict
from streams.runners.hooks import HookInputError, RunTracker, mapper
from streams.runners.hooks.command import TIMEOUT_HEADER
from streams.wire.codecs import encode_json
from .answers import BadRequest, event_answer, parse_object
from .health import KafkaProbe, Readiness
from .metrics import CONTENT_TYPE_LATEST, GatewayMetrics
from .peers import Peers

__all__ = ["GatewayConfig", "create_app", "VerdictSource", "DEFAULT_MAX_BODY_BYTES", "METRICS_KEY", "DRAIN_KEY",
           "INFLIGHT_KEY", "InFlight", "PEERS_KEY", "HANDOVER_KEY"]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
HOOK_MARGIN_S = 0.25  # of a command hook's timeout, left for its HTTP round trip to the gateway
MIN_HOOK_WAIT_S = 0.05
# A JSON body nests at most as deep as it has brackets; a hook's mapping adds a few levels. Python's
# recursion limit (1,000 frames) is what an event too deep to hash meets: far above this.
SHALLOW_BRACKETS = 200
METRICS_KEY: web.AppKey = web.AppKey("metrics", GatewayMetrics)
DRAIN_KEY: web.AppKey = web.AppKey("draining", asyncio.Event)
"""``app[DRAIN_KEY].set()`` starts a drain: new requests get 503 (connection closed), those in flight are answered."""


class InFlight:
    """The requests being handled (headers in, answer not yet sent); :meth:`idle` waits for none."""

    def __init__(self) -> None:
        self.count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        self.count += 1
        self._idle.clear()

    def leave(self) -> None:
        self.count -= 1
        if not self.count:
            self._idle.set()

    async def idle(self, timeout: float) -> int:
        """Wait up to ``timeout`` s for no request in flight; the number still in flight."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        return self.count


INFLIGHT_KEY: web.AppKey = web.AppKey("in_flight", InFlight)
PEERS_KEY: web.AppKey = web.AppKey("peers", Peers)
HANDOVER_KEY: web.AppKey = web.AppKey("handover", object)


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
        token: the bearer token ``/v1/`` requests must carry; None = no token asked (the command
            line makes one unless told ``--no-token``: :mod:`streams.runners.token`).
        max_body_bytes: the largest request body taken; larger gets 413.
        bootstrap: ``host:port[,host:port]`` the health check probes; None = no probe.
        allowed_origins: the ``Origin`` header values taken (e.g. ``http://localhost:3000``); a request
            with any other ``Origin`` gets 403. Empty (the default): a request with any ``Origin`` is
            refused; runners send none.
        body_timeout: seconds to read a request's body once its headers are in; slower gets 408 and
            the connection closed.
        header_timeout: seconds a connection may take to send a request's headers (from its opening,
            or from the previous answer on a kept-alive connection) before it is closed; applied by
            :func:`~streams.runners.gateway.serve.serve` (aiohttp's ``keepalive_timeout``).
        ready_fresh_s: how long a verdict proves readiness (``/readyz``) before a probe is sent.
    """

    timeout: float = 2.0
    on_timeout: str = "allow"
    token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    bootstrap: str | None = None
    allowed_origins: tuple[str, ...] = ()
    body_timeout: float = 10.0
    header_timeout: float = 10.0
    ready_fresh_s: float = 10.0


_OUTCOMES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 408: "slow_client", 413: "too_large",
             415: "unsupported_media_type", 503: "unavailable"}


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=encode_json(body), content_type="application/json", headers=headers)


def create_app(client: VerdictSource, config: GatewayConfig, *, probe: KafkaProbe | None = None,
               metrics: GatewayMetrics | None = None, peers: Peers | None = None) -> web.Application:
    """The gateway application around a started ``client``.

    Arguments:
        client: a started :class:`~streams.runners.client.LoopwatchClient` (or anything with its
            ``publish``), shared by all requests; the caller starts and stops it.
        config: :class:`GatewayConfig`.
        probe: the Kafka reachability check of ``/healthz`` and ``/readyz`` (default: a TCP probe of
            ``config.bootstrap``).
        metrics: where to count (default: a fresh :class:`GatewayMetrics`).
        peers: the links to the other processes of a gateway of several (:mod:`.peers`): a request of a
            session another process owns is handed to it; None: one process answers everything.
    Returns:
        An :class:`aiohttp.web.Application`; ``app[METRICS_KEY]`` is its metrics, ``app[DRAIN_KEY]``
        the event that starts a drain; with ``peers``, ``app[HANDOVER_KEY]`` answers the requests the
        other processes hand over (to pass to :meth:`Peers.open`).
    """
    metrics = metrics or GatewayMetrics()
    probe = probe or KafkaProbe(config.bootstrap)
    readiness = Readiness(client.publish, config.timeout, config.ready_fresh_s)
    draining = asyncio.Event()
    in_flight = InFlight()
    runs = RunTracker()
    mappers = {name: mapper(name, runs) for name in ("claude-code", "codex")}
    expected = f"Bearer {config.token}".encode() if config.token else None
    origins = frozenset(origin.rstrip("/").lower() for origin in config.allowed_origins)

    def door(request: web.Request) -> BadRequest | None:
        """The first door ``request`` does not pass (see the module docstring), else None."""
        origin = request.headers.get("Origin")
        if origin is not None and origin.rstrip("/").lower() not in origins:
            return BadRequest(403, f"cross-origin request refused: Origin {origin[:200]!r} is not allowed "
                                   "(loopwatch gateway --allow-origin ORIGIN to allow one)")
        if expected is not None and request.path.startswith("/v1/"):
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return BadRequest(401, "missing or wrong bearer token (Authorization: Bearer <token>; the gateway "
                                       "prints where its token file is when it starts)")
        if request.method == "POST" and request.content_type != "application/json":
            given = request.headers.get("Content-Type")
            return BadRequest(415, "Content-Type must be application/json, got "
                                   + (repr(given[:100]) if given is not None else "none"))
        if draining.is_set() and request.path != "/healthz":
            return BadRequest(503, "loopwatch gateway is draining (shutting down): send to another gateway "
                                   "or retry once it is back", close=True)
        return None

    @web.middleware
    async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
        endpoint = request.match_info.route.resource.canonical if request.match_info.route.resource else "other"
        in_flight.enter()
        try:
            refused = door(request)
            if refused is not None:
                raise refused
            return await handler(request)
        except BadRequest as exc:
            metrics.requests.labels(endpoint, _OUTCOMES.get(exc.status, "bad_request")).inc()
            response = _json(exc.status, {"error": exc.reason},
                             {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None)
            if exc.close:
                response.force_close()
            return response
        finally:
            in_flight.leave()

    async def body(request: web.Request) -> bytes:
        length = request.content_length
        if length is not None and length > config.max_body_bytes:
            raise BadRequest(413, f"body of {length:,} bytes is over the gateway's limit of "
                                  f"{config.max_body_bytes:,} bytes")
        try:
            if request.content.is_eof():  # all of it came with the headers (the usual small body): no timer
                raw = await request.read()
            else:
                async with asyncio.timeout(config.body_timeout):  # no task of its own, as wait_for would make
                    raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise BadRequest(413, f"body is over the gateway's limit of {config.max_body_bytes:,} bytes") from None
        except TimeoutError:
            raise BadRequest(408, f"body not received within {config.body_timeout:g} s", close=True) from None
        return raw

    # The client checks an event's fields; whether its args and outcome can be hashed (nesting about
    # 1,000 deep is too deep for Python) only the engine finds out: one pass over an empty state here
    # refuses with 400 what the worker would dead-letter, instead of a wait for the on_timeout answer.
    # A body with fewer than SHALLOW_BRACKETS brackets cannot nest that deep: it is not probed.
    probe_engine = Engine()

    async def verdict_of(event: dict[str, Any], endpoint: str, timeout: float | None = None,
                         shallow: bool = False) -> dict[str, Any]:
        if not shallow:
            try:
                probe_engine.process(event, SessionState())
            except EventError as exc:
                raise BadRequest(400, f"invalid event (the worker would dead-letter it): {exc}") from None
        started = time.monotonic()
        try:
            future = await client.publish(event, timeout=timeout or config.timeout)
        except ClientClosedError as exc:
            raise BadRequest(503, f"loopwatch gateway is stopping: {exc}") from None
        except OutboxFullError as exc:
            raise BadRequest(503, str(exc)) from None
        except ValueError as exc:  # EventError included: the worker would dead-letter it
            raise BadRequest(400, str(exc)) from None
        verdict = await future
        readiness.saw(verdict)
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

    async def event_call(payload: dict[str, Any], wait: float | None, shallow: bool) -> dict[str, Any]:
        answer = await verdict_of(payload, "/v1/events", shallow=shallow)
        metrics.requests.labels("/v1/events", outcome_of(answer)).inc()
        return answer

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

    def hook_call(runner: str) -> Callable[[dict[str, Any], float | None, bool], Awaitable[dict[str, Any]]]:
        hooks = mappers[runner]
        endpoint = f"/v1/hooks/{runner}"

        async def handle(payload: dict[str, Any], wait: float | None, shallow: bool) -> dict[str, Any]:
            try:
                event = hooks.event(payload)
            except HookInputError as exc:
                raise BadRequest(400, f"not a {runner} hook call: {exc}") from None
            if event is None:  # no event, but the answer may still stop the runner (an ended run)
                metrics.requests.labels(endpoint, "none").inc()
                return hooks.answer(payload, None)
            answer = await verdict_of(event, endpoint, wait, shallow)
            metrics.requests.labels(endpoint, outcome_of(answer)).inc()
            return hooks.answer(payload, answer)

        return handle

    calls = {"/v1/events": event_call, **{f"/v1/hooks/{runner}": hook_call(runner) for runner in mappers}}

    async def answer(endpoint: str, payload: dict[str, Any], wait: float | None, raw: bytes) -> tuple[int, bytes]:
        """Answer a POST to ``endpoint`` here, its doors passed (``raw`` its body, ``payload`` parsed):
        ``(status, JSON body)``, a refusal counted."""
        shallow = raw.count(b"[") + raw.count(b"{") < SHALLOW_BRACKETS
        try:
            return 200, encode_json(await calls[endpoint](payload, wait, shallow))
        except BadRequest as exc:
            metrics.requests.labels(endpoint, _OUTCOMES.get(exc.status, "bad_request")).inc()
            return exc.status, encode_json({"error": exc.reason})

    async def handed_over(endpoint: str, wait: float | None, raw: bytes) -> tuple[int, bytes]:
        """Answer a request another process of this gateway read (:mod:`.peers`): this process owns its session."""
        in_flight.enter()
        try:
            return await answer(endpoint, parse_object(raw), wait, raw)
        except BadRequest as exc:
            return exc.status, encode_json({"error": exc.reason})
        finally:
            in_flight.leave()

    async def post(request: web.Request) -> web.Response:
        endpoint = request.match_info.route.resource.canonical
        raw = await body(request)
        payload = parse_object(raw)
        wait = None if endpoint == "/v1/events" else hook_wait(request)
        owner = peers.owner(payload) if peers is not None else None
        if owner is not None and owner != peers.index:
            status, data = await peers.ask(owner, endpoint, wait, raw)
        else:
            status, data = await answer(endpoint, payload, wait, raw)
        return web.Response(status=status, body=data, content_type="application/json")

    def status(**fields: Any) -> dict[str, Any]:
        return {**fields, "kafka": config.bootstrap, "timeout_s": config.timeout, "on_timeout": config.on_timeout,
                "draining": draining.is_set()}

    async def healthz(request: web.Request) -> web.Response:
        # Liveness: the gateway answers. Kafka's state is readiness (a restart of the gateway does not fix it).
        kafka = await probe.problem()
        return _json(200, status(status="ok", kafka_problem=kafka))

    async def readyz(request: web.Request) -> web.Response:
        reason = await probe.problem() or await readiness.problem()
        if reason is None:
            return _json(200, status(status="ready"))
        return _json(503, status(status="unavailable", reason=reason))

    async def metrics_page(request: web.Request) -> web.Response:
        outbox = getattr(client, "outbox", None)  # (events, bytes) of a LoopwatchClient
        if outbox is not None:
            metrics.outbox_events.set(outbox[0])
            metrics.outbox_bytes.set(outbox[1])
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    # aiohttp's own size check backs ours up for bodies sent without a Content-Length (chunked).
    app = web.Application(middlewares=[guard], client_max_size=config.max_body_bytes)
    app[METRICS_KEY] = metrics
    app[DRAIN_KEY] = draining
    app[INFLIGHT_KEY] = in_flight
    for endpoint in calls:
        app.router.add_post(endpoint, post)
    metrics.initialise(list(calls))
    if peers is not None:
        app[PEERS_KEY] = peers
        app[HANDOVER_KEY] = handed_over
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_page)
    return app
