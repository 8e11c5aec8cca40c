"""``loopwatch gateway``: the HTTP verdict gateway in front of Kafka (API: docs/runners/gateway.md)."""

from __future__ import annotations

import logging
import sys

import click

from streams.wire.brokers import bootstrap_option
from streams.wire.keys import KEY_BY

__all__ = ["gateway"]

@click.command("gateway", epilog="""\b
Examples:
  loopwatch gateway                                  # 127.0.0.1:8787, fail-open, 2 s timeout, token asked
  LOOPWATCH_GATEWAY_TOKEN=s3cret loopwatch gateway --on-timeout block
  export LOOPWATCH_GATEWAY_TOKEN=$(loopwatch gateway --print-token)
  curl -s localhost:8787/v1/events -H "Authorization: Bearer $LOOPWATCH_GATEWAY_TOKEN" \\
       -H 'Content-Type: application/json' -d '{"type":"tool_call","run_id":"r1","session_id":"s1",
       "tool_call_id":"c1","tool_name":"read","args":{"path":"a"},"outcome_follows":true}'
""")
@bootstrap_option()
@click.option("--host", default="127.0.0.1", show_default=True, envvar="LOOPWATCH_GATEWAY_HOST", show_envvar=True,
              help="Address to listen on (0.0.0.0 serves other machines).")
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
@click.option("--no-token", is_flag=True,
              help="Ask no bearer token (any local process can then send events). By default the token is "
                   "LOOPWATCH_GATEWAY_TOKEN, else the token file (made on first start).")
@click.option("--print-token", is_flag=True,
              help="Print the token (making the token file when there is none) and exit.")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN",
              envvar="LOOPWATCH_GATEWAY_ALLOW_ORIGINS", show_envvar=True,
              help="An Origin (e.g. http://localhost:3000) whose requests are taken; repeatable (the env var: "
                   "space-separated). Without it a request with any Origin header (a web page's) gets 403.")
@click.option("--header-timeout", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
              help="Seconds a connection may take to send a request's headers; slower is closed.")
@click.option("--body-timeout", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
              help="Seconds to read a request's body; slower gets 408 and the connection closed.")
