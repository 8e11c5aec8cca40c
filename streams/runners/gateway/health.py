"""Liveness and readiness: is Kafka reachable (a TCP connection, cached for a second), do verdicts come back."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from streams.wire import verdicts

__all__ = ["KafkaProbe", "Readiness"]


class KafkaProbe:
    """Answers ``/healthz``: None when a bootstrap server accepts a TCP connection, else the reason.

    A connection, not a Kafka request: it says the broker's port answers, which is what an
    operator's health check needs to tell "Kafka down" from "gateway down"; whether the worker is
    keeping up shows in the gateway's timeouts (``/metrics``). Results are kept ``cache_s`` seconds,
    so a health check hammered by a load balancer does not open a connection per request.

    Arguments:
        bootstrap: ``host:port[,host:port]``; None = nothing to probe (always healthy).
        connect_timeout: seconds per connection attempt.
    """

    def __init__(self, bootstrap: str | None, connect_timeout: float = 1.0, cache_s: float = 1.0) -> None:
        self.servers = [s.strip() for s in (bootstrap or "").split(",") if s.strip()]
        self.connect_timeout = connect_timeout
        self.cache_s = cache_s
        self._checked_at = -1e9
        self._last: str | None = None

    async def problem(self) -> str | None:
        """None when Kafka is reachable, else why not (e.g. ``Kafka unreachable at 127.0.0.1:9:
        ConnectionRefusedError``)."""
        if not self.servers or time.monotonic() - self._checked_at < self.cache_s:
            return self._last if self.servers else None
        errors = []
        for server in self.servers:
            host, _, port = server.rpartition(":")
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)),
                                                   self.connect_timeout)
            except (OSError, asyncio.TimeoutError, ValueError) as exc:
                errors.append(f"{server}: {type(exc).__name__}")
                continue
            writer.close()
            self._last = None
            break
        else:
            self._last = "Kafka unreachable at " + ", ".join(errors)
        self._checked_at = time.monotonic()
        return self._last


class Readiness:
    """Answers ``/readyz``: None while verdicts come back, else the reason.

    Verdicts come back when the last event sent got its verdict (not a timeout) within ``fresh_s``
    seconds. Without one that recent (no traffic, or the last one timed out), one probe event is
    sent and its verdict awaited (``timeout`` s); the probe's outcome counts as traffic, so a
    load balancer polling ``/readyz`` sends at most one probe per ``fresh_s`` while idle. The probe
    is a ``compaction_retry`` of run and session :data:`PROBE_RUN` (its verdict arrives like any
    other; it arms that session's post-compaction guard, which no real call meets).

    Arguments:
        publish: ``async publish(event, timeout) -> Future[Verdict]`` (the gateway's client).
        timeout: seconds a probe waits for its verdict.
        fresh_s: how long a verdict proves readiness.
    """

    PROBE_RUN = verdicts.PROBE_RUN

    def __init__(self, publish: Any, timeout: float, fresh_s: float = 10.0) -> None:
        self._publish = publish
        self.timeout = timeout
        self.fresh_s = fresh_s
        self._verdict_at = -1e9  # monotonic time of the last verdict that came
        self._problem: str | None = "no verdict yet"
        self._probe: asyncio.Future | None = None

    def saw(self, verdict: Any) -> None:
        """Count an answered event: its :class:`~streams.runners.client.Verdict` came or timed out (a send
        refused by Kafka, ``error`` without a timeout, says nothing about the worker and is not counted)."""
        if verdict.record is not None:
            self._verdict_at = time.monotonic()
            self._problem = None
        elif verdict.timed_out:
            self._problem = (f"the last event's verdict did not come within {verdict.latency_s:.3g} s "
                             "(is the loopwatch worker running and keeping up?)")
        elif verdict.error is not None and "not connected" in verdict.error:
            self._problem = verdict.error

    async def problem(self) -> str | None:
        """None when a verdict came within ``fresh_s`` and none timed out since; else the result of a probe."""
        if self._problem is None and time.monotonic() - self._verdict_at < self.fresh_s:
            return None
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._send_probe())
        return await asyncio.shield(self._probe)

    async def _send_probe(self) -> str | None:
        event = {"type": "compaction_retry", "run_id": self.PROBE_RUN, "session_id": self.PROBE_RUN,
                 "agent_id": "loopwatch-gateway"}
        try:
            verdict = await (await self._publish(event, timeout=self.timeout))
        except Exception as exc:  # stopped client, full outbox: not ready, and why
            self._problem = f"probe event not sent: {type(exc).__name__}: {exc}"
            return self._problem
        self.saw(verdict)
        if verdict.record is None and self._problem is None:
            self._problem = f"probe event not sent: {verdict.error}"
        return self._problem
