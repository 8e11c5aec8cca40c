"""Session affinity between the processes of one gateway: each session's requests are answered by one process.

With ``loopwatch gateway --processes N`` the kernel spreads connections over N processes
(``SO_REUSEPORT``: :mod:`.processes`), and a connection carries requests of any session. A
gateway process keeps per-session state that must see every request of its session: the calls let
run without a verdict (whose results go with ``ran_without_verdict``), what the client adds to
events (:mod:`streams.runners.completion`), the runs of hook calls and the runs that ended
(:mod:`streams.runners.hooks`). So every session has an owner, process
``crc32(session) % N`` (:func:`affinity_key` names the session of a request), and a process that
reads a request of another process's session hands it over on a local link: a pair of connected
Unix sockets per two processes, made before the processes start. The owner answers it as if it had
read it itself (its own client, metrics and in-flight count), and the process holding the
connection sends that answer.

The doors (token, ``Origin``, content type, size, read timeouts, draining) are passed where the
request is read, before it is handed over. Messages are msgpack arrays, streamed:
``[0, id, endpoint, wait, body]`` (a request: its endpoint, the hook's wait in seconds or None, the
raw body) and ``[1, id, status, body]`` (the answer: HTTP status and JSON body).

A link that is down (its process stopped) is not used: requests of those sessions are answered
where they are read. A request handed over whose owner stops before answering gets 503.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import zlib
from typing import Any, Awaitable, Callable, Mapping

import msgpack

from streams.wire.codecs import encode_json

__all__ = ["Peers", "affinity_key", "owner_of"]

log = logging.getLogger(__name__)

ANSWER_MARGIN_S = 1.0  # beyond the verdict wait, how long a handed-over request waits for its owner's answer
_REQUEST, _ANSWER = 0, 1

Handler = Callable[[str, "float | None", bytes], Awaitable[tuple[int, bytes]]]


def affinity_key(payload: Mapping[str, Any]) -> str | None:
    """The session a request body belongs to: its ``session_id`` (every hook call and every valid
    ``tool_call`` has one), else ``session_key``, else ``run_id``; None when it has none of them as a
    non-empty string (it is then answered where it is read: it is refused or has no session state)."""
    for field in ("session_id", "session_key", "run_id"):
        value = payload.get(field)
        if isinstance(value, str) and value:
            return value
    return None


def owner_of(key: str, processes: int) -> int:
    """The process (0-based) that owns session ``key`` among ``processes``: CRC-32 of its UTF-8 bytes, modulo."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % processes


class _Link(asyncio.Protocol):
    def __init__(self, peers: "Peers", other: int) -> None:
        self.peers = peers
        self.other = other
        self.transport: asyncio.Transport | None = None
        self.unpacker = msgpack.Unpacker(raw=False)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.unpacker.feed(data)
        for message in self.unpacker:
            self.peers._received(self, message)

    def connection_lost(self, exc: Exception | None) -> None:
        self.peers._lost(self)

    def send(self, message: list[Any]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(msgpack.packb(message, use_bin_type=True))


class Peers:
    """This process's links to the other processes of its gateway.

    Arguments:
        index: this process, 0-based.
        count: the number of processes (>= 2).
        sockets: the other process index -> this process's end of their connected Unix socket pair.
        timeout: the gateway's verdict wait (``--timeout``), seconds, when a request names none.
    """

    def __init__(self, index: int, count: int, sockets: Mapping[int, socket.socket], timeout: float) -> None:
        self.index = index
        self.count = count
        self.timeout = timeout
        self._sockets = dict(sockets)
        self._links: dict[int, _Link] = {}
        self._waiting: dict[int, tuple[_Link, asyncio.Future]] = {}
        self._ids = itertools.count()
        self._handler: Handler | None = None
        self._tasks: set[asyncio.Task] = set()
        self.handed_over = 0  # requests this process handed to their owner
        self.taken_over = 0   # requests other processes handed to this one

    async def open(self, handler: Handler) -> None:
        """Start reading the links; ``handler(endpoint, wait, body)`` answers the requests handed to this process."""
        self._handler = handler
        loop = asyncio.get_running_loop()
        for other, sock in self._sockets.items():
            sock.setblocking(False)
            _, link = await loop.create_unix_connection(lambda other=other: _Link(self, other), sock=sock)
            self._links[other] = link

    def close(self) -> None:
        """Close the links (the other processes then answer this one's sessions themselves)."""
        for link in list(self._links.values()):
            if link.transport is not None:
                link.transport.close()
        self._links.clear()

    def owner(self, payload: Mapping[str, Any]) -> int:
        """The process that answers ``payload`` (this one when it names no session or its owner's link is down)."""
        key = affinity_key(payload)
        if key is None:
            return self.index
        target = owner_of(key, self.count)
        return target if target in self._links else self.index

    async def ask(self, target: int, endpoint: str, wait: float | None, body: bytes) -> tuple[int, bytes]:
        """Hand a request to process ``target`` and return its answer ``(status, JSON body)``; 503 when the
        owner stops before answering or does not answer within the wait and :data:`ANSWER_MARGIN_S`."""
        link = self._links[target]
        request_id = next(self._ids)
        answer = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (link, answer)
        self.handed_over += 1
        link.send([_REQUEST, request_id, endpoint, wait, body])
        try:
            async with asyncio.timeout((wait if wait is not None else self.timeout) + ANSWER_MARGIN_S):
                return await answer
        except TimeoutError:
            return 503, _error(f"loopwatch gateway process {target}, which answers this session, did not answer")
        finally:
            self._waiting.pop(request_id, None)

    def _received(self, link: _Link, message: list[Any]) -> None:
        if message[0] == _ANSWER:
            waiting = self._waiting.pop(message[1], None)
            if waiting is not None and not waiting[1].done():
                waiting[1].set_result((message[2], message[3]))
            return
        _, request_id, endpoint, wait, body = message
        assert self._handler is not None
        self.taken_over += 1
        task = asyncio.ensure_future(self._answer(link, request_id, self._handler(endpoint, wait, body)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _answer(link: _Link, request_id: int, answering: Awaitable[tuple[int, bytes]]) -> None:
        try:
            status, body = await answering
        except Exception as exc:  # an answer is owed whatever happened
            log.exception("loopwatch gateway: a request handed over failed")
            status, body = 500, _error(f"loopwatch gateway: {type(exc).__name__}: {exc}")
        link.send([_ANSWER, request_id, status, body])

    def _lost(self, link: _Link) -> None:
        if self._links.get(link.other) is link:
            del self._links[link.other]
            log.warning("loopwatch gateway: the link to process %d is closed; its sessions are answered here",
                        link.other)
        for request_id, (on, answer) in list(self._waiting.items()):
            if on is link and not answer.done():
                answer.set_result((503, _error(f"loopwatch gateway process {link.other}, which answers this "
                                               "session, stopped before answering; retry")))


def _error(reason: str) -> bytes:
    return encode_json({"error": reason})
