"""Is Kafka reachable? A TCP connection to a bootstrap server, cached for a second."""

from __future__ import annotations

import asyncio
import time

__all__ = ["KafkaProbe"]


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
