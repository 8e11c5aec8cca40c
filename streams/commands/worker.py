"""``loopwatch worker``: run the Faust stream processor (:mod:`streams.worker.app`).

One flag per field of :class:`streams.worker.settings.WorkerSettings`, generated from
the settings model so that flags, environment variables and defaults cannot
drift apart. Precedence: flag, then ``LOOPWATCH_*`` environment, then default.
"""

from __future__ import annotations

import asyncio
import json
import sys
import typing
from typing import Any, Callable

import click
from aiokafka import AIOKafkaClient
from aiokafka.errors import KafkaConnectionError
from pydantic import ValidationError

from streams.wire.brokers import bootstrap_servers
from streams.worker.settings import WorkerSettings

__all__ = ["worker"]


def _click_type(annotation: Any) -> Any:
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return click.Choice([str(a) for a in args], case_sensitive=False)
    if origin is typing.Annotated:
        return _click_type(args[0])
    if annotation is bool:
        return click.BOOL
    if annotation is int:
        return click.INT
    if annotation is float:
        return click.FLOAT
    return click.STRING


def _default_text(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(value)
    if value is None:
        return "unset"
    return str(value)


def _settings_options(func: Callable) -> Callable:
    for name, field in reversed(list(WorkerSettings.model_fields.items())):
        help_text = (f"{field.description} [env: {WorkerSettings.env_name(name)}; "
                     f"default: {_default_text(field.default)}]")
        func = click.option(f"--{name.replace('_', '-')}", name, type=_click_type(field.annotation),
                            default=None, help=help_text)(func)
    return func


@click.command("worker", epilog="""\b
Examples:
  loopwatch worker
  loopwatch worker --key-by session --config ~/.openclaw/openclaw.json
  LOOPWATCH_BROKER=kafka://kafka:19092 loopwatch worker --metrics-port 8000
""")
@_settings_options
def worker(**options: Any) -> None:
    """Run the stream worker: events in, one verdict per event out.

    Consumes the input topics, applies each event to the state of its key with
    OpenClaw's loop detection, and publishes a verdict per event (same key),
    loop events for warnings, blocks and aborts, and dead letters for records
    that are not valid events. Serves Prometheus metrics on /metrics.
    """
    given = {name: value for name, value in options.items() if value is not None}  # the model converts text
    try:
        settings = WorkerSettings(**given)
    except ValidationError as exc:
        raise click.UsageError(_validation_message(exc)) from None

    # faust scans sys.argv for its own --loop*/-L and --datadir when first imported;
    # ours (e.g. --loop-events-topic) are parsed already, so it must not see them.
    sys.argv = sys.argv[:1]
    from streams.worker.app import create_app, partition_mismatch
    from streams.detection import Engine

    from .config_line import announce_config
    from .replay import load_config_or_exit

    engine = Engine(load_config_or_exit(settings.config, strict=settings.config_validate)) if settings.config else None
    bootstrap = bootstrap_servers(settings.broker)
    click.echo(f"loopwatch worker: broker {bootstrap}, app id {settings.app_id}, input "
               f"{','.join(settings.input_topics)} ({settings.partitions} partitions), key by {settings.key_by}, "
               f"store {settings.store}", err=True)
    announce_config("worker", settings.config, engine)
    if settings.metrics_port:
        _check_port_free(settings.metrics_addr, settings.metrics_port)
    try:
        counts = asyncio.run(_partition_counts(bootstrap, settings.input_topics))
    except KafkaConnectionError as exc:  # one line, as produce and tail say it, not Faust's traceback
        raise click.ClickException(f"cannot reach Kafka at {bootstrap}: {exc}") from None
    wrong = {name: count for name, count in counts.items() if count and count != settings.partitions}
    if wrong:  # before Faust creates the changelog, rekey and output topics with --partitions
        raise click.ClickException(partition_mismatch(settings.partitions, wrong))
    loopwatch = create_app(settings, engine)
    from faust.worker import Worker

    try:
        Worker(loopwatch.app, loglevel=settings.log_level, quiet=True).execute_from_commandline()
    except SystemExit as exc:
        _leave_stragglers(exc.code)
        raise


def _leave_stragglers(status: Any) -> None:
    """Exit with ``status`` now if threads other than the main one are left once Faust has stopped.

    A Kafka client thread of Faust's can still be waiting for a broker that is
    down; Python would wait for it at exit (until the worker's shutdown bound
    ends the process), and a Ctrl-C meanwhile would end in a traceback.
    """
    import logging
    import os
    import threading

    left = [t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if not left:
        return
    logging.getLogger(__name__).info("loopwatch: not waiting for %s", ", ".join(left))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status if isinstance(status, int) else 0 if status is None else 1)


def _check_port_free(addr: str, port: int) -> None:
    """Raise ``click.ClickException`` if ``addr:port`` cannot be bound (the /metrics endpoint would be missing)."""
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the metrics server: TIME_WAIT is fine
            sock.bind((addr, port))
    except OSError as exc:
        raise click.ClickException(f"cannot serve metrics on {addr}:{port}: {exc.strerror or exc} "
                                   "(another worker there? give each its own --metrics-port, or 0 for none)") from None


async def _partition_counts(bootstrap: str, topics: list[str]) -> dict[str, int]:
    """Partition count of each topic (0: not created yet). Raises ``KafkaConnectionError`` if no broker answers."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap, client_id="loopwatch-worker-check")
    try:
        await client.bootstrap()
        cluster = await client.fetch_all_metadata()
        return {name: len(cluster.partitions_for_topic(name) or ()) for name in topics}
    finally:
        await client.close()


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"])
        if not field:  # a rule between fields: its message names them
            parts.append(error["msg"].removeprefix("Value error, "))
            continue
        parts.append(f"--{field.replace('_', '-')} ({WorkerSettings.env_name(field)}): {error['msg']}"
                     f" (got {json.dumps(error.get('input'), default=str)})")
    return "; ".join(parts)
