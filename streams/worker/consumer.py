"""Faust's consumer, leaving some assigned topics to another reader.

The worker's input topics are subscribed through Faust's consumer, so that
the group assigns them co-partitioned with the state table, the rebalance
callbacks name them and their offsets are committed by the group member,
but their records are fetched by :class:`streams.worker.reader.InputReader` in the
app's own loop. :class:`Consumer` stops its fetcher thread from fetching
them (:meth:`Consumer.stop_fetching`, at each assignment) and drops any of
their records fetched before that, so Faust never queues them for a stream
nobody reads. Every other topic (the table changelogs, read while recovering
and by standbys) takes Faust's usual path.

It also subscribes only once the broker lists the topics Faust has just
created (:meth:`Consumer.subscribe`), so the first assignment of a worker
on fresh topics includes its input partitions.

Use :class:`Transport` as the app's transport:
``app.transport = Transport(app.conf.broker_consumer, app, external_topics)``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable, Mapping, Optional, Set, Tuple

from aiokafka import TopicPartition
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from streams.wire.outages import Backoff, stop_consumer

__all__ = ["Consumer", "Transport", "SUBSCRIBE_WAIT_S"]

log = logging.getLogger(__name__)

SUBSCRIBE_WAIT_S = 10.0  # longest wait for the broker to list topics just created (ms on one broker)
_LISTED_POLL_S = 0.05


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's consumer thread; its aiokafka consumer gets the transport's :class:`~streams.wire.outages.Backoff`."""

    def _create_consumer(self, loop: asyncio.AbstractEventLoop) -> Any:
        consumer = super()._create_consumer(loop)
        backoff: Backoff = self.consumer.transport.backoff
        # Faust passes no retry_backoff_ms; the consumer hands this one to its fetcher and
        # group coordinator when it starts (not yet: they do not exist before start()).
        consumer._retry_backoff_ms = backoff.retry_ms
        consumer._client._retry_backoff = backoff.retry_ms / 1000.0
        backoff.apply(consumer._client)
        return consumer

    async def on_thread_stop(self) -> None:
        """As Faust's, with :func:`~streams.wire.outages.stop_consumer`: ``consumer.stop()`` raises
        ``CancelledError`` while the broker is down, which left the thread (not a daemon) running."""
        # Faust's own minus its consumer.stop(): the method queue stops (faust.transport.consumer.ConsumerThread)
        await super(faust_aiokafka.AIOKafkaConsumerThread, self).on_thread_stop()
        if self._consumer is not None:
            await stop_consumer(self._consumer)


