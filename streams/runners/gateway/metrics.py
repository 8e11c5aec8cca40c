"""The gateway's Prometheus metrics, in a registry of its own (one per gateway app)."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client import CONTENT_TYPE_LATEST

__all__ = ["GatewayMetrics", "CONTENT_TYPE_LATEST"]

# Round trips of a healthy pipeline are milliseconds; the top buckets catch timeouts (default 2 s).
_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0)


class GatewayMetrics:
    """Counters and the latency histogram of one gateway.

    ``multiprocess_dir``: this is one process of a gateway of several (:mod:`.processes`), each counting
    into files of that folder (prometheus_client's multiprocess mode, which this switches the process
    to: call it in that process only, before any other metric is made); :meth:`render` sums them.

    * ``loopwatch_gateway_requests_total{endpoint, outcome}``: every request; ``outcome`` is the
      decision (``allow``, ``warn``, ``block``, ``abort``), ``none`` (a hook call that stands for no
      event), ``timeout``, ``send_error``, or the refusal (``bad_request``, ``unauthorized``,
      ``too_large``, ``unavailable``, ``forbidden``, ``slow_client``, ``unsupported_media_type``).
    * ``loopwatch_gateway_roundtrip_seconds{endpoint}``: from the request read to its verdict (events
      sent to Kafka only), timeouts included.
    * ``loopwatch_gateway_timeouts_total{endpoint}``: verdicts that did not come in time.
    * ``loopwatch_gateway_outbox_events``, ``loopwatch_gateway_outbox_bytes``: events taken and not yet
      acknowledged by Kafka (the client's outbox; near its bound, new events get 503).
    """

    def __init__(self, multiprocess_dir: str | None = None) -> None:
        if multiprocess_dir is not None:  # one process of several (:mod:`.processes`): values in shared files
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = multiprocess_dir
            values.ValueClass = values.MultiProcessValue()
        self.multiprocess_dir = multiprocess_dir
        self.registry = CollectorRegistry()
        self.requests = Counter("loopwatch_gateway_requests", "Gateway requests by endpoint and outcome",
                                ["endpoint", "outcome"], registry=self.registry)
        self.roundtrip = Histogram("loopwatch_gateway_roundtrip_seconds",
                                   "Seconds from a request's event to its verdict (Kafka round trip)",
                                   ["endpoint"], buckets=_BUCKETS, registry=self.registry)
        self.timeouts = Counter("loopwatch_gateway_timeouts", "Verdicts that did not come within the timeout",
                                ["endpoint"], registry=self.registry)
        self.outbox_events = Gauge("loopwatch_gateway_outbox_events", "Events taken, not yet acknowledged by Kafka",
                                   registry=self.registry, multiprocess_mode="livesum")
        self.outbox_bytes = Gauge("loopwatch_gateway_outbox_bytes", "Bytes of the events taken, not yet acknowledged "
                                  "by Kafka", registry=self.registry, multiprocess_mode="livesum")

    OUTCOMES = ("allow", "warn", "block", "abort", "none", "not_waited", "timeout", "send_error", "bad_request",
                "unauthorized", "too_large", "unavailable")

    def initialise(self, endpoints: list[str]) -> None:
        """Create every ``endpoint`` x outcome series at 0, so that a scrape shows them from the start
        (an alert on ``increase()`` then sees the first timeout or refusal, not only the second)."""
        for endpoint in endpoints:
            self.timeouts.labels(endpoint)
            for outcome in self.OUTCOMES:
                self.requests.labels(endpoint, outcome)

    def render(self) -> bytes:
        """The exposition text; for one process of several, the sum over the gateway's processes (the outbox
        gauges over those still running), whichever process a scrape reaches."""
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self.multiprocess_dir)
        return generate_latest(registry)
