"""Events the client has taken and Kafka has not yet acknowledged, kept until it does (bounded).

A runner's wait for a verdict is short (seconds); a broker that hangs or is unreachable can take
minutes. Before :class:`Outbox`, an event whose send outlived the runner's wait was given up with
its ``on_timeout`` verdict: the tool call ran and loopwatch never learned of it. Now every event the
client takes goes into the outbox first, and one task (:meth:`Outbox.run`) hands the events to
the producer in the order they were taken and keeps each until Kafka acknowledges it. A send that
fails in a way that can pass (no connection, the broker not answering, a timeout: Kafka's
*retriable* errors) puts the event back in its place and is tried again after a pause
(:data:`RETRY_FIRST_S` doubling to :data:`RETRY_MOST_S`); an error that cannot pass (the record is
larger than Kafka takes, not authorised, ...) is the event's answer, and the caller gives its
``on_timeout`` verdict with the reason at once, as before.

The outbox is bounded by events and by bytes (encoded records). A full outbox refuses a new
event with :class:`OutboxFullError` (the event is not taken: the caller says so, e.g. the gateway
answers 503), so what is taken is kept: nothing is dropped silently.

Order and duplicates: events are handed to the producer in the order taken, and a retried event
goes back before every later one. The producer is idempotent (``enable_idempotence``, set by
:mod:`.connection`): it keeps retrying a batch itself, without expiring it, and the broker drops a
batch it already wrote, so an event reaches Kafka once. Only an event the producer gave up (a
producer configured without idempotence expires batches after ``request_timeout_ms``) is sent again
by the outbox, which can write it twice if the broker had written it after all.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from aiokafka.errors import KafkaError, KafkaTimeoutError

__all__ = ["Outbox", "OutboxFullError", "DEFAULT_OUTBOX_EVENTS", "DEFAULT_OUTBOX_BYTES", "RETRY_FIRST_S",
           "RETRY_MOST_S"]

log = logging.getLogger("streams.runners.client")

DEFAULT_OUTBOX_EVENTS = 10_000
DEFAULT_OUTBOX_BYTES = 64 * 1024 * 1024
RETRY_FIRST_S, RETRY_MOST_S = 0.2, 5.0
PREPARE_TIMEOUT_S = 5.0  # longest wait for an event's preparation (its verdict partition read) per attempt


class OutboxFullError(RuntimeError):
    """The outbox holds its limit of events or bytes: the event was not taken; ``str()`` says how full."""


@dataclass(order=True)
class _Entry:
    seq: int
    key: bytes = field(compare=False)
    value: bytes = field(compare=False)
    acked: asyncio.Future = field(compare=False)   # Kafka acknowledged it (or an error that cannot pass)
    handed: asyncio.Future = field(compare=False)  # the producer took it (first time)

    @property
    def size(self) -> int:
        return len(self.key) + len(self.value)

    def settled(self, acked: asyncio.Future) -> None:
        """``acked`` is done: ``handed`` too, and its outcome read (a caller that stopped waiting need not
        read it: no "exception never retrieved" noise)."""
        if not acked.cancelled():
            acked.exception()
        if not self.handed.done():
            self.handed.set_result(None)


def retriable(exc: BaseException) -> bool:
    """Whether a failed send can pass by itself (so the event is kept and sent again)."""
    return isinstance(exc, (KafkaTimeoutError, asyncio.TimeoutError)) or (
        isinstance(exc, KafkaError) and bool(getattr(exc, "retriable", False)))


class Outbox:
    """Taken events, in order, until Kafka acknowledges each.

    Arguments:
        topic: the topic the events go to.
        max_events, max_bytes: the bounds (events; bytes of key + value); both > 0.
        producer: ``producer()`` -> the connected :class:`aiokafka.AIOKafkaProducer`, or None while not connected.
        prepare: ``prepare(key)`` -> an awaitable, awaited before an event is handed to the producer (the
            client reads the verdict partition of the key from its end there), or None when there is
            nothing to wait for (the partition is read already: no task per event).
    Raises:
        ValueError: a bound that is not positive.
    """

    def __init__(self, topic: str, max_events: int, max_bytes: int, producer: Callable[[], Any],
                 prepare: Callable[[bytes], Awaitable[None] | None]) -> None:
        if max_events < 1 or max_bytes < 1:
            raise ValueError(f"outbox bounds must be positive, got {max_events} events, {max_bytes} bytes")
        self.topic = topic
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._producer = producer
        self._prepare = prepare
        self._held: dict[int, _Entry] = {}   # taken, not acknowledged
        self._queue: list[_Entry] = []       # of those, not with the producer now (heap by seq)
        self._bytes = 0
        self._seq = 0
        self._wake = asyncio.Event()
        self._emptied = asyncio.Event()
        self._emptied.set()
        self._retry = RETRY_FIRST_S
        self.retries = 0  # sends tried again after an error that can pass

    def __len__(self) -> int:
        return len(self._held)

    @property
    def bytes(self) -> int:
        """Bytes (key + value) of the events held."""
        return self._bytes

    def put(self, key: bytes, value: bytes) -> _Entry:
        """Take an event. Its ``acked`` future resolves once Kafka acknowledges it (or raises the error that
        cannot pass); ``handed``, once the producer has taken it (or with ``acked``, whichever is first).

        Raises:
            OutboxFullError: the outbox is at its bound; the event is not taken.
        """
        size = len(key) + len(value)
        if len(self._held) >= self.max_events or self._bytes + size > self.max_bytes:
            raise OutboxFullError(
                f"loopwatch outbox full: {len(self._held):,} events ({self._bytes:,} bytes) wait for Kafka, the "
                f"bound is {self.max_events:,} events / {self.max_bytes:,} bytes; the event is not taken "
                "(Kafka unreachable or not answering?)")
        self._seq += 1
        loop = asyncio.get_running_loop()
        entry = _Entry(self._seq, key, value, loop.create_future(), loop.create_future())
        entry.acked.add_done_callback(entry.settled)
        self._held[entry.seq] = entry
        self._bytes += size
        self._emptied.clear()
        heapq.heappush(self._queue, entry)
        self._wake.set()
        return entry

    async def flushed(self, timeout: float) -> int:
        """Wait up to ``timeout`` s for every held event to be acknowledged; the number still held."""
        try:
            await asyncio.wait_for(self._emptied.wait(), max(0.0, timeout))
        except asyncio.TimeoutError:
            pass
        return len(self._held)

    def abandon(self, exc: BaseException) -> int:
        """Give up every held event (the client is stopping): each waiter gets ``exc``; the number given up."""
        entries, self._held, self._queue, self._bytes = list(self._held.values()), {}, [], 0
        self._emptied.set()
        for entry in entries:
            if not entry.acked.done():
                entry.acked.set_exception(exc)
        return len(entries)

    async def run(self) -> None:
        """Hand queued events to the producer, oldest first, until cancelled."""
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            producer = self._producer()
            if producer is None:  # not connected (yet): the connection retries in the background
                await asyncio.sleep(RETRY_FIRST_S)
                continue
            entry = heapq.heappop(self._queue)
            if entry.seq not in self._held:
                continue
            try:
                preparing = self._prepare(entry.key)
                if preparing is not None:
                    await asyncio.wait_for(preparing, PREPARE_TIMEOUT_S)
                delivery = await producer.send(self.topic, value=entry.value, key=entry.key)
            except asyncio.CancelledError:
                heapq.heappush(self._queue, entry)
                raise
            except Exception as exc:
                if not self._failed(entry, exc):
                    await self._pause(exc)
                continue
            self._retry = RETRY_FIRST_S
            if not entry.handed.done():
                entry.handed.set_result(None)
            delivery.add_done_callback(lambda done, entry=entry: self._delivered(entry, done))

    def _delivered(self, entry: _Entry, done: asyncio.Future) -> None:
        if done.cancelled():
            self._failed(entry, KafkaTimeoutError("send cancelled"))
        elif done.exception() is not None:
            if self._failed(entry, done.exception()):  # its caller may have stopped waiting: say it here
                log.warning("loopwatch client: Kafka refused an event of key %r (%s: %s); it is not sent",
                            entry.key[:200].decode("utf-8", "replace"), type(done.exception()).__name__,
                            done.exception())
        else:
            self._release(entry)
            if not entry.acked.done():
                entry.acked.set_result(None)

    def _failed(self, entry: _Entry, exc: BaseException) -> bool:
        """Put ``entry`` back (a retriable error: False) or give it its error (True)."""
        if retriable(exc):
            self.retries += 1
            heapq.heappush(self._queue, entry)
            self._wake.set()
            return False
        self._release(entry)
        if not entry.acked.done():
            entry.acked.set_exception(exc)
        return True

    async def _pause(self, exc: BaseException) -> None:
        log.warning("loopwatch client: sending to Kafka failed (%s: %s); %d event(s) kept, trying again in %g s",
                    type(exc).__name__, exc, len(self._held), self._retry)
        await asyncio.sleep(self._retry)
        self._retry = min(RETRY_MOST_S, self._retry * 2)

    def _release(self, entry: _Entry) -> None:
        if self._held.pop(entry.seq, None) is not None:
            self._bytes -= entry.size
            if not self._held:
                self._emptied.set()
