"""Where the gateway listens: its sockets bound before anything else starts, and a failed bind said in one line.

``loopwatch gateway`` binds its port first, before it makes its token file or connects to Kafka,
so a start that cannot listen (the port taken, a port below 1024 without the right, an address
that is not this machine's) stops at once with one line saying what to do (:func:`bind_problem`),
leaving nothing behind.

* :func:`bound`: one process: a listening socket per address ``host`` names (``localhost`` may
  be both ``127.0.0.1`` and ``::1``), as aiohttp's own ``TCPSite`` would bind them.
* :func:`listeners`: several processes (``--processes N``, Linux): first a bind without
  ``SO_REUSEPORT``, which fails if anything listens there already (a second gateway would
  otherwise join this one's listeners), then ``count`` sockets with ``SO_REUSEPORT`` so that the
  kernel spreads new connections over the processes.
"""

from __future__ import annotations

import errno
import multiprocessing
import socket

__all__ = ["BACKLOG", "ProcessesUnsupported", "bound", "listeners", "bind_problem"]

BACKLOG = 1024  # connections the kernel queues before the gateway accepts them


class ProcessesUnsupported(RuntimeError):
    """Several processes need ``SO_REUSEPORT`` and ``fork`` (Linux)."""


def _listening(family: int, address: tuple, reuse_port: bool = False) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart binds at once (TIME_WAIT)
        if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # as asyncio: "::" is IPv6 only
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def bound(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on ``host:port``, one per address ``host`` resolves to (``port`` 0: one free
    port, the same for every address when the system allows).

    Raises:
        OSError: the port is taken (``EADDRINUSE``), not allowed (``EACCES``), the address is not this
            machine's (``EADDRNOTAVAIL``), or ``host`` does not resolve (``socket.gaierror``).
    """
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    made: list[socket.socket] = []
    try:
        seen: set[tuple] = set()
        for family, _, _, _, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            if made and port == 0:  # the port the first socket got, for the others too
                address = (address[0], made[0].getsockname()[1], *address[2:])
            made.append(_listening(family, address))
    except BaseException:
        for sock in made:
            sock.close()
        raise
    return made


def listeners(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` listening TCP sockets on ``host:port`` with ``SO_REUSEPORT`` (``port`` 0: one free port for all).

    Raises:
        OSError: something listens on ``host:port`` already (``EADDRINUSE``), or the address is not local.
        ProcessesUnsupported: no ``SO_REUSEPORT`` here.
    """
    if not hasattr(socket, "SO_REUSEPORT") or "fork" not in multiprocessing.get_all_start_methods():
        raise ProcessesUnsupported("--processes above 1 needs SO_REUSEPORT and fork (Linux)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with _listening(family, (host, port)) as probe:  # no SO_REUSEPORT: fails if anything listens there
        port = probe.getsockname()[1]
    made: list[socket.socket] = []
    try:
        for _ in range(count):
            made.append(_listening(family, (host, port), reuse_port=True))
    except BaseException:
        for sock in made:
            sock.close()
        raise
    return made


def bind_problem(host: str, port: int, exc: OSError) -> str:
    """One line saying why the gateway cannot listen on ``host:port`` and what to do."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (f"port {port} is in use on {host} (another loopwatch gateway, or another program, listens "
                f"there; `ss -ltnp 'sport = :{port}'` shows which): stop it, or start this gateway on a free "
                "port with --port N (or LOOPWATCH_GATEWAY_PORT) and point the runners at that port")
    if exc.errno == errno.EACCES:
        return (f"cannot listen on {where}: permission denied (ports below 1024 need root): "
                "choose --port 1024 or above")
    if exc.errno == errno.EADDRNOTAVAIL:
        return (f"cannot listen on {where}: {host} is not an address of this machine "
                "(--host 127.0.0.1 for this machine only, 0.0.0.0 for every interface)")
    if isinstance(exc, socket.gaierror):
        return f"cannot listen on {where}: the host name {host!r} does not resolve ({exc.strerror}); check --host"
    return f"cannot listen on {where}: {exc.strerror or exc}"
