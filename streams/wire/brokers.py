"""Kafka bootstrap addresses, as every command and the client take them: checked before any connection.

Which broker a command talks to when it is given none, the same for every command that talks to
Kafka (``worker``, ``gateway``, ``produce``, ``tail``, ``fleet``, ``demo``), first match wins
(:func:`default_bootstrap`):

1. ``--bootstrap`` (the worker: also ``--broker``, then ``LOOPWATCH_BROKER``);
2. ``LOOPWATCH_BOOTSTRAP``;
3. ``127.0.0.1:$KAFKA_PORT`` when ``KAFKA_PORT`` is exported (the variable ``deploy/kafka/kafka.sh``
   and ``make run``/``make test`` take the local broker's port from);
4. ``127.0.0.1:9092``.

Kafka clients take ``host:port`` entries; one without a port quietly means
port 9092, so a mistyped address would reach whatever broker listens there.
Here an entry needs its port, and a port that is not a number in 1-65535 is
an error naming the entry instead of a traceback from the socket layer.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import click

__all__ = ["DEFAULT_BOOTSTRAP", "BOOTSTRAP_ENV", "DEFAULT_SHOWN", "local_bootstrap", "default_bootstrap",
           "bootstrap_servers", "bootstrap_option"]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "LOOPWATCH_BOOTSTRAP"
DEFAULT_SHOWN = "127.0.0.1:$KAFKA_PORT when KAFKA_PORT is exported, else 127.0.0.1:9092"
"""How ``--help`` gives the default of ``--bootstrap`` (after its variable, ``LOOPWATCH_BOOTSTRAP``)."""


def local_bootstrap(env: Mapping[str, str] | None = None) -> str:
    """The local broker: ``127.0.0.1:$KAFKA_PORT`` when ``KAFKA_PORT`` is a port number, else :data:`DEFAULT_BOOTSTRAP`."""
    port = (os.environ if env is None else env).get("KAFKA_PORT", "").strip()
    return f"127.0.0.1:{port}" if port.isdigit() and 0 < int(port) < 65536 else DEFAULT_BOOTSTRAP


def default_bootstrap(env: Mapping[str, str] | None = None) -> str:
    """The broker of a command given none: ``LOOPWATCH_BOOTSTRAP`` when set and not empty, else
    :func:`local_bootstrap` (the module docstring has the order)."""
    env = os.environ if env is None else env
    return env.get(BOOTSTRAP_ENV, "").strip() or local_bootstrap(env)


def bootstrap_servers(text: str) -> str:
    """``text`` (``host:port`` entries separated by ``,`` or ``;``, each may start with ``kafka://``) as
    aiokafka's ``"host:port,host:port"``.

    Raises:
        ValueError: no entry, an entry without a port, or a port outside 1-65535.
    """
    entries = [entry.strip().removeprefix("kafka://") for entry in text.replace(";", ",").split(",")]
    entries = [entry for entry in entries if entry]
    if not entries:
        raise ValueError("a broker address is needed, e.g. 127.0.0.1:9092")
    for entry in entries:
        host, colon, port = entry.rpartition(":")
        if not colon or not host or host.endswith(":") and not host.startswith("["):
            example = f"[{entry}]:9092" if ":" in entry else f"{entry}:9092"  # IPv6 addresses in brackets
            raise ValueError(f"{entry!r} has no port: give host:port (e.g. {example})")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535")
    return ",".join(entries)


def bootstrap_option(help: str = "Kafka bootstrap server(s), host:port[,host:port].") -> Any:
    """The ``--bootstrap`` option of gateway, produce, tail, fleet and demo, defaulting to
    :func:`default_bootstrap`, checked by :func:`bootstrap_servers`: the command gets aiokafka's form,
    or stops with a usage error naming the entry."""

    def check(ctx: click.Context, param: click.Parameter, value: str) -> str:
        try:
            return bootstrap_servers(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None

    return click.option("--bootstrap", default=lambda: local_bootstrap(), show_default=DEFAULT_SHOWN,
                        envvar=BOOTSTRAP_ENV, show_envvar=True, callback=check, help=help)
