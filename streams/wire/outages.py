"""Kafka clients while a broker is down: their reconnect backoff, and stopping them.

Backoff
-------
aiokafka 0.14 has ``retry_backoff_ms`` (the pause before a failed fetch,
produce or coordinator request is retried) but no reconnect backoff: a
client refreshes its metadata whenever one of its tasks asks, and the
producer's sender and the consumer's fetcher ask again as soon as a refresh
ends while a partition has no known leader -- which is what a broker's
controlled shutdown leaves in the last metadata it sent. With the broker
down each refresh fails in microseconds (connection refused), so such a
client loops: about 2,000 failed connections a second and a third of a core
per client, for as long as a record waits to be sent.

:func:`pace_metadata` makes each failed refresh of one client wait before
it returns: ``retry_backoff_ms`` after the first failure, doubling with each
failure in a row up to ``reconnect_backoff_max_ms``, back to nothing after a
success (the shape of the Java client's ``reconnect.backoff.ms`` /
``reconnect.backoff.max.ms``). Once the broker is back, each client finds
it within ``reconnect_backoff_max_ms``.

:class:`Backoff` carries the two settings (``WorkerSettings.kafka_retry_backoff_ms``,
``WorkerSettings.kafka_reconnect_backoff_max_ms``; the client's defaults are the
same); :meth:`Backoff.apply` paces a client.

Stopping
--------
``AIOKafkaConsumer.stop()`` raises ``CancelledError`` when a fetch was
waiting out its retry backoff -- as fetches do while the broker is down: the
fetcher cancels its fetch tasks and awaits them (aio-libs/aiokafka#647). The
caller's stop then ends half-way as if it had been cancelled.
:func:`stop_consumer` absorbs that error (not a real cancellation of the
caller) and closes the client's connections. ``AIOKafkaProducer.stop()``
waits until every record taken is delivered or expired (``request_timeout_ms``,
40 s by default) while the broker is down: :func:`stop_producer` gives it a
time limit.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

__all__ = ["Backoff", "DEFAULT_RETRY_BACKOFF_MS", "DEFAULT_RECONNECT_BACKOFF_MAX_MS", "pace_metadata",
           "stop_consumer", "stop_producer"]

DEFAULT_RETRY_BACKOFF_MS = 100  # aiokafka's and the Java client's default
DEFAULT_RECONNECT_BACKOFF_MAX_MS = 1000  # the Java client's reconnect.backoff.max.ms


@dataclass(frozen=True)
class Backoff:
    """The two backoff settings, in milliseconds.

    Attributes:
        retry_ms: aiokafka's ``retry_backoff_ms`` of every client, and the first wait after a failed
            metadata refresh.
        reconnect_max_ms: the longest wait after failed metadata refreshes in a row.
    Raises:
        ValueError: a negative value, or ``reconnect_max_ms`` below ``retry_ms``.
    """

    retry_ms: int = DEFAULT_RETRY_BACKOFF_MS
    reconnect_max_ms: int = DEFAULT_RECONNECT_BACKOFF_MAX_MS

    def __post_init__(self) -> None:
        if self.retry_ms < 0 or self.reconnect_max_ms < self.retry_ms:
            raise ValueError(f"backoff: need 0 <= retry_ms <= reconnect_max_ms, got {self.retry_ms} and "
                             f"{self.reconnect_max_ms}")

    def apply(self, client: Any) -> Any:
        """Pace ``client``'s metadata refreshes (:func:`pace_metadata`); return it."""
        return pace_metadata(client, self.retry_ms / 1000.0, self.reconnect_max_ms / 1000.0)


def pace_metadata(client: Any, first_s: float, most_s: float) -> Any:
    """Make each failed metadata refresh of ``client`` (an :class:`aiokafka.AIOKafkaClient`, not started or
    started) wait ``first_s`` s, doubling per failure in a row up to ``most_s``; return ``client``.

    Wraps the client's ``_metadata_update`` (the one step every refresh goes
    through: the background refresher, ``force_metadata_update`` and
    ``fetch_all_metadata``). Idempotent.
    """
    if getattr(client, "_loopwatch_paced", False):
        return client
    update = client._metadata_update
    failures = 0

    async def paced(cluster_metadata: Any, topics: Any) -> bool:
        nonlocal failures
        updated = await update(cluster_metadata, topics)
        if updated:
            failures = 0
        else:
            failures += 1
            await asyncio.sleep(min(most_s, first_s * 2 ** min(failures - 1, 30)))
        return updated

    client._metadata_update = paced
    client._loopwatch_paced = True
    return client


async def stop_consumer(consumer: Any) -> None:
    """``await consumer.stop()`` (an :class:`aiokafka.AIOKafkaConsumer`), without the ``CancelledError`` of a fetch
    it cancelled; a real cancellation of the caller is raised as usual."""
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        await consumer._client.close()  # the step of stop() that the error skipped


async def stop_producer(producer: Any, timeout: float) -> bool:
    """Stop ``producer`` (an :class:`aiokafka.AIOKafkaProducer`), waiting at most ``timeout`` s for the records it
    holds to be delivered; return False if they were given up (its connections are closed all the same)."""
    stopping = asyncio.ensure_future(producer.stop())
    done, _ = await asyncio.wait([stopping], timeout=timeout)
    if done:
        stopping.result()
        return True
    stopping.cancel()
    await asyncio.gather(stopping, return_exceptions=True)
    sender = getattr(producer, "_sender", None)
    if sender is not None and sender.sender_task is not None:
        sender.sender_task.cancel()  # not awaited: it would wait for its requests in flight
    await producer.client.close()
    return False