@click.option("--outbox-events", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Events kept while Kafka has not acknowledged them (a broker down or hung); beyond, 503.")
@click.option("--outbox-mb", type=click.FloatRange(min=0, min_open=True), default=64.0, show_default=True,
              help="The same bound in MiB of encoded events.")
@click.option("--drain-timeout", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
              help="On SIGTERM/SIGINT, after the requests in flight are answered: seconds to wait for Kafka "
                   "to take the kept events.")
@click.option("--events-topic", default="loopwatch.events", show_default=True, help="The worker's input topic.")
@click.option("--verdicts-topic", default="loopwatch.verdicts", show_default=True, help="The worker's verdicts topic.")
@click.option("--key-by", type=click.Choice(KEY_BY), default="run", show_default=True,
              help="Record key of each event: 'run' (per-run detection state) or 'session' (OpenClaw's "
                   "session-level state). Use the one your other producers use.")
@click.option("--loop", type=click.Choice(["auto", "uvloop", "asyncio"]), default="auto", show_default=True,
              envvar="LOOPWATCH_GATEWAY_LOOP", show_envvar=True,
              help="Event loop: uvloop (less CPU per request), asyncio's own, or auto (uvloop when installed).")
@click.option("--processes", type=click.IntRange(min=1), default=1, show_default=True,
              envvar="LOOPWATCH_GATEWAY_PROCESSES", show_envvar=True,
              help="Gateway processes sharing the port (Linux): each answers the sessions it owns, whichever "
                   "process reads their requests. More than one when one core is not enough.")
def gateway(bootstrap: str, host: str, port: int, timeout: float, on_timeout: str, max_body_bytes: int,
            no_token: bool, print_token: bool, allow_origins: tuple[str, ...], header_timeout: float,
            body_timeout: float, outbox_events: int, outbox_mb: float, drain_timeout: float,
            events_topic: str, verdicts_topic: str, key_by: str, loop: str, processes: int) -> None:
    """Serve verdicts over HTTP for runners that cannot hold a Kafka client.

    POST /v1/events takes one event (the shape of a line of an event file)
    and answers its verdict; POST /v1/hooks/claude-code and
    /v1/hooks/codex take those runners' hook JSON and answer in their hook
    output format; GET /healthz (liveness), GET /readyz (verdicts come
    back) and GET /metrics (Prometheus). One Kafka producer and verdict
    reader serve every request. /v1/ requests need the bearer token
    (LOOPWATCH_GATEWAY_TOKEN, else the token file, made on first start;
    --no-token turns it off) and Content-Type: application/json; a request
    with an Origin header not allowed by --allow-origin is refused. Events
    Kafka has not acknowledged are kept (bounded) and sent once it answers.
    With Kafka unreachable it starts all the same and answers by
    --on-timeout until it connects. SIGTERM drains: requests in flight are
    answered, new ones refused. Exit status 1 when Kafka answers without the
    verdicts topic (is the worker running?), the port is taken, or the token
    file is unusable.
    """
    from aiokafka.errors import KafkaConnectionError

    from streams.runners.client import TopicNotFoundError
    from streams.runners.gateway import GatewayConfig, run, serve

    from streams.runners.token import TokenFileError, gateway_token

    if print_token:
        try:
            click.echo(gateway_token()[0])
        except TokenFileError as exc:
            click.echo(f"loopwatch gateway: {exc}", err=True)
            sys.exit(1)
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    socks = _listen(host, port, processes)  # first: a start that cannot listen leaves nothing behind
    token: str | None = None
    if no_token:
        click.echo("loopwatch gateway: WARNING: --no-token: no bearer token is asked; every process on "
                   f"{'this machine' if host in ('127.0.0.1', 'localhost', '::1') else 'the network'} can send "
                   "events and so block this fleet's tool calls", err=True)
    else:
        try:
            token, source = gateway_token()
        except TokenFileError as exc:
            for sock in socks:
                sock.close()
            click.echo(f"loopwatch gateway: {exc} (or run with --no-token)", err=True)
            sys.exit(1)
        click.echo(f"loopwatch gateway: bearer token from {source}", err=True)
    config = GatewayConfig(timeout=timeout, on_timeout=on_timeout, token=token, max_body_bytes=max_body_bytes,
                           bootstrap=bootstrap, allowed_origins=tuple(allow_origins),
                           header_timeout=header_timeout, body_timeout=body_timeout)
    options = {"events_topic": events_topic, "verdicts_topic": verdicts_topic, "key_by": key_by,
               "outbox_events": outbox_events, "outbox_bytes": int(outbox_mb * 1024 * 1024),
               "stop_timeout": drain_timeout}

    def ready(url: str) -> None:
        click.echo(f"loopwatch gateway: {url} (Kafka {bootstrap}, timeout {timeout:g} s, on_timeout={on_timeout}"
                   f"{', token required' if token else ', NO token'}"
                   f"{f', {processes} processes' if processes > 1 else ''})", err=True)

    if processes > 1:
        from streams.runners.gateway.processes import serve_processes

        sys.exit(serve_processes(processes, bootstrap, config, host=host, port=port, client_options=options,
                                 loop=loop, ready=ready, socks=socks))
    try:
        run(serve(bootstrap, config, host=host, port=port, client_options=options, ready=ready, socks=socks), loop)
    except KeyboardInterrupt:
        pass
    except (KafkaConnectionError, TopicNotFoundError, OSError) as exc:
        click.echo(f"loopwatch gateway: {exc}", err=True)
        sys.exit(1)


def _listen(host: str, port: int, processes: int) -> list:
    """The gateway's listening sockets (:mod:`streams.runners.gateway.listen`); exit 1 with one line
    naming the port and what to do when it cannot listen there."""
    from streams.runners.gateway.listen import ProcessesUnsupported, bind_problem, bound, listeners

    try:
        return listeners(host, port, processes) if processes > 1 else bound(host, port)
    except ProcessesUnsupported as exc:
        click.echo(f"loopwatch gateway: {exc}", err=True)
    except OSError as exc:
        click.echo(f"loopwatch gateway: {bind_problem(host, port, exc)}", err=True)
    sys.exit(1)
