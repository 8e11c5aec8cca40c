"""Kafka bootstrap addresses, as every command and the client take them: checked before any connection.

Kafka clients take ``host:port`` entries; one without a port quietly means
port 9092, so a mistyped address would reach whatever broker listens there.
Here an entry needs its port, and a port that is not a number in 1-65535 is
an error naming the entry instead of a traceback from the socket layer.
"""

from __future__ import annotations

from typing import Any

import click

__all__ = ["DEFAULT_BOOTSTRAP", "bootstrap_servers", "bootstrap_option"]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


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


def bootstrap_option(help: str = "Kafka bootstrap server(s), host:port[,host:port].",
                     default: Any = DEFAULT_BOOTSTRAP, show_default: Any = True) -> Any:
    """The ``--bootstrap`` option of produce, tail and demo (env ``LOOPWATCH_BOOTSTRAP``), checked by
    :func:`bootstrap_servers`: the command gets aiokafka's form, or stops with a usage error naming the entry."""

    def check(ctx: click.Context, param: click.Parameter, value: str) -> str:
        try:
            return bootstrap_servers(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None

    return click.option("--bootstrap", default=default, show_default=show_default, envvar="LOOPWATCH_BOOTSTRAP",
                        show_envvar=True, callback=check, help=help)