class Consumer(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer; the records of its transport's ``external_topics`` are read elsewhere.

    Every call that touches aiokafka goes through the consumer thread
    (aiokafka is not thread-safe: a call from the app's loop would not even
    wake the fetcher).
    """

    def _new_consumer_thread(self) -> _ConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def commit_offsets(self, offsets: Mapping[Any, int]) -> bool:
        """Commit ``{tp: next offset to read}`` for the assigned partitions among them.

        Returns False when nothing was committed (none assigned, or the group
        rebalanced meanwhile). Raises nothing; Faust crashes the app on an
        unexpected commit error.
        """
        return await self._commit(offsets)

    async def committed_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        """``{tp: next offset to read}``: the group's committed offset, or the partition's beginning if none.

        Raises aiokafka's errors (e.g. a partition not assigned any more).
        """
        thread = self._thread
        return await thread.call_thread(_committed_or_beginning, thread._ensure_consumer(), list(tps))

    async def subscribe(self, topics: Iterable[str]) -> None:
        """Subscribe once the broker's metadata shows every topic of ``topics`` with its partitions.

        Faust creates the topics it declares just before it subscribes. A
        broker answers CreateTopics before its own metadata lists the new
        topic, so a group leader computing the first assignment right away
        saw no partitions of a fresh input topic ("Topic ... not found in
        cluster metadata", "Ignoring missing topic") and the worker read no
        input until the next metadata refresh. Waiting here (at most
        :data:`SUBSCRIBE_WAIT_S`; then the subscription goes ahead and the
        refresh picks the topic up) makes the first assignment complete.
        """
        topics = set(topics)
        thread = self._thread
        missing = await thread.call_thread(_wait_listed, thread._ensure_consumer(), sorted(topics), SUBSCRIBE_WAIT_S)
        if missing:
            log.warning("loopwatch: topics not listed by the broker %.0f s after they were created: %s; subscribing "
                        "anyway (their partitions are assigned at the next metadata refresh)",
                        SUBSCRIBE_WAIT_S, ", ".join(missing))
        await super().subscribe(topics)

    async def stop_fetching(self, tps: Iterable[TP]) -> None:
        """Have the fetcher thread leave ``tps`` alone (aiokafka pause, until the next assignment)."""
        thread = self._thread
        await thread.call_thread(_pause, thread._ensure_consumer(), list(tps))

    def verify_event_path(self, now: float, tp: TP) -> None:
        # Faust's livelock check: the external topics are never fetched here, by design.
        if tp.topic in self.transport.external_topics:
            return None
        return super().verify_event_path(now, tp)

    async def _wait_next_records(self, timeout: float) -> Tuple[Optional[Any], Optional[Set[TP]]]:
        records, active = await super()._wait_next_records(timeout)
        if records:
            external = self.transport.external_topics
            records = {tp: batch for tp, batch in records.items() if tp.topic not in external}
        return records, active


async def _committed_or_beginning(consumer: Any, tps: list[TP]) -> dict[TP, int]:  # runs in the consumer thread
    committed = await asyncio.gather(*(consumer.committed(tp) for tp in tps))
    offsets = {tp: offset for tp, offset in zip(tps, committed) if offset is not None}
    fresh = [tp for tp in tps if tp not in offsets]
    if fresh:
        offsets.update(await consumer.beginning_offsets(fresh))
    return offsets


async def _wait_listed(consumer: Any, topics: list[str], timeout: float) -> list[str]:  # runs in the consumer thread
    """Wait until the broker's metadata lists every topic with leaders for all its partitions; return those
    still missing after ``timeout`` s (or when the broker cannot be asked: the subscription's own retries take over).

    Asks for all topics' metadata: a request naming a topic would auto-create a missing one (with the
    broker's num.partitions) and log an error for it.
    """
    client = consumer._client
    deadline = time.monotonic() + timeout
    while True:
        try:
            cluster = await client.fetch_all_metadata()
        except Exception:  # broker unreachable: nothing to wait for here
            return []
        missing = [topic for topic in topics if not _all_led(cluster, topic)]
        if not missing or time.monotonic() >= deadline:
            return missing
        await asyncio.sleep(_LISTED_POLL_S)


def _all_led(cluster: Any, topic: str) -> bool:
    partitions = cluster.partitions_for_topic(topic)
    return bool(partitions) and len(cluster.available_partitions_for_topic(topic) or ()) == len(partitions)


async def _pause(consumer: Any, tps: list[TP]) -> None:  # runs in the consumer thread
    assigned = consumer.assignment()
    mine = [TopicPartition(tp.topic, tp.partition) for tp in tps]
    consumer.pause(*(tp for tp in mine if tp in assigned))


class Producer(faust_aiokafka.Producer):
    """Faust's aiokafka producer (topic creation, changelogs of Faust's own) with the transport's backoff."""

    def _settings_extra(self) -> Mapping[str, Any]:
        return {**super()._settings_extra(), "retry_backoff_ms": self.transport.backoff.retry_ms}

    def _new_producer(self, transactional_id: Optional[str] = None) -> Any:
        producer = super()._new_producer(transactional_id)
        self.transport.backoff.apply(producer.client)
        return producer


class Transport(faust_aiokafka.Transport):
    """Faust's aiokafka transport with :class:`Consumer` and :class:`Producer`.

    Arguments:
        url, app: as Faust's transport (``app.conf.broker_consumer``, the app).
        external_topics: topics subscribed and assigned through Faust whose
            records another reader fetches.
        backoff: the retry and reconnect backoff of Faust's Kafka clients.
    """

    Consumer = Consumer
    Producer = Producer

    def __init__(self, url: Any, app: Any, external_topics: Iterable[str], backoff: Backoff = Backoff()) -> None:
        super().__init__(url, app)
        self.external_topics = frozenset(external_topics)
        self.backoff = backoff
