"""Waiting for a published event's verdict: Kafka's acknowledgement by a deadline, then the record or one timer.

:class:`~streams.runners.client.LoopwatchClient.publish` waits (:func:`acked_within`) until Kafka has
taken the event or its time is up, then returns the future :func:`verdict_future` makes: resolved by the
verdict record's arrival (:mod:`streams.runners.verdict_reader` resolves the event's entry of ``pending``) or,
when none comes in time, by one timer with the ``on_timeout`` stand-in. No task per event: this is on every
event's path.

Large events
------------
The producer refuses a record over ``max_request_size``
(1 MiB by default; ``producer_options={"max_request_size": n}`` raises it),
and the broker one over the topic's ``max.message.bytes`` (by default the
broker's ``message.max.bytes``, 1048588 bytes). The worker needs an outcome
in full (``result``/``error``: it hashes them as OpenClaw does), so a runner
whose tool results can exceed that either raises both limits or accepts the
fail-open/fail-closed verdict for those events; :func:`send_error` says which limit it passed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from aiokafka.errors import KafkaError, MessageSizeTooLargeError

from streams.wire.codecs import record_size, too_large_reason

from .verdict import Verdict

__all__ = ["acked_within", "resolved", "send_error", "verdict_future"]


async def acked_within(loop: asyncio.AbstractEventLoop, acked: asyncio.Future, deadline: float) -> None:
    """Wait for ``acked`` (the outbox entry's, which must outlive this wait: it is never cancelled here) until
    ``deadline`` (``time.monotonic()``); its error is raised, ``TimeoutError`` when the deadline passes first.

    What ``asyncio.timeout`` around ``asyncio.shield`` does, with one future and one timer instead of a
    shield's outer future and a timeout context's task cancellation: this is on every event's path."""
    if not acked.done():
        woken: asyncio.Future = loop.create_future()

        def wake(_: Any = None) -> None:
            if not woken.done():
                woken.set_result(None)

        acked.add_done_callback(wake)
        timer = loop.call_later(max(0.0, deadline - time.monotonic()), wake)
        try:
            await woken
        finally:
            timer.cancel()
            acked.remove_done_callback(wake)
        if not acked.done():
            raise TimeoutError
    acked.result()


def verdict_future(loop: asyncio.AbstractEventLoop, arrived: asyncio.Future, pending: dict[str, asyncio.Future],
                   event_id: str, wait: float, started: float,
                   fallback: Callable[..., Verdict]) -> "asyncio.Future[Verdict]":
    """The verdict's future: resolved by the record's arrival or by one timer; no task per event.

    ``arrived`` is ``pending[event_id]``, which the verdict reader resolves with the verdict record (or fails
    with ``ClientClosedError`` when the client stops). ``wait`` s after ``started`` (``time.monotonic()``, just
    before the send) without it, the future has ``fallback(timed_out=True)``; cancelling the future gives up
    the wait. ``pending[event_id]`` is removed either way.
    """
    answer: asyncio.Future = loop.create_future()

    def settle(done: asyncio.Future) -> None:  # the record came, the client stopped, or the caller gave up
        timer.cancel()
        pending.pop(event_id, None)
        if done is answer or answer.done():
            return
        if done.cancelled():
            answer.set_result(fallback(timed_out=True))
        elif done.exception() is not None:  # ClientClosedError
            answer.set_exception(done.exception())
        else:
            record = done.result()
            answer.set_result(Verdict(event_id, str(record.get("verdict")), record, False,
                                      time.monotonic() - started))

    timer = loop.call_at(loop.time() + max(0.0, wait - (time.monotonic() - started)), arrived.cancel)
    arrived.add_done_callback(settle)
    answer.add_done_callback(settle)
    return answer


def resolved(loop: asyncio.AbstractEventLoop, verdict: Verdict) -> "asyncio.Future[Verdict]":
    """A future that already holds ``verdict``."""
    future: asyncio.Future = loop.create_future()
    future.set_result(verdict)
    return future


def send_error(exc: KafkaError, key: bytes, value: bytes, max_request_size: int) -> str:
    """What :attr:`Verdict.error` says for an event the producer (``max_request_size``) or the broker refused."""
    if not isinstance(exc, MessageSizeTooLargeError):
        return f"{type(exc).__name__}: {exc}"
    size = record_size(key, value)
    if size > max_request_size:
        return too_large_reason(size, max_request_size, "producer_options={'max_request_size': ...}")
    return too_large_reason(size)
