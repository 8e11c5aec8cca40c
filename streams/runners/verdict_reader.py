"""How a :class:`~streams.runners.client.LoopwatchClient` reads its verdicts: only the partitions its keys hash to.

The worker publishes each verdict to the verdicts topic with the event's key,
so it lands on the partition Kafka's default partitioner (murmur2 of the key
bytes, the Java client's and aiokafka's ``DefaultPartitioner``,
:func:`streams.wire.keys.verdict_partition`) picks for that key among the
verdicts topic's partitions. :class:`VerdictReader` computes that partition
for each key the client publishes for and reads **only those partitions**: it
``assign()``\\ s them (no consumer group: nothing is committed, no rebalance
touches the worker), seeks each new partition to its end *before* the first
event of a key that needs it is sent, and adds partitions as new keys appear.
A fleet of runners therefore does not each read every verdict of the fleet.

The partition count of the verdicts topic is read once, when the client connects;
adding partitions to it needs a client restart (as it needs a worker restart).
A record on the verdicts topic that is not a verdict of one of the client's
waiting events (another client's, or one it cannot decode) is skipped.
"""

from __future__ import annotations

import asyncio
import logging
import msgpack
from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.wire.codecs import DecodeError, decode_event
from streams.wire.keys import verdict_partition

__all__ = ["VerdictReader", "FETCH_WAIT_MS"]

log = logging.getLogger("streams.runners.client")

FETCH_WAIT_MS = 50  # getmany() poll; also bounds how late a newly assigned partition is first read


class VerdictReader:
    """The verdicts of one client's waiting events, read from the partitions of its keys.

    Arguments:
        topic: the verdicts topic.
    Attributes:
        pending: event id -> the future of its verdict record (a dict), for the events that wait.
        partitions: the verdicts topic's partition count (0 until :meth:`attach`).
        assigned: the partitions read.
    """

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.pending: dict[str, asyncio.Future] = {}
        self.partitions = 0
        self.assigned: set[int] = set()
        self._partition_of: dict[bytes, int] = {}  # key -> verdict partition
        self._assign_lock = asyncio.Lock()
        self._has_assignment = asyncio.Event()
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task | None = None

    def attach(self, consumer: AIOKafkaConsumer, partitions: int) -> None:
        """Start reading with ``consumer`` (group-less) from a topic of ``partitions`` partitions."""
        self._consumer, self.partitions = consumer, partitions
        self._task = asyncio.ensure_future(self._read())

    async def stop(self, error: BaseException) -> None:
        """Stop reading; every event still waiting gets ``error``."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for future in self.pending.values():
            if not future.done():
                future.set_exception(error)
        self.pending.clear()

    def reads(self, key: bytes) -> bool:
        """Whether the verdict partition of ``key`` is read already (:meth:`ensure_partition` has nothing to do)."""
        return self._partition_of.get(key) in self.assigned

    async def ensure_partition(self, key: bytes) -> None:
        """Read the verdict partition of ``key`` from its end before the key's first event is sent."""
        partition = self._partition_of.get(key)
        if partition is None:
            partition = self._partition_of[key] = verdict_partition(key, self.partitions)
        if partition in self.assigned:
            return
        async with self._assign_lock:
            if partition in self.assigned:
                return
            consumer = self._consumer
            assert consumer is not None
            # assign() replaces the assignment and forgets positions: keep the current ones so that
            # verdicts already on the way for other runs are not skipped (at worst read twice).
            positions = {tp: await consumer.position(tp) for tp in consumer.assignment()}
            new = TopicPartition(self.topic, partition)
            consumer.assign([*positions, new])
            for tp, offset in positions.items():
                consumer.seek(tp, offset)
            await consumer.seek_to_end(new)
            await consumer.position(new)  # resolved: the verdict of the coming event lies beyond it
            self.assigned.add(partition)
            self._has_assignment.set()

    async def _read(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        await self._has_assignment.wait()
        while True:
            try:
                batches = await consumer.getmany(timeout_ms=FETCH_WAIT_MS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep reading; waiting events time out per on_timeout
                log.warning("loopwatch client: reading verdicts failed (%s: %s); retrying", type(exc).__name__, exc)
                await asyncio.sleep(0.5)
                continue
            for records in batches.values():
                for message in records:
                    self.deliver(message.value)

    def deliver(self, value: bytes | None) -> None:
        """Resolve the waiting event whose verdict ``value`` (a record value) is; skip anything else."""
        if not self.pending or not value:
            return
        peeked = _first_event_id(value)
        if peeked is not None and peeked not in self.pending:  # another client's: not decoded
            return
        try:
            record = decode_event(value)
        except DecodeError:
            return
        event_id = record.get("event_id")
        if not isinstance(event_id, str):  # not a verdict of ours (an id that is a list would not even hash)
            return
        future = self.pending.get(event_id)
        if future is not None and not future.done():
            future.set_result(record)


def _first_event_id(value: bytes) -> str | None:
    """The ``event_id`` of a msgpack verdict record whose first entry it is (the worker writes it first,
    :func:`streams.wire.verdicts.verdict_record`), read without decoding the rest; None otherwise. A client
    reading a partition skips the verdicts of other clients' runs for about a quarter of a full decode."""
    if not (0x80 <= value[0] <= 0x8F or value[0] in (0xDE, 0xDF)):
        return None
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(value)
    try:
        unpacker.read_map_header()
        if unpacker.unpack() != "event_id":
            return None
        event_id = unpacker.unpack()
    except Exception:  # whatever msgpack says of a broken record: decode_event says it again, and it is skipped
        return None
    return event_id if isinstance(event_id, str) else None
