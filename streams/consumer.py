"""Batch delivery of chosen topics for a Faust app.

Faust hands every fetched record to its conductor one at a time (two tasks
and a queue hop per record, then the agent's stream), which costs several
times what the detection engine does per event. :class:`BatchConsumer` is
Faust's aiokafka consumer with one change: the records of the topics named in
``batch_handlers`` are given to their handler a whole fetch at a time, as
``[(TP, [ConsumerRecord, ...]), ...]`` in offset order per partition. Every
other topic (the table changelogs, read while recovering and by standbys)
still takes Faust's per-record path, and group membership, assignment,
flow control on rebalance and the fetcher thread stay Faust's.

Offsets of batch-delivered topics are never acknowledged to Faust: the
handler's owner commits them itself (:meth:`BatchConsumer.commit_offsets`)
when its output for them is durable.

Use :class:`Transport` as the app's transport:
``app.transport = Transport(app.conf.broker_consumer, app, {topic: handler})``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

__all__ = ["Batch", "BatchHandler", "BatchConsumer", "Transport"]

Batch = Sequence[tuple[TP, Sequence[Any]]]  # (partition, aiokafka ConsumerRecords in offset order)
BatchHandler = Callable[[Batch, int], Awaitable[bool]]  # (batch, consumer generation id) -> handled


class BatchConsumer(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer, delivering the records of some topics in batches.

    Its transport's ``batch_handlers`` (topic name -> ``async handler(batch,
    generation_id)``) say which topics are delivered in batches. A handler is
    awaited once per fetch with every new record of its topics and returns
    whether it handled them; it must refuse (False) a batch whose
    ``generation_id`` is no longer the app's. The records of a refused batch
    are delivered again, from the committed offsets.

    Order: each partition of these topics is delivered only in order, from
    its committed offset on, since the handler's state was last loaded. A
    partition without a delivery position (at start, after each assignment,
    after :meth:`forget_positions` or a refused batch) is first sought to its
    committed offset (its beginning if none), here, between two fetches, and
    what was fetched for it before is dropped: records fetched before a seek
    can start anywhere (Faust resumes partitions before seeking; a position
    kept from an earlier assignment) and delivering records beyond the
    committed offset first would make the handler skip the ones before them.
    After that seek aiokafka returns the partition's records in order (a
    fetch in flight at the seek is discarded), so an offset gap is the log's
    own (transaction markers, compaction, retention) and is delivered;
    records below the position were delivered already and are dropped.
    Every seek goes through the consumer thread (aiokafka is not
    thread-safe; a seek from the app's loop would not wake its fetcher).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._positions: dict[TP, int] = {}  # batch-topic partition -> next offset to deliver

    def forget_positions(self, tps: Iterable[TP] | None = None) -> None:
        """Deliver nothing more of ``tps`` (default: all) until each is sought again to its committed offset.

        Call it whenever the handler drops state it built from delivered
        records (a rebalance, a reload from the last checkpoint).
        """
        if tps is None:
            self._positions.clear()
        else:
            for tp in tps:
                self._positions.pop(tp, None)

    async def _seek_committed(self, tps: list[TP]) -> None:
        """Seek ``tps`` to their committed offsets (beginnings where none) and make those the delivery positions."""
        thread = self._thread
        try:
            offsets = await thread.call_thread(self._committed_positions, thread._ensure_consumer(), tps)
        except Exception as exc:  # e.g. revoked meanwhile: still unknown, sought at the next sight
            self.log.warning("seek to committed offsets failed: %r", exc)
            return
        self._positions.update(offsets)

    @staticmethod
    async def _committed_positions(consumer: Any, tps: list[TP]) -> dict[TP, int]:  # runs in the consumer thread
        committed = await asyncio.gather(*(consumer.committed(tp) for tp in tps))
        offsets = {tp: offset for tp, offset in zip(tps, committed) if offset is not None}
        fresh = [tp for tp in tps if tp not in offsets]
        if fresh:
            offsets.update(await consumer.beginning_offsets(fresh))
        for tp, offset in offsets.items():
            consumer.seek(tp, offset)
        return offsets

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
        positions = self._positions
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
                unknown: list[TP] = []
                for tp, tp_records in records.items():
                    if active is not None and tp not in active and tp not in self._buffered_partitions:
                        continue  # paused (e.g. an active changelog partition): Faust drops these too
                    if tp not in assigned:
                        continue
                    self.app.monitor.track_tp_end_offset(tp, self.highwater(tp))
                    handler = handlers.get(tp.topic)
                    if handler is not None:
                        position = positions.get(tp)
                        if position is None:
                            unknown.append(tp)  # fetched from wherever aiokafka was: seek, then deliver
                            continue
                        if tp_records[0].offset < position:
                            tp_records = [record for record in tp_records if record.offset >= position]
                            if not tp_records:
                                continue
                        batches.setdefault(handler, []).append((tp, tp_records))
                        positions[tp] = tp_records[-1].offset + 1
                        read_offset[tp] = tp_records[-1].offset
                        continue
                    first = read_offset.get(tp)
                    for record in tp_records:  # Faust's own path (recovery, standbys)
                        if self.app.consumer_generation_id != generation:
                            break
                        if first is not None and record.offset < first:
                            continue  # fetched before the seek to the committed offset
                        await self.wait_first(callback(self._to_message(tp, record)), self.suspend_flow.wait())
                        read_offset[tp] = record.offset
                if unknown:
                    await self._seek_committed(unknown)
                for handler, batch in batches.items():
                    if not await handler(batch, generation):
                        self.forget_positions(tp for tp, _ in batch)
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
