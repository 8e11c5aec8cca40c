"""Reading the worker's input partitions in the app's own event loop.

Faust's consumer runs aiokafka in a thread of its own: every fetch crosses
between that thread and the app's loop twice, and the two threads take turns
at the GIL, which costs the verdict path tens of milliseconds at the tail.
So Faust's consumer keeps what only a group member can do -- membership,
assignment (input partitions co-partitioned with the state table), table
recovery, standbys, commits -- and stops fetching the input partitions
(:meth:`streams.worker.consumer.Consumer.stop_fetching`), and :class:`InputReader`
fetches exactly the partitions Faust assigned, with a group-less aiokafka
consumer in the app's loop, from the offsets the worker gives it.

Order: after :meth:`InputReader.assign`, each partition's records come in
offset order from the given offset (aiokafka discards a fetch in flight
across it); gaps in the offsets are the log's own (transaction markers,
compaction, retention). A batch fetched before an assign or revoke carries an
older :attr:`InputReader.epoch` and must be refused by the handler.

Idle partitions cost a fetch request each ``fetch_max_wait_ms`` (25 ms), and
a fetch request costs CPU per partition it names: with nothing to read for
:data:`~streams.worker.fetch_pacing.IDLE_AFTER_S`, the broker is asked to hold each fetch up to
:data:`IDLE_FETCH_WAIT_MS` instead (a record arriving on any partition still
ends it at once). The first response that brings records sets the wait back
before the next request is built (:mod:`streams.worker.fetch_pacing`), so a partition
left out of a request because its records were being handled never waits
behind an idle-length fetch; a partition just resumed (after a rebalance) may
wait up to :data:`IDLE_FETCH_WAIT_MS` for its first fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Awaitable, Callable, Mapping, Sequence

import time

from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.wire.outages import Backoff, stop_consumer

from .fetch_pacing import IDLE_AFTER_S, pace

__all__ = ["Batch", "BatchHandler", "InputReader"]

log = logging.getLogger(__name__)

Batch = Sequence[tuple[TopicPartition, Sequence[Any]]]  # (partition, aiokafka ConsumerRecords in offset order)
BatchHandler = Callable[[Batch, int], Awaitable[None]]  # (batch, epoch it was fetched in)

_IDLE_S = 0.05  # nothing assigned or ready: look again after this long
IDLE_FETCH_WAIT_MS = 250  # the fetch wait after IDLE_AFTER_S (streams.worker.fetch_pacing) with no record


class InputReader:
    """A group-less aiokafka consumer delivering the assigned partitions a fetch at a time.

    Arguments:
        bootstrap_servers: ``host:port[,host:port...]``.
        handler: ``async handler(batch, epoch)``, awaited once per fetch with
            its records; nothing is fetched meanwhile. It must refuse a batch
            whose ``epoch`` is no longer :attr:`epoch`.
        ready: ``ready(tp) -> bool``: whether ``tp``'s records may be
            delivered yet (the worker's state of that partition is
            recovered); an assigned partition is fetched only once it is.
        on_error: ``async on_error(exc)``, awaited when fetching or the
            handler raises; the reader stops (so on_error must not await
            :meth:`stop`: it runs in the reader's own task).
        backoff: the consumer's retry and reconnect backoff (:mod:`streams.wire.outages`).
        consumer_options: more :class:`aiokafka.AIOKafkaConsumer` options
            (``fetch_max_wait_ms``, ``max_poll_records``, ``client_id``...).
    """

    def __init__(self, bootstrap_servers: str, handler: BatchHandler, ready: Callable[[TopicPartition], bool],
                 on_error: Callable[[BaseException], Awaitable[Any]], backoff: Backoff = Backoff(),
                 **consumer_options: Any) -> None:
        self._backoff = backoff
        self._bootstrap = bootstrap_servers
        self._handler = handler
        self._ready = ready
        self._on_error = on_error
        self._options = consumer_options
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task | None = None
        self._starting: asyncio.Lock | None = None
        self._fetching: set[TopicPartition] = set()  # assigned and resumed
        self._revoked = False  # nothing is resumed until the next assign
        self._assigned = asyncio.Event()  # an idle reader looks at its partitions at once after an assign
        self.epoch = 0  # changes at every assign and revoke

    async def start(self) -> None:
        """Connect (once; later calls return at once, restarting the fetching if a failure ended it). Raises
        aiokafka's errors if the broker is unreachable."""
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._consumer is not None:
                if self._task is None or self._task.done():  # ended by a failure (on_error was told): fetch again
                    self._task = asyncio.ensure_future(self._run())
                return
            consumer = AIOKafkaConsumer(bootstrap_servers=self._bootstrap, group_id=None, enable_auto_commit=False,
                                        auto_offset_reset="earliest", retry_backoff_ms=self._backoff.retry_ms,
                                        **self._options)
            self._backoff.apply(consumer._client)
            await consumer.start()
            fetcher = consumer._fetcher  # aiokafka internals: built by start(), its routine already running
            pace(fetcher, fetcher._fetch_max_wait_ms)
            self._consumer = consumer
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop fetching (a batch being handled is cancelled) and close the consumer."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await stop_consumer(consumer)  # consumer.stop() raises CancelledError while the broker is down

    def assign(self, offsets: Mapping[Any, int | None]) -> None:
        """Read exactly the partitions of ``{(topic, partition): next offset}``, each from its offset (None:
        from the partition's beginning, where a fresh assignment of this group-less consumer starts).

        Replaces the previous assignment. A partition is fetched once
        ``ready(tp)`` holds. Call after :meth:`start`.
        """
        consumer = self._live()
        self.epoch += 1
        tps = {TopicPartition(tp[0], tp[1]): offset for tp, offset in offsets.items()}
        consumer.assign(list(tps))
        for tp, offset in tps.items():
            if offset is not None:
                consumer.seek(tp, offset)
        if tps:
            consumer.pause(*tps)
        self._fetching = set()
        self._revoked = False
        self._assigned.set()

    def revoke(self) -> None:
        """Stop delivering every partition (until the next :meth:`assign`)."""
        self.epoch += 1
        if self._consumer is not None:
            assigned = self._consumer.assignment()
            if assigned:
                self._consumer.pause(*assigned)
        self._fetching = set()
        self._revoked = True

    def reading(self) -> set[tuple[str, int]]:
        """``{(topic, partition)}`` of the partitions being fetched now (assigned and ready)."""
        return {(tp.topic, tp.partition) for tp in self._fetching} if self._consumer is not None else set()

    def highwater(self, topic: str, partition: int) -> int | None:
        """The partition's high watermark as of the last fetch (None if unknown or not assigned)."""
        if self._consumer is None:
            return None
        try:
            return self._consumer.highwater(TopicPartition(topic, partition))
        except Exception:  # not assigned
            return None

    async def lags(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): records between the fetch position and the high watermark}``, assigned ones known."""
        consumer, lags = self._consumer, {}
        for tp in consumer.assignment() if consumer is not None else ():
            highwater = self.highwater(tp.topic, tp.partition)
            if highwater is None:
                continue
            try:
                lags[(tp.topic, tp.partition)] = max(0, highwater - await consumer.position(tp))
            except Exception:  # unassigned meanwhile
                continue
        return lags

    def _live(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("InputReader is not started")
        return self._consumer

    async def _run(self) -> None:
        consumer = self._live()
        fetcher = consumer._fetcher
        busy, last_records = fetcher._fetch_max_wait_ms, time.monotonic()
        try:
            while True:
                if not self._resume_ready(consumer):
                    self._assigned.clear()
                    with contextlib.suppress(asyncio.TimeoutError):  # ready(tp) is looked at again then
                        await asyncio.wait_for(self._assigned.wait(), _IDLE_S)
                    continue
                epoch = self.epoch
                records = await consumer.getmany(timeout_ms=int(_IDLE_S * 1000))
                if not records:
                    if time.monotonic() - last_records >= IDLE_AFTER_S:
                        fetcher._fetch_max_wait_ms = max(busy, IDLE_FETCH_WAIT_MS)
                    continue
                last_records = time.monotonic()
                # Fetched across an assign or revoke (from another task): dropped. An assign
                # seeks every partition it gives; a revoke holds them until the next assign.
                if epoch == self.epoch:
                    await self._handler(list(records.items()), epoch)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # stop()
            log.error("loopwatch: reading the input partitions failed: %r", exc)  # not ours: never die silently
            await self._on_error(exc)
        except Exception as exc:
            log.exception("loopwatch: reading the input partitions failed: %r", exc)
            await self._on_error(exc)

    def _resume_ready(self, consumer: AIOKafkaConsumer) -> bool:
        """Resume the assigned partitions that became ready; whether any is being fetched."""
        if self._revoked:
            return False
        assigned = consumer.assignment()
        if len(self._fetching) < len(assigned):
            ready = [tp for tp in assigned if tp not in self._fetching and self._ready(tp)]
            if ready:
                consumer._fetcher._fetch_max_wait_ms = consumer._fetcher.busy_wait_ms  # their first fetch soon
                consumer.resume(*ready)
                self._fetching.update(ready)
        return bool(self._fetching)
