"""The worker's output records, packed per partition into producer batches.

One aiokafka ``send`` per record costs a future, a metadata wait and a trip
through the accumulator; for the several records an event can produce
(verdict, loop events) that is more than the detection itself. The worker
instead appends every record of a fetched batch to one
:class:`aiokafka.producer.message_accumulator.BatchBuilder` per
(topic, partition) and submits each builder once (:meth:`Outputs.send`),
which returns one future per builder, resolved when the broker acknowledged
it (``acks`` of the producer).

Partitions are chosen as Kafka's default partitioner would
(:func:`streams.wire.keys.verdict_partition`: murmur2 of the key), so a verdict
lands on the partition a runner's client reads, and a rekeyed event on the
partition of the table that owns its key. A record without a key (a dead
letter of a keyless record) goes to the partition of its source record,
modulo the topic's partition count.
"""

from __future__ import annotations

import asyncio
from typing import Any

from streams.wire.keys import verdict_partition
from streams.wire.codecs import MAX_CARRIED_BYTES, fits

__all__ = ["Outputs"]

_MAX_CACHED_KEYS = 100_000


class Outputs:
    """Records waiting to be submitted, per (topic, partition).

    Arguments:
        producer: a started :class:`aiokafka.AIOKafkaProducer`.
        partitions: topic -> partition count of every topic written to.
    Raises:
        KeyError: from :meth:`add` for a topic not in ``partitions``.
    """

    __slots__ = ("_producer", "_partitions", "_builders", "_full", "_key_partitions")

    def __init__(self, producer: Any, partitions: dict[str, int]) -> None:
        self._producer = producer
        self._partitions = partitions
        self._builders: dict[tuple[str, int], Any] = {}  # the open batch per (topic, partition)
        self._full: list[tuple[tuple[str, int], Any]] = []  # batches that reached the producer's batch size
        self._key_partitions: dict[int, dict[bytes, int]] = {}  # partition count -> key -> partition

    def partition(self, topic: str, key: bytes | None, fallback: int = 0) -> int:
        """The partition of ``key`` in ``topic`` (Kafka's default partitioner); ``fallback`` for no key."""
        count = self._partitions[topic]
        if not key:
            return fallback % count
        known = self._key_partitions.setdefault(count, {})
        partition = known.get(key)
        if partition is None:
            if len(known) >= _MAX_CACHED_KEYS:
                known.clear()  # a cache: recomputed as needed, bounded for a fleet's churn of keys
            partition = known[key] = verdict_partition(key, count)
        return partition

    def forget(self, key: bytes) -> None:
        """Drop the cached partitions of ``key`` (an expired state)."""
        for known in self._key_partitions.values():
            known.pop(key, None)

    def add(self, topic: str, key: bytes | None, value: bytes, fallback: int = 0) -> None:
        """Queue one record for ``topic``, at the partition of ``key`` (see :meth:`partition`).

        A key that leaves no room for ``value`` (:func:`streams.wire.codecs.fits`:
        a key of about 1 MB) is left out of the record, which still goes to
        the key's partition: there a runner finds its verdict by event id.
        """
        partition = self.partition(topic, key, fallback)
        self.add_to(topic, partition, key if fits(key, value) else None, value)

    def add_all(self, records: list[tuple[str, bytes | None, bytes, int]]) -> None:
        """:meth:`add` each ``(topic, key, value, fallback partition)`` of ``records``, in order.

        The same steps as :meth:`add` and :meth:`add_to`, with the usual record's (a key already seen, a
        batch open with room for it) taken here without their calls: once per output record, they were a
        tenth of the worker's own time per event.
        """
        builders, known_by_count, counts = self._builders, self._key_partitions, self._partitions
        add = self.add
        for topic, key, value, fallback in records:
            if key and len(key) + len(value) <= MAX_CARRIED_BYTES:  # fits(key, value), with a key
                known = known_by_count.get(counts[topic])
                partition = known.get(key) if known is not None else None
                if partition is not None:
                    builder = builders.get((topic, partition))
                    if builder is not None and builder.append(key=key, value=value, timestamp=None) is not None:
                        continue
                    self.add_to(topic, partition, key, value)
                    continue
            add(topic, key, value, fallback)

    def add_to(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        """Queue one record for ``partition`` of ``topic`` (``value`` None: a tombstone).

        A record larger than the producer's batch size goes alone in its batch
        (the broker refuses it only beyond its ``message.max.bytes``).
        """
        slot = (topic, partition)
        builder = self._builders.get(slot)
        if builder is not None:
            if builder.append(key=key, value=value, timestamp=None) is not None:
                return
            self._full.append((slot, builder))  # full: the record opens the next batch
        builder = self._builders[slot] = self._producer.create_batch()
        builder.append(key=key, value=value, timestamp=None)  # an empty batch takes any record

    def __bool__(self) -> bool:
        return bool(self._builders or self._full)

    async def send(self) -> list[asyncio.Future]:
        """Submit every queued batch; their futures (resolved when acknowledged). See :meth:`send_batches`."""
        return [future for _, _, future in await self.send_batches()]

    async def send_batches(self) -> list[tuple[tuple[str, int], int, asyncio.Future]]:
        """Submit every queued batch, in the order their records were added per partition.

        Returns ``((topic, partition), record count, future)`` per batch; the
        future resolves to the batch's ``RecordMetadata`` when acknowledged
        (its ``offset`` is the batch's first record's: the n-th record added
        is at ``offset + n``). Waits while the producer still holds an unsent
        batch for the same partition (back-pressure).
        """
        ready, self._full = self._full, []
        ready.extend(self._builders.items())
        self._builders = {}
        send_batch = self._producer.send_batch
        return [(slot, builder.record_count(), await send_batch(builder, slot[0], partition=slot[1]))
                for slot, builder in ready]
