"""The client's Kafka connection: made at start if the broker answers, else in the background.

A runner must start, run and stop whatever Kafka is doing. :class:`Connection`
opens the producer and the verdict consumer of a
:class:`~streams.runners.client.LoopwatchClient`; while the broker is
unreachable (at start, or until it is back) it tries again in the background,
waiting :data:`RETRY_FIRST_S` doubling to :data:`RETRY_MOST_S` between
attempts, and the client answers every event with its ``on_timeout`` verdict
at once. Once connected, aiokafka reconnects by itself after an outage (its
metadata refreshes paced by :mod:`streams.wire.outages`). :meth:`Connection.close`
returns within its ``timeout`` in any broker state.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Mapping

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from streams.wire.logs import unreachable_reason
from streams.wire.outages import Backoff, stop_consumer, stop_producer

__all__ = ["Connection", "TopicNotFoundError", "ATTEMPT_S", "RETRY_FIRST_S", "RETRY_MOST_S"]

log = logging.getLogger("streams.runners.client")

ATTEMPT_S = 5.0  # longest wait for the broker to answer one connection attempt (a broker that hangs)
RETRY_FIRST_S, RETRY_MOST_S = 0.5, 5.0  # background attempts: the first wait, doubling up to the longest
_TOPIC_POLL_S = 0.5


class TopicNotFoundError(RuntimeError):
    """The verdicts topic does not exist (is the worker running?) within the start timeout."""


class Connection:
    """A producer and a group-less consumer on ``bootstrap``, and the verdicts topic's partition count.

    Arguments:
        bootstrap: ``host:port[,host:port]``.
        verdicts_topic: the topic whose partition count :attr:`partitions` holds.
        start_timeout: seconds :meth:`open` waits for the verdicts topic to exist.
        producer_options, consumer_options: more aiokafka options (they win over the defaults here).
        on_open: ``async on_open()``, awaited once connected (before :attr:`ready` is true).
        backoff: the clients' retry and reconnect backoff.
    Attributes:
        producer, consumer: the aiokafka clients once connected, else None.
        partitions: the verdicts topic's partition count once connected, else 0.
    """

    def __init__(self, bootstrap: str, verdicts_topic: str, start_timeout: float,
                 producer_options: Mapping[str, Any], consumer_options: Mapping[str, Any],
                 on_open: Callable[[], Awaitable[None]], consumer_wait_ms: int, backoff: Backoff = Backoff()) -> None:
        self.bootstrap = bootstrap
        self.verdicts_topic = verdicts_topic
        self.start_timeout = start_timeout
        self._producer_options = {"retry_backoff_ms": backoff.retry_ms, **producer_options}
        self._consumer_options = {"retry_backoff_ms": backoff.retry_ms, **consumer_options}
        self._on_open = on_open
        self._consumer_wait_ms = consumer_wait_ms
        self._backoff = backoff
        self.producer: AIOKafkaProducer | None = None
        self.consumer: AIOKafkaConsumer | None = None
        self.partitions = 0
        self.ready = False
        self._retrying: asyncio.Task | None = None
        self.unreachable: str | None = None  # why the last attempt failed, while not connected

    async def open(self) -> None:
        """Connect now, or (broker unreachable) log one warning and keep trying in the background.

        Raises:
            TopicNotFoundError: the broker answers but the verdicts topic does not exist within ``start_timeout``.
        """
        try:
            await self._attempt(self.start_timeout)
        except TopicNotFoundError:
            raise
        except Exception as exc:
            self.unreachable = _reason(exc)
            log.warning("loopwatch client: Kafka at %s is unreachable (%s): every event gets the on_timeout verdict "
                        "until it is; connecting in the background", self.bootstrap, self.unreachable)
            self._retrying = asyncio.ensure_future(self._retry())

    async def close(self, timeout: float) -> None:
        """Stop trying, stop the consumer and the producer; return within ``timeout`` s (records the producer
        holds that Kafka has not taken by then are given up)."""
        self.ready = False
        if self._retrying is not None:
            self._retrying.cancel()
            await asyncio.gather(self._retrying, return_exceptions=True)
            self._retrying = None
        until = time.monotonic() + timeout
        consumer, producer, self.consumer, self.producer = self.consumer, self.producer, None, None
        if consumer is not None:
            try:
                await asyncio.wait_for(stop_consumer(consumer), max(0.1, until - time.monotonic()))
            except asyncio.TimeoutError:
                pass
        if producer is not None:
            await stop_producer(producer, max(0.1, until - time.monotonic()))

    async def _retry(self) -> None:
        wait = RETRY_FIRST_S
        while True:
            await asyncio.sleep(wait)
            try:
                await self._attempt(0.0)
            except Exception as exc:
                self.unreachable = _reason(exc)
                wait = min(RETRY_MOST_S, wait * 2)
                continue
            log.warning("loopwatch client: connected to Kafka at %s: verdicts again", self.bootstrap)
            return

    async def _attempt(self, topic_wait: float) -> None:
        """One connection: the verdicts topic's partitions (waiting up to ``topic_wait`` s for it), the producer,
        the consumer, then ``on_open``. Raises what failed (all clients of the attempt closed)."""
        partitions = await asyncio.wait_for(self._partition_count(topic_wait), ATTEMPT_S + topic_wait)
        # Idempotent: the producer retries a batch through an outage without expiring it, and the broker
        # drops a batch it already wrote, so an event of the outbox (:mod:`.outbox`) reaches Kafka once.
        options = {"enable_idempotence": True, **self._producer_options}
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=0, **options)
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="latest", fetch_max_wait_ms=self._consumer_wait_ms,
                                    **self._consumer_options)
        self._backoff.apply(producer.client)
        self._backoff.apply(consumer._client)
        try:
            await asyncio.wait_for(producer.start(), ATTEMPT_S)
            await asyncio.wait_for(consumer.start(), ATTEMPT_S)
        except BaseException:
            await stop_consumer(consumer)
            await stop_producer(producer, 0.5)
            raise
        self.partitions, self.producer, self.consumer = partitions, producer, consumer
        await self._on_open()
        self.unreachable = None
        self.ready = True

    async def _partition_count(self, topic_wait: float) -> int:
        # Metadata for all topics: a request naming the topic would auto-create it with the
        # broker's num.partitions, which need not be what the worker declares.
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        self._backoff.apply(admin._client)
        try:
            await admin.start()
            deadline = time.monotonic() + topic_wait
            said = False
            while True:
                for topic in await admin.describe_topics():
                    if topic["topic"] == self.verdicts_topic and topic["error_code"] == 0 and topic["partitions"]:
                        return len(topic["partitions"])
                if not said and topic_wait > 0:  # a start that waits says so, rather than looking hung
                    log.warning("loopwatch client: waiting up to %g s for the verdicts topic %r on %s (the worker "
                                "creates it when it starts)", topic_wait, self.verdicts_topic, self.bootstrap)
                    said = True
                if time.monotonic() >= deadline:
                    raise TopicNotFoundError(
                        f"verdicts topic {self.verdicts_topic!r} not found on {self.bootstrap} within "
                        f"{topic_wait:g} s; the worker creates it when it starts (is it running?)")
                await asyncio.sleep(_TOPIC_POLL_S)
        finally:
            await admin.close()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return f"no answer within {ATTEMPT_S:g} s"
    return unreachable_reason(exc)  # in a command, the reason aiokafka gave per address (its log line held back)
