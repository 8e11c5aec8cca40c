"""``loopwatch gateway --processes N``: N gateway processes on one port, a parent that starts and stops them.

One process's event loop holds the HTTP server, the Kafka producer and the verdict reader; past
what one core gives it (docs/runners/gateway.md, "Several processes"), more processes share the
load. The parent:

* checks that nothing listens on ``host:port`` yet (a bind without ``SO_REUSEPORT``: another
  gateway started on the same port would otherwise join this one's listeners), then makes one
  listening socket per process with ``SO_REUSEPORT``, so the kernel spreads new connections over
  the processes (Linux; elsewhere :class:`~.listen.ProcessesUnsupported`);
* makes a connected Unix socket pair for every two processes (:mod:`.peers`: each session is
  answered by one process, whichever reads its requests);
* forks the processes (each :func:`~.serve.serve` with its socket, its links, its own Kafka
  client, and metrics counted into a shared folder so that ``/metrics`` sums them all);
* calls ``ready(url)`` once every process listens; SIGTERM or SIGINT is passed to every process,
  which drains as one gateway does (:func:`~.serve.serve`); when one process ends by itself (a
  crash), the others are stopped too and the exit status is 1, for the supervisor (systemd, a
  container runtime) to restart the gateway whole.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import socket
import sys
import tempfile
from typing import Any, Callable, Mapping

from aiokafka.errors import KafkaConnectionError

from streams.runners.connection import TopicNotFoundError
from .app import GatewayConfig
from .listen import listeners
from .metrics import GatewayMetrics
from .peers import Peers

__all__ = ["serve_processes"]

log = logging.getLogger(__name__)

STOP_WAIT_S = 60.0  # after SIGTERM, how long the parent waits for a process before killing it


def serve_processes(count: int, bootstrap: str, config: GatewayConfig, *, host: str = "127.0.0.1",
                    port: int = 8787, client_options: Mapping[str, Any] | None = None, loop: str = "auto",
                    ready: Callable[[str], None] | None = None, socks: list[socket.socket] | None = None) -> int:
    """Run the gateway as ``count`` processes (>= 2) until SIGTERM/SIGINT; the exit status (0, or 1 when a
    process ended by itself or failed to start). Blocks; call it from the main thread of a process
    without a running event loop (it forks). ``socks``: the ``count`` listening sockets
    (:func:`~.listen.listeners`), made here when None.

    Raises:
        OSError: the port is taken.
        streams.runners.gateway.listen.ProcessesUnsupported: not on Linux.
    """
    from .serve import run, serve  # the parent never runs an event loop itself

    socks = socks if socks is not None else listeners(host, port, count)
    port = socks[0].getsockname()[1]
    url = f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
    pairs = {(i, j): socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
             for i in range(count) for j in range(i + 1, count)}
    metrics_dir = tempfile.mkdtemp(prefix="loopwatch-gateway-metrics-")
    context = multiprocessing.get_context("fork")
    started, told = context.Pipe(duplex=False)

    def child(index: int) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        started.close()
        links = {}
        for (i, j), (a, b) in pairs.items():
            if index in (i, j):
                links[j if index == i else i] = a if index == i else b
                (b if index == i else a).close()
            else:
                a.close()
                b.close()
        for other, sock in enumerate(socks):
            if other != index:
                sock.close()
        peers = Peers(index, count, links, config.timeout)
        try:
            run(serve(bootstrap, config, host=host, port=port, client_options=client_options, socks=[socks[index]],
                      peers=peers, metrics=GatewayMetrics(metrics_dir), ready=lambda _url: told.send(index)), loop)
        except (KafkaConnectionError, TopicNotFoundError, OSError) as exc:  # said once, as one process says it
            log.error("loopwatch gateway: process %d: %s", index, exc)
            sys.exit(1)

    processes = [context.Process(target=child, args=(index,), name=f"loopwatch-gateway-{index}", daemon=False)
                 for index in range(count)]
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for process in processes:
            if process.pid is not None and process.exitcode is None:
                os.kill(process.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for process in processes:
            process.start()
        told.close()
        for sock in socks:
            sock.close()
        for a, b in pairs.values():
            a.close()
            b.close()
        status = _supervise(processes, started, count, url, ready, lambda: stopping)
        if status and not stopping:
            stop(signal.SIGTERM, None)
        for process in processes:
            process.join(STOP_WAIT_S)
            if process.exitcode is None:
                log.warning("loopwatch gateway: process %s did not stop within %g s; killing it", process.name,
                            STOP_WAIT_S)
                process.kill()
                process.join()
        return status or int(any(process.exitcode for process in processes))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(metrics_dir, ignore_errors=True)


def _supervise(processes: list[Any], started: Any, count: int, url: str, ready: Callable[[str], None] | None,
               stopping: Callable[[], bool]) -> int:
    """Wait until every process listens (then ``ready(url)``) and until they all end; 1 as soon as one
    ends by itself (not after SIGTERM), else 0."""
    listening: set[int] = set()
    sentinels = {process.sentinel: process for process in processes}
    while sentinels:
        watched = [*sentinels, started] if len(listening) < count else list(sentinels)
        for done in multiprocessing.connection.wait(watched, timeout=1.0):
            if done is started:
                try:
                    listening.add(started.recv())
                except EOFError:
                    listening = set(range(count))  # every process has the pipe closed: none will say more
                    continue
                if len(listening) == count and ready is not None:
                    ready(url)
                continue
            process = sentinels.pop(done)
            if not stopping():
                log.error("loopwatch gateway: process %s ended by itself (exit %s); stopping the others",
                          process.name, process.exitcode)
                return 1
    return 0
