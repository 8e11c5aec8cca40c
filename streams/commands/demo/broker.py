"""The demo's Kafka broker: the one at ``--bootstrap`` if it answers, else (at the default local
address, ``127.0.0.1:$KAFKA_PORT`` when ``KAFKA_PORT`` is exported, else ``127.0.0.1:9092``) one
started with ``deploy/kafka/kafka.sh`` and stopped again on exit; and the demo's topics deleted at
the end.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import click

from streams.assets import work_dir
from streams.wire.brokers import local_bootstrap
from .common import KAFKA_SH, say, shown

__all__ = ["ensure_broker", "stop_broker", "delete_topics", "no_broker_hint", "kafka_sh", "kafka_sh_start"]


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def split_bootstrap(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")  # checked: host:port (streams.wire.brokers)
    return host, int(port)


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")  # where kafka.sh can start a broker


def kafka_sh_start(port: int) -> str:
    """The shell command that starts kafka.sh's broker on 127.0.0.1:``port`` (controller on the next port)."""
    # kafka.sh puts the controller on KAFKA_PORT + 1 by itself; only 65535 has no next port.
    controller = "" if port < 65535 else f" KAFKA_CONTROLLER_PORT={port - 1}"
    return f"KAFKA_PORT={port}{controller} {shown(KAFKA_SH)} start"


def no_broker_hint(bootstrap: str) -> str:
    host, port = split_bootstrap(bootstrap)
    if host in LOCAL_HOSTS:
        return f"no Kafka broker at {bootstrap}; start one ({kafka_sh_start(port)}) or pass --bootstrap"
    return (f"no Kafka broker at {bootstrap}; check the address, or start a local one "
            f"({kafka_sh_start(9092)}) and pass --bootstrap 127.0.0.1:9092")


def kafka_sh(action: str, port: int) -> subprocess.CompletedProcess:
    """``kafka.sh ACTION`` for ``port`` (an exported KAFKA_PORT must not move it elsewhere).

    Its state goes under :func:`work_dir` and it waits with this Python, unless KAFKA_WORK or
    KAFKA_PYTHON say otherwise: from a wheel, the script's own folder is no place for either."""
    env = {"KAFKA_WORK": str(work_dir() / "kafka"), "KAFKA_PYTHON": sys.executable, **os.environ,
           "KAFKA_PORT": str(port)}
    return subprocess.run(["bash", str(KAFKA_SH), action], stdout=sys.stderr, stderr=sys.stderr, env=env)


def ensure_broker(bootstrap: str) -> bool:
    """Make sure a broker answers; returns True if this call started it (only at :func:`~streams.wire.brokers.local_bootstrap`)."""
    host, port = split_bootstrap(bootstrap)
    if port_open(host, port):
        say(f"using the Kafka broker already running at {host}:{port}")
        return False
    if bootstrap != local_bootstrap() or not KAFKA_SH.exists():
        raise click.ClickException(no_broker_hint(bootstrap))
    state = Path(os.environ.get("KAFKA_WORK") or work_dir() / "kafka") / f"port-{port}"
    say(f"no broker at {host}:{port}: starting one with {shown(KAFKA_SH)} start "
         f"(Kafka 3.9.2, data and log under {state})")
    if kafka_sh("start", port).returncode != 0:
        raise click.ClickException("deploy/kafka/kafka.sh start failed (see above)")
    return True


def stop_broker(bootstrap: str) -> None:
    say("stopping the broker this demo started")
    kafka_sh("stop", split_bootstrap(bootstrap)[1])


async def delete_topics(bootstrap: str, prefixes: tuple[str, ...]) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        await admin.start()  # inside: a start that fails (broker down) still closes what it opened
        names = [t for t in await admin.list_topics() if t.startswith(prefixes)]
        if names:
            await admin.delete_topics(names, timeout_ms=10_000)
        return names
    finally:
        await admin.close()
