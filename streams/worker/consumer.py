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

Use :class:`Transport` as the app's transport:
``app.transport = Transport(app.conf.broker_consumer, app, external_topics)``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable, Mapping, Optional, Set, Tuple

from aiokafka import TopicPartition
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

__all__ = ["Consumer", "Transport"]


class Consumer(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer; the records of its transport's ``external_topics`` are read elsewhere.

    Every call that touches aiokafka goes through the consumer thread
    (aiokafka is not thread-safe: a call from the app's loop would not even
    wake the fetcher).
    """

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


async def _pause(consumer: Any, tps: list[TP]) -> None:  # runs in the consumer thread
    assigned = consumer.assignment()
    mine = [TopicPartition(tp.topic, tp.partition) for tp in tps]
    consumer.pause(*(tp for tp in mine if tp in assigned))


class Transport(faust_aiokafka.Transport):
    """Faust's aiokafka transport with :class:`Consumer`.

    Arguments:
        url, app: as Faust's transport (``app.conf.broker_consumer``, the app).
        external_topics: topics subscribed and assigned through Faust whose
            records another reader fetches.
    """

    Consumer = Consumer

    def __init__(self, url: Any, app: Any, external_topics: Iterable[str]) -> None:
        super().__init__(url, app)
        self.external_topics = frozenset(external_topics)
