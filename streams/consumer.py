"""Batch delivery of chosen topics for a Faust app.

Faust hands every fetched record to its conductor one at a time (two tasks
and a queue hop per record, then the agent's stream), which costs several
times what the detection engine does per event. :class:`BatchConsumer` is
Faust's aiokafka consumer with one change: the records of the topics named in
``batch_handlers`` are given to their handler a whole fetch at a time, as
``[(TP, [ConsumerRecord, ...]), ...]`` in offset order per partition. Every
other topic (the table changelogs, read while recovering and by standbys)
still takes Faust's per-record path, and group membership, assignment,
seeking to committed offsets, flow control on rebalance and the fetcher
thread stay Faust's.

Offsets of batch-delivered topics are never acknowledged to Faust: the
handler's owner commits them itself (:meth:`BatchConsumer.commit_offsets`)
when its output for them is durable.

Use :class:`Transport` as the app's transport:
``app.transport = Transport(app.conf.broker_consumer, app, {topic: handler})``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Mapping, Sequence

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

__all__ = ["Batch", "BatchHandler", "BatchConsumer", "InOrder", "Transport"]

Batch = Sequence[tuple[TP, Sequence[Any]]]  # (partition, aiokafka ConsumerRecords in offset order)
BatchHandler = Callable[[Batch, int], Awaitable[None]]  # (batch, consumer generation id)


class InOrder:
    """Per partition, the next offset to deliver: records are handed on only in order.

    :meth:`reset` sets the positions after a seek; :meth:`take` returns what
    of a fetched run of records to deliver and whether to seek back. Pure
    bookkeeping (no Kafka), see :class:`BatchConsumer` for why.
    """

    __slots__ = ("positions", "generation", "_gaps")

    def __init__(self) -> None:
        self.positions: dict[Any, int] = {}  # partition -> next offset to deliver
        self.generation: int | None = None  # the consumer generation the positions were sought for
        self._gaps: dict[Any, tuple[int, int]] = {}  # partition -> (position, first offset) sought back once

    def reset(self, positions: Mapping[Any, int], generation: int) -> None:
        """Positions just sought to, for ``generation``; anything else is unknown until the next reset."""
        self.positions = dict(positions)
        self.generation = generation
        self._gaps = {}

    def take(self, tp: Any, records: Sequence[Any], generation: int) -> tuple[list[Any], int | None]:
        """``(records to deliver, offset to seek tp back to or None)`` for ``records`` (offset order) of ``tp``.

        Nothing is delivered for a generation not sought yet, or a partition
        with no position. Records below the position are dropped; records
        starting beyond it are dropped and the partition is to be sought
        back, unless the same first offset came right after seeking back
        to the same position (a gap in the log itself).
        """
        position = self.positions.get(tp) if generation == self.generation else None
        if position is None:
            return [], None
        if records[0].offset < position:
            records = [record for record in records if record.offset >= position]
            if not records:
                return [], None
        first = records[0].offset
        if first > position and self._gaps.get(tp) != (position, first):
            self._gaps[tp] = (position, first)
            return [], position
        self._gaps.pop(tp, None)
        self.positions[tp] = records[-1].offset + 1
        return list(records), None


class BatchConsumer(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer, delivering the records of some topics in batches.

    Its transport's ``batch_handlers`` (topic name -> ``async handler(batch,
    generation_id)``) say which topics are delivered in batches. A handler is
    awaited once per fetch with every new record of its topics; it must check
    that ``generation_id`` is still the app's (a batch fetched before a
    rebalance is delivered again, from the committed offsets, after it).

    Order across rebalances: each partition of these topics is delivered from
    a known position on, and only in order. At every seek to the committed
    offsets (Faust's, after each assignment) the position becomes the
    committed offset, or for a partition with none its beginning (which
    aiokafka alone would not seek to); each delivery moves it past the last
    record. Records fetched before that seek may still arrive after it
    (Faust resumes partitions before seeking, and a fetch request in flight
    at the seek can land later) and start anywhere: records below the
    position are dropped (delivered already); records starting beyond it are
    dropped and the partition is sought back to the position, so they come
    again in order. Only when a fetch after that seek starts at the same
    offset again is the gap the log's own (e.g. transaction markers) and the
    records are delivered.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_order = InOrder()  # of the batch-topic partitions

    async def perform_seek(self) -> None:
        """Faust's seek to the committed offsets; batch-topic partitions with none to their beginning."""
        generation = self.app.consumer_generation_id
        await super().perform_seek()
        batch_topics = self.transport.batch_handlers
        mine = [tp for tp in self.assignment() if tp.topic in batch_topics]
        positions = {tp: self._committed_offset[tp] for tp in mine if self._committed_offset.get(tp)}
        fresh = [tp for tp in mine if tp not in positions]
        if fresh:
            earliest = await self.earliest_offsets(*fresh)
            positions.update({tp: earliest[tp] for tp in fresh})
            await self.seek_wait({tp: earliest[tp] for tp in fresh})
        self._in_order.reset(positions, generation)

    async def commit_offsets(self, offsets: Mapping[TP, int]) -> bool:
        """Commit ``{tp: next offset to read}`` for the assigned partitions among them.

        Returns False when nothing was committed (none assigned, or the group
        rebalanced meanwhile). Raises nothing; Faust crashes the app on an
        unexpected commit error.
        """
        return await self._commit(offsets)

    async def _drain_messages(self, fetcher: Any) -> None:  # the body of Faust's Fetcher service
        handlers = self.transport.batch_handlers
        callback = self.callback
        read_offset = self._read_offset
        take = self._in_order.take
        consumer_stopped, fetcher_stopped = self._stopped.is_set, fetcher._stopped.is_set
        try:
            while not (consumer_stopped() or fetcher_stopped()):
                records, active = await self._wait_next_records(1.0)
                await self.sleep(0)  # as Faust: never hold the event loop across fetches
                if not records or self.should_stop:
                    continue
                if not self.flow_active:  # a rebalance began during the fetch: its records come again
                    try:
                        await self.perform_seek()
                    except Exception as exc:  # a partition revoked meanwhile: the rebalance seeks again
                        self.log.warning("seek to committed offsets failed: %r", exc)
                    continue
                generation = self.app.consumer_generation_id
                assigned = self.assignment()  # now: a partition revoked during the fetch is another's
                batches: dict[BatchHandler, list[tuple[TP, list[Any]]]] = {}
                resend: dict[TP, int] = {}
                for tp, tp_records in records.items():
                    if active is not None and tp not in active and tp not in self._buffered_partitions:
                        continue  # paused (e.g. an active changelog partition): Faust drops these too
                    if tp not in assigned:
                        continue
                    self.app.monitor.track_tp_end_offset(tp, self.highwater(tp))
                    handler = handlers.get(tp.topic)
                    if handler is not None:
                        deliver, back = take(tp, tp_records, generation)
                        if back is not None:
                            resend[tp] = back
                        if deliver:
                            batches.setdefault(handler, []).append((tp, deliver))
                            read_offset[tp] = deliver[-1].offset
                        continue
                    first = read_offset.get(tp)
                    for record in tp_records:  # Faust's own path (recovery, standbys)
                        if self.app.consumer_generation_id != generation:
                            break
                        if first is not None and record.offset < first:
                            continue
                        await self.wait_first(callback(self._to_message(tp, record)), self.suspend_flow.wait())
                        read_offset[tp] = record.offset
                if resend:
                    self.log.info("records fetched across a seek, sought back: %r", resend)
                    try:
                        await self.seek_wait(resend)
                    except Exception as exc:  # revoked meanwhile: the rebalance seeks again
                        self.log.warning("seek back failed: %r", exc)
                for handler, batch in batches.items():
                    await handler(batch, generation)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                return
            raise  # a rebalance: Faust's Fetcher restarts this loop
        except Exception as exc:
            self.log.exception("Drain messages raised: %r", exc)
            raise


class Transport(faust_aiokafka.Transport):
    """Faust's aiokafka transport with :class:`BatchConsumer`.

    Arguments:
        url, app: as Faust's transport (``app.conf.broker_consumer``, the app).
        batch_handlers: topic name -> batch handler (see :class:`BatchConsumer`).
    """

    Consumer = BatchConsumer

    def __init__(self, url: Any, app: Any, batch_handlers: Mapping[str, BatchHandler]) -> None:
        super().__init__(url, app)
        self.batch_handlers = dict(batch_handlers)
