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

The changelogs are written in transactions (:mod:`streams.worker.fencing`):
the consumer reads them ``read_committed``, so a state written by a worker
that was fenced (aborted) is never restored, and it reports as a changelog
partition's end the offset after its last committed record rather than after
the transaction marker that follows it (:meth:`_ConsumerThread._highwaters`),
so that Faust's recovery ends as soon as it has read that record.

That end is taken once no transaction open at that moment holds the
partition's last stable offset (LSO) back (:func:`stable_ends`). A reader
``read_committed`` sees a partition only up to its LSO, the first offset of
the oldest transaction still open there, so a transaction begun before
records committed after it (a writer stalled mid-transaction, a transaction
whose markers are still being written) hid them: Faust's recovery stopped
before them, and a worker whose memory store held them (kept across the
rebalance, its persisted offset from its own commits) crashed with Faust's
``ConsistencyError`` ("The persisted offset ... is higher than the last
offset in that topic (highwater)").

Use :class:`Transport` as the app's transport:
``app.transport = Transport(app.conf.broker_consumer, app, external_topics)``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable, Mapping, Optional, Set, Tuple

from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from streams.wire.outages import Backoff, stop_consumer
from .fetch_pacing import IDLE_AFTER_S, PacedFetcher, pace

__all__ = ["Consumer", "Transport", "STABLE_WAIT_S", "SUBSCRIBE_WAIT_S", "last_committed", "stable_ends"]

log = logging.getLogger(__name__)

SUBSCRIBE_WAIT_S = 10.0  # longest wait for the broker to list topics just created (ms on one broker)
_LISTED_POLL_S = 0.05
_SCAN_WINDOW = 64  # records read back from a changelog's end at first (one transaction's marker, usually)
_SCAN_TIMEOUT_S = 10.0
_CHANGELOG_FETCH_WAIT_MS = 100
# With no record for IDLE_AFTER_S, no recovery and no rebalance under way, the broker holds Faust's fetches this
# long instead (a record arriving ends a fetch at once): a fetch every 100 ms, each naming every changelog and fleet
# partition, was about half of an idle worker's CPU (docs/worker.md, "Idle"). Below Faust's own 1,500 ms.
CHANGELOG_IDLE_FETCH_WAIT_MS = 500
# Longest wait for the transactions open on a changelog partition when its end is asked for: longer than
# the changelog writers' transaction timeout (streams.worker.fencing), after which the coordinator aborts
# one left open. Faust allows the whole step broker_request_timeout (90 s).
STABLE_WAIT_S = 40.0
_STABLE_POLL_S = 0.05


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's consumer thread: its aiokafka consumer gets the transport's :class:`~streams.wire.outages.Backoff`,
    reads ``read_committed``, and changelog ends are at their last committed record.

    Its fetches are held :data:`_CHANGELOG_FETCH_WAIT_MS` while records come, while Faust recovers tables and
    from a rebalance's start, else (after :data:`~streams.worker.fetch_pacing.IDLE_AFTER_S`)
    :data:`CHANGELOG_IDLE_FETCH_WAIT_MS`, paced as the input reader's are. The verdict path does not use this
    consumer (:mod:`streams.worker.reader`)."""

    _scanner: AIOKafkaConsumer | None = None  # read_committed, no group: changelog ends and their last records
    _watermarks: AIOKafkaConsumer | None = None  # read_uncommitted, no group: high watermarks
    _busy_since = 0.0  # monotonic time of the last fetch with records, recovery or rebalance

    async def on_start(self) -> None:
        await super().on_start()
        pace(self._ensure_consumer()._fetcher, _CHANGELOG_FETCH_WAIT_MS)  # aiokafka internals: built by start()
        self._busy_since = time.monotonic()

    def _busy(self) -> None:
        """Back to the short fetch wait (the next request built has it)."""
        self._busy_since = time.monotonic()
        consumer = self._consumer
        if consumer is not None and getattr(consumer, "_fetcher", None) is not None:
            consumer._fetcher._fetch_max_wait_ms = _CHANGELOG_FETCH_WAIT_MS

    async def on_partitions_revoked(self, revoked: Any) -> None:  # a rebalance starts: recovery seeks follow
        self._busy()
        await super().on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: Any, generation_id: int = 0) -> None:
        self._busy()
        await super().on_partitions_assigned(assigned, generation_id)

    async def _fetch_records(self, consumer: Any, active_partitions: Any, timeout: Optional[float] = None,
                             max_records: Optional[int] = None) -> Any:  # runs in the consumer thread
        records = await super()._fetch_records(consumer, active_partitions, timeout=timeout, max_records=max_records)
        if records or getattr(self.app, "in_recovery", False) or getattr(self.app, "rebalancing", False):
            self._busy_since = time.monotonic()
        elif time.monotonic() - self._busy_since >= IDLE_AFTER_S and isinstance(consumer._fetcher, PacedFetcher):
            consumer._fetcher._fetch_max_wait_ms = CHANGELOG_IDLE_FETCH_WAIT_MS
        return records

    def _create_consumer(self, loop: asyncio.AbstractEventLoop) -> Any:
        consumer = super()._create_consumer(loop)
        backoff: Backoff = self.consumer.transport.backoff
        # Faust passes no retry_backoff_ms; the consumer hands this one to its fetcher and
        # group coordinator when it starts (not yet: they do not exist before start()).
        consumer._retry_backoff_ms = backoff.retry_ms
        consumer._client._retry_backoff = backoff.retry_ms / 1000.0
        backoff.apply(consumer._client)
        consumer._isolation_level = "read_committed"  # read by the fetcher it builds at start
        # Faust's 1.5 s: a seek (each recovery seeks the changelogs) waits for the fetch in flight, which
        # the broker holds this long when no record comes; recovery would pause that long, twice.
        consumer._fetch_max_wait_ms = _CHANGELOG_FETCH_WAIT_MS
        return consumer

    async def _highwaters(self, partitions: list[TP]) -> Mapping[TP, int]:  # runs in the consumer thread
        """``{tp: offset after the last committed record}`` (Faust's recovery reads up to that record).

        Faust takes the end offset minus one as the offset of the last record
        to read; after a transaction it is its commit marker, which a reader
        never gets. A changelog's end is taken once the transactions open on
        it at the call have ended (:func:`stable_ends`). The input topics (not
        read by Faust) keep their end offsets.
        """
        consumer = self._ensure_consumer()
        external = self.consumer.transport.external_topics
        changelogs = [tp for tp in partitions if tp.topic not in external]
        ends: dict[Any, int] = {}
        if changelogs:
            bootstrap = consumer._client._bootstrap_servers
            if self._scanner is None:
                self._scanner = AIOKafkaConsumer(
                    bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                    isolation_level="read_committed", client_id=f"{self.app.conf.id}-changelog-ends")
                await self._scanner.start()
            if self._watermarks is None:
                self._watermarks = AIOKafkaConsumer(
                    bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                    client_id=f"{self.app.conf.id}-changelog-watermarks")
                await self._watermarks.start()
            stable = await stable_ends(self._scanner, self._watermarks, changelogs, STABLE_WAIT_S)
            scan = {tp: end for tp, end in stable.items() if end}
            ends = {**stable, **(await last_committed(self._scanner, scan) if scan else {})}
        others = [tp for tp in partitions if tp.topic in external]
        if others:
            ends.update(await consumer.end_offsets(others))
        return ends

    async def on_thread_stop(self) -> None:
        """As Faust's, with :func:`~streams.wire.outages.stop_consumer`: ``consumer.stop()`` raises
        ``CancelledError`` while the broker is down, which left the thread (not a daemon) running."""
        # Faust's own minus its consumer.stop(): the method queue stops (faust.transport.consumer.ConsumerThread)
        await super(faust_aiokafka.AIOKafkaConsumerThread, self).on_thread_stop()
        for name in ("_scanner", "_watermarks"):
            client = getattr(self, name)
            if client is not None:
                setattr(self, name, None)
                await stop_consumer(client)
        if self._consumer is not None:
            await stop_consumer(self._consumer)


async def stable_ends(committed: AIOKafkaConsumer, uncommitted: AIOKafkaConsumer, partitions: Iterable[Any],
                      timeout: float) -> dict[Any, int]:
    """``{tp: last stable offset}``, read once every transaction open on ``tp`` at the call has ended.

    ``committed`` and ``uncommitted`` are started consumers of no group,
    ``read_committed`` and ``read_uncommitted``: their end offsets are the
    partition's last stable offset (LSO) and high watermark (HW). The HW is
    read once; the LSO is polled until it reaches it (every record written
    before the call is then committed or aborted, and a ``read_committed``
    reader sees all that was committed), at most ``timeout`` s. A partition
    still held back then keeps its LSO, with a warning naming it. Transactions
    begun after the call are not waited for. Keys as given.
    """
    tps = list(partitions)
    pairs = {tp: TopicPartition(tp.topic, tp.partition) for tp in tps}
    watermarks = await uncommitted.end_offsets(list(pairs.values()))
    deadline = time.monotonic() + timeout
    while True:
        stable = await committed.end_offsets(list(pairs.values()))
        held = [tp for tp in tps if stable[pairs[tp]] < watermarks[pairs[tp]]]
        if not held or time.monotonic() >= deadline:
            break
        await asyncio.sleep(_STABLE_POLL_S)
    if held:
        log.warning("loopwatch: a transaction is still open on %s after %.0f s: their recovery reads up to the "
                    "records before it (the others are read when it ends)",
                    ", ".join(f"{tp.topic}[{tp.partition}]" for tp in held), timeout)
    return {tp: stable[pairs[tp]] for tp in tps}


async def last_committed(scanner: AIOKafkaConsumer, ends: Mapping[TP, int],
                         timeout: float = _SCAN_TIMEOUT_S) -> dict[TP, int]:
    """``{tp: offset after the last committed record before ends[tp]}``, or the log start if it has none.

    Reads backwards a growing window at a time with ``scanner`` (a
    ``read_committed`` consumer of no group): markers and aborted records are
    never returned. After ``timeout`` s the partitions not settled keep
    ``ends[tp]`` (Faust's recovery then waits at worst as it did before).
    """
    tps = [TopicPartition(tp.topic, tp.partition) for tp in ends]
    starts = await scanner.beginning_offsets(tps)
    found: dict[TP, int] = {}
    todo = {tp: end for tp, end in zip(tps, ends.values())}
    window, deadline = _SCAN_WINDOW, time.monotonic() + timeout
    while todo and time.monotonic() < deadline:
        scanner.assign(list(todo))
        froms = {tp: max(starts[tp], end - window) for tp, end in todo.items()}
        for tp, offset in froms.items():
            scanner.seek(tp, offset)
        last: dict[TopicPartition, int] = {}
        reading = dict(todo)
        while reading and time.monotonic() < deadline:
            for tp, records in (await scanner.getmany(*reading, timeout_ms=100)).items():
                below = [r.offset for r in records if r.offset < todo[tp]]
                if below:
                    last[tp] = max(last.get(tp, -1), max(below))
            for tp in list(reading):
                if await scanner.position(tp) >= todo[tp]:
                    del reading[tp]
        for tp in list(todo):
            if tp in reading:
                continue
            if tp in last:
                found[tp] = last[tp] + 1
            elif froms[tp] <= starts[tp]:
                found[tp] = starts[tp]  # nothing committed in the partition
            else:
                continue  # only markers and aborted records in this window: look further back
            del todo[tp]
        window *= 8
    scanner.unsubscribe()
    by_pair = {(tp.topic, tp.partition): offset for tp, offset in found.items()}
    return {tp: by_pair.get((tp.topic, tp.partition), end) for tp, end in ends.items()}


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


# Messages Faust's producer buffer holds before it holds the streams back (Faust's: 100). The fleet view's
# windowed table puts a changelog record per window into it for each observation, a fetch's worth at once.
PRODUCER_BUFFER_MESSAGES = 10_000


class Producer(faust_aiokafka.Producer):
    """Faust's aiokafka producer (topic creation, changelogs of Faust's own) with the transport's backoff,
    and a buffer of :data:`PRODUCER_BUFFER_MESSAGES`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.buffer.max_messages = PRODUCER_BUFFER_MESSAGES

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
