"""The worker's state table: a Faust table written a batch of keys at a time.

Key = state key (bytes), value = ``SessionState`` bytes
(:func:`streams.processor.encode_state`); the changelog partition of each key
is the input partition its events come from, given explicitly by the writer.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable

import faust

__all__ = ["StateTable"]


class StateTable(faust.Table):
    """A Faust table written in batches, with explicit partitions, whose keys' partitions are known."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_partitions: dict[bytes, int] = {}

    async def put_many(self, items: Iterable[tuple[bytes, bytes, int]]) -> list[asyncio.Future]:
        """Set each ``(key, value, partition)`` and send its changelog record to ``partition``.

        Returns the sends' futures (resolved when the broker acknowledged them).
        Unlike ``table[key] = value``, which takes the partition of the stream's
        current event and goes through Faust's per-message send buffer, this
        writes the keys of a whole batch of events, straight to the producer.
        """
        producer = await self.app.maybe_start_producer()
        send = producer.send
        topic = self.changelog_topic.get_topic_name()
        data, partitions, persisted = self.data, self.key_partitions, self._persisted
        futures = []
        for key, value, partition in items:
            data[key] = value
            partitions[key] = partition
            future = await send(topic, key, value, partition, None, None)
            future.add_done_callback(persisted)
            futures.append(future)
        return futures

    def _persisted(self, future: asyncio.Future) -> None:
        # What Table._on_changelog_sent does for a FutureMessage: keep the changelog
        # offset of the stored data (RocksDB uses it to skip recovery at start-up).
        if future.cancelled() or future.exception() is not None:
            return
        meta = future.result()
        if self.app.in_transaction:
            self.app.tables.persist_offset_on_commit(self.data, meta.topic_partition, meta.offset)
        else:
            self.data.set_persisted_offset(meta.topic_partition, meta.offset)

    def apply_changelog_batch(self, batch: Iterable[Any]) -> None:
        batch = list(batch)
        super().apply_changelog_batch(batch)
        for event in batch:
            if event.message.value is None:
                self.key_partitions.pop(event.message.key, None)
            else:
                self.key_partitions[event.message.key] = event.message.partition

    def expire(self, key: bytes, partition: int) -> None:
        """Delete ``key`` from the local store and write its tombstone to the changelog."""
        self.data.pop(key, None)
        self.key_partitions.pop(key, None)
        self.send_changelog(partition, key, None, value_serializer="raw")
