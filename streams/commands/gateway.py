"""``loopwatch gateway``: the HTTP verdict gateway in front of Kafka (API: docs/runners/gateway.md)."""

from __future__ import annotations

import asyncio
import logging
import os
import sys

import click

from streams.wire.brokers import bootstrap_option
from streams.worker.keys import KEY_BY

__all__ = ["gateway"]

TOKEN_ENV = "LOOPWATCH_GATEWAY_TOKEN"


@click.command("gateway", epilog="""\b
Examples:
  loopwatch gateway                                  # 127.0.0.1:8787, fail-open, 2 s timeout
  LOOPWATCH_GATEWAY_TOKEN=s3cret loopwatch gateway --on-timeout block
  curl -s localhost:8787/v1/events -d '{"type":"tool_call","run_id":"r1","session_id":"s1",
       "tool_call_id":"c1","tool_name":"read","args":{"path":"a"},"outcome_follows":true}'
""")
@bootstrap_option()
@click.option("--host", default="127.0.0.1", show_default=True, envvar="LOOPWATCH_GATEWAY_HOST", show_envvar=True,
              help="Address to listen on (0.0.0.0 serves other machines: set a token then).")
@click.option("--port", type=click.IntRange(1, 65535), default=8787, show_default=True,
              envvar="LOOPWATCH_GATEWAY_PORT", show_envvar=True, help="Port to listen on.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=2.0, show_default=True,
              envvar="LOOPWATCH_GATEWAY_TIMEOUT", show_envvar=True,
              help="Seconds to wait for a verdict (send included) before answering with --on-timeout.")
@click.option("--on-timeout", type=click.Choice(["allow", "block"]), default="allow", show_default=True,
              envvar="LOOPWATCH_GATEWAY_ON_TIMEOUT", show_envvar=True,
              help="Decision when no verdict comes in time or Kafka refuses the event: allow (fail-open) "
                   "or block (fail-closed). Every answer says which.")
@click.option("--max-body-bytes", type=click.IntRange(min=1), default=1024 * 1024, show_default=True,
              help="Largest request body taken; a larger one gets 413.")
@click.option("--events-topic", default="loopwatch.events", show_default=True, help="The worker's input topic.")
@click.option("--verdicts-topic", default="loopwatch.verdicts", show_default=True, help="The worker's verdicts topic.")
@click.option("--key-by", type=click.Choice(KEY_BY), default="run", show_default=True,
              help="Record key of each event: 'run' (per-run detection state) or 'session' (OpenClaw's "
                   "session-level state). Use the one your other producers use.")
def gateway(bootstrap: str, host: str, port: int, timeout: float, on_timeout: str, max_body_bytes: int,
            events_topic: str, verdicts_topic: str, key_by: str) -> None:
    """Serve verdicts over HTTP for runners that cannot hold a Kafka client.

    POST /v1/events takes one event (the shape of a line of an event file)
    and answers its verdict; POST /v1/hooks/claude-code and
    /v1/hooks/codex take those runners' hook JSON and answer in their hook
    output format; GET /healthz and GET /metrics (Prometheus). One Kafka
    producer and verdict reader serve every request. A bearer token is
    asked of /v1/ requests when LOOPWATCH_GATEWAY_TOKEN is set. With Kafka
    unreachable it starts all the same and answers by --on-timeout until it
    connects. Exit status 1 when Kafka answers without the verdicts topic
    (is the worker running?), or the port is taken.
    """
    from aiokafka.errors import KafkaConnectionError

    from streams.runners.client import TopicNotFoundError
    from streams.runners.gateway import GatewayConfig, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token = os.environ.get(TOKEN_ENV) or None
    if token is None and host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"loopwatch gateway: listening on {host} without a token (set {TOKEN_ENV})", err=True)
    config = GatewayConfig(timeout=timeout, on_timeout=on_timeout, token=token, max_body_bytes=max_body_bytes,
                           bootstrap=bootstrap)
    options = {"events_topic": events_topic, "verdicts_topic": verdicts_topic, "key_by": key_by}

    def ready(url: str) -> None:
        click.echo(f"loopwatch gateway: {url} (Kafka {bootstrap}, timeout {timeout:g} s, on_timeout={on_timeout}"
                   f"{', token required' if token else ''})", err=True)

    try:
        asyncio.run(serve(bootstrap, config, host=host, port=port, client_options=options, ready=ready))
    except KeyboardInterrupt:
        pass
    except (KafkaConnectionError, TopicNotFoundError, OSError) as exc:
        click.echo(f"loopwatch gateway: {exc}", err=True)
        sys.exit(1)
