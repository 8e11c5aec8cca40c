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

__all__ = ["Batch", "BatchHandler", "BatchConsumer", "Transport"]

Batch = Sequence[tuple[TP, Sequence[Any]]]  # (partition, aiokafka ConsumerRecords in offset order)
BatchHandler = Callable[[Batch, int], Awaitable[None]]  # (batch, consumer generation id)


class BatchConsumer(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer, delivering the records of some topics in batches.

    Its transport's ``batch_handlers`` (topic name -> ``async handler(batch,
    generation_id)``) say which topics are delivered in batches. A handler is
    awaited once per fetch with every new record of its topics; it must check
    that ``generation_id`` is still the app's (a batch fetched before a
    rebalance is delivered again, from the committed offsets, after it).
    """

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
                for tp, tp_records in records.items():
                    if active is not None and tp not in active and tp not in self._buffered_partitions:
                        continue  # paused (e.g. an active changelog partition): Faust drops these too
                    if tp not in assigned:
                        continue
                    first = read_offset.get(tp)
                    if first is not None and tp_records[0].offset < first:
                        # fetched before the seek to the committed offset: already processed
                        tp_records = [record for record in tp_records if record.offset >= first]
                        if not tp_records:
                            continue
                    self.app.monitor.track_tp_end_offset(tp, self.highwater(tp))
                    handler = handlers.get(tp.topic)
                    if handler is not None:
                        batches.setdefault(handler, []).append((tp, tp_records))
                        read_offset[tp] = tp_records[-1].offset
                        continue
                    for record in tp_records:  # Faust's own path (recovery, standbys)
                        if self.app.consumer_generation_id != generation:
                            break
                        await self.wait_first(callback(self._to_message(tp, record)), self.suspend_flow.wait())
                        read_offset[tp] = record.offset
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
