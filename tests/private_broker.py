"""A Kafka broker of a test module's own, to stop and restart (never the shared test broker).

Outage tests stop the broker under a running worker or client; the broker every other test
uses must never go away, so these start their own with deploy/kafka/kafka.sh on a free port
pair (``KAFKA_PORT``/``KAFKA_CONTROLLER_PORT``), with a ``KAFKA_WORK`` of their own and the
jars of the checkout's ``.work/kafka/libs`` (``kafka.sh fetch`` fills it when missing).
:meth:`PrivateBroker.start` after :meth:`PrivateBroker.stop` restarts on the same data
(``KAFKA_KEEP_DATA=1``): topics and committed offsets survive, as in a real broker restart.

A module shares one (``scope="module"`` fixture): a JVM start costs 5-15 s on 2 cores.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
KAFKA_SH = ROOT / "deploy" / "kafka" / "kafka.sh"
SHARED_PORT = 9092
KAFKA_SH_BOUND_S = 420  # kafka.sh's longest start: 300 s until the broker listens (its default), 60 s of probe at least


def _ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands out to outgoing connections (Linux's ip_local_port_range)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> int:
    """A port ``p`` with ``p .. p + count - 1`` free on 127.0.0.1, below the ephemeral range.

    A server a test stops and starts again on the same port (a broker restart) must find it free: a port
    the kernel chose with ``bind(0)`` is in the ephemeral range, where any outgoing connection of the
    machine may take it meanwhile. Below that range only listeners take ports.
    """
    low = _ephemeral_range()[0]
    first, last = 20_000, (low if low > 21_000 else 65_535) - count
    for _ in range(1_000):
        port = random.randint(first, last)
        if SHARED_PORT - count < port <= SHARED_PORT:
            continue
        if all(_bindable(port + n) for n in range(count)):
            return port
    raise RuntimeError(f"no {count} free consecutive ports between {first} and {last}")


def free_port_pair() -> int:
    """A port ``p`` with ``p`` and ``p + 1`` both free on 127.0.0.1 (broker and controller), never 9092,
    outside the ephemeral range (a restart finds them free)."""
    return _free_ports(2)


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for a gateway or a fake server of a test), outside the ephemeral range."""
    return _free_ports(1)


def running_broker(work: Path) -> Iterator["PrivateBroker"]:
    """A started broker under ``work``, stopped afterwards (the body of a module fixture: ``yield from``)."""
    own = PrivateBroker(work)
    own.start()
    yield own
    own.stop()


def _libs() -> Path:
    """The broker jars of the checkout (fetched with Maven by kafka.sh on first use)."""
    libs = ROOT / ".work" / "kafka" / "libs"
    if not any(libs.glob("kafka_2.13-*.jar")):
        subprocess.run([str(KAFKA_SH), "fetch"], check=True, timeout=600,
                       env={**os.environ, "KAFKA_WORK": str(libs.parent)})
    return libs


class PrivateBroker:
    """A single-node Kafka broker on its own free ports under ``work`` (a folder of the test's).

    Attributes:
        port: the broker's port (the controller listens on ``port + 1``).
        bootstrap: ``"127.0.0.1:<port>"``.
    """

    def __init__(self, work: Path) -> None:
        self.work = work
        self.port = free_port_pair()
        self.bootstrap = f"127.0.0.1:{self.port}"
        work.mkdir(parents=True, exist_ok=True)
        if not (work / "libs").exists():
            (work / "libs").symlink_to(_libs())
        self.started_once = False

    def _run(self, action: str, **env: str) -> subprocess.CompletedProcess:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "LOOPWATCH_KAFKA"))}
        base.update(KAFKA_WORK=str(self.work), KAFKA_PORT=str(self.port), KAFKA_CONTROLLER_PORT=str(self.port + 1),
                    KAFKA_HEAP_OPTS="-Xms128m -Xmx512m", KAFKA_PYTHON=sys.executable, **env)
        # kafka.sh bounds itself (KAFKA_START_TIMEOUT, 300 s, for a loaded machine); this only catches a hang
        done = subprocess.run([str(KAFKA_SH), action], env=base, capture_output=True, text=True, timeout=KAFKA_SH_BOUND_S)
        if done.returncode != 0:
            raise RuntimeError(f"kafka.sh {action} on port {self.port} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def start(self) -> float:
        """Start (the first time on a fresh cluster, later on the same data); return the seconds it took.

        A first start whose ports another process took meanwhile (the ports were free when chosen) is tried
        again on a new free pair, up to 3 times.
        """
        started = time.monotonic()
        for attempt in range(3):
            try:
                self._run("start", KAFKA_KEEP_DATA="1" if self.started_once else "0")
                break
            except RuntimeError as exc:
                if self.started_once or attempt == 2 or "Address already in use" not in str(exc):
                    raise
                self.port = free_port_pair()
                self.bootstrap = f"127.0.0.1:{self.port}"
        self.started_once = True
        return time.monotonic() - started

    def stop(self) -> None:
        """Stop the broker (SIGTERM, controlled shutdown) and wait until its port is closed."""
        self._run("stop")

    def pid(self) -> int:
        """The broker's JVM process id (kafka.sh's pidfile)."""
        return int((self.work / f"port-{self.port}" / "kafka.pid").read_text().strip())

    def freeze(self) -> None:
        """SIGSTOP the broker's JVM: connections stay open, nothing is answered (a hung broker)."""
        os.kill(self.pid(), signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT the broker's JVM (nothing if it is not running)."""
        try:
            os.kill(self.pid(), signal.SIGCONT)
        except (OSError, ValueError):  # no pidfile, or no such process
            pass

    def is_up(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateBroker]:
    """A :class:`PrivateBroker` for the test module (import this fixture into it), stopped after its tests
    (thawed first, should a test have left it frozen)."""
    own = PrivateBroker(tmp_path_factory.mktemp("kafka"))
    own.start()
    yield own
    own.thaw()
    own.stop()
