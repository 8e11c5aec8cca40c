"""Changelog partitions read in bulk into a table's store (memory or RocksDB), before Faust's recovery reads them.

Faust's recovery hands each changelog record from its consumer thread through
a queue to a per-record step (a wait with a timeout, the remaining-offsets
sums, a check for the end of recovery): about 1,500 records a second on the
2-core development machine under load, where a plain consumer reads the same
partition at about 35,000. A worker that takes over partitions whose standby
copies are behind (the other worker restarted a moment ago), or that starts
with the memory store (nothing kept) or with RocksDB databases that others'
writes have left behind, paused those partitions for as many
seconds as their live states took to read: 31.8 s for 37,922 records after
1,000,000 events (docs/worker.md, Failover).

:class:`Restorer` reads each partition with a consumer of its own
(``read_committed``, no group, fetches of many records), from the offset
after what the store holds up to the partition's last stable offset when
the read starts, and hands each fetch's records, in changelog order, to the
store (:meth:`streams.worker.table.MemoryStore.apply_records`; RocksDB's own
``apply_changelog_batch``, one write batch per fetch), which then
holds the changelog up to the last of them, exactly as after Faust's
recovery of the same records (committed records only, in order). Faust's
recovery, which starts from the store's persisted offset, then reads only
what was written after that: usually nothing.

It is only a faster way to the same state: a read that fails or takes
longer than its budget leaves the rest to Faust's recovery (logged at
WARNING), never a partition half applied out of order. What it returns
(:class:`Restored`) names the partitions it brought to their ends: the
worker serves those at once, without waiting for Faust's recovery
(:meth:`streams.worker.table.StateTable.caught_up`).

Every partition's end is asked for in one request (``ListOffsets``), groups
of partitions (actives, then standbys) read one after the other: on the
loaded development machine each round trip costs tens of milliseconds of a
rebalance.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.wire.outages import Backoff, stop_consumer

__all__ = ["RESTORE_BUDGET_S", "Restored", "Restorer"]

log = logging.getLogger(__name__)

# Longest bulk read per rebalance: it runs inside Faust's rebalance callback, so it stays under the
# worker's rebalance timeout (10 s); what is left is Faust's recovery's to read.
RESTORE_BUDGET_S = 8.0
_FETCH_WAIT_MS = 50  # a partition at its end answers after this long (the broker holds an empty fetch)
_MAX_RECORDS = 20_000  # records per getmany
_PARTITION_FETCH_BYTES = 8 * 1024 * 1024  # per partition and fetch (aiokafka's default: 1 MiB)


@dataclass
class Restored:
    """What one :meth:`Restorer.read` did.

    Attributes:
        records: ``{tp: records applied}`` for every partition asked for.
        caught_up: the partitions whose records were all applied up to the
            end (last stable offset) the read started with, those that had
            nothing to read included; a partition the read gave up on (budget,
            failure) is not among them.
    """

    records: dict[TopicPartition, int] = field(default_factory=dict)
    caught_up: set[TopicPartition] = field(default_factory=set)


class Restorer:
    """Reads changelog partitions from given offsets to their ends, for one table; one consumer, kept.

    Arguments:
        bootstrap: aiokafka's ``host:port[,host:port]``.
        client_id: the consumer's client id (broker logs, quotas).
        backoff: the worker's reconnect pacing (:class:`streams.wire.outages.Backoff`), or None.
        budget_s: the longest :meth:`read` takes.
    """

    def __init__(self, bootstrap: str, client_id: str, backoff: Backoff | None = None,
                 budget_s: float = RESTORE_BUDGET_S) -> None:
        self._bootstrap, self._client_id, self._backoff = bootstrap, client_id, backoff
        self.budget_s = budget_s
        self._consumer: AIOKafkaConsumer | None = None

    async def read(self, starts: Mapping[TopicPartition, int] | Sequence[Mapping[TopicPartition, int]],
                   apply: Callable[[TopicPartition, list[Any]], None], budget_s: float | None = None) -> Restored:
        """Read each partition of ``starts`` from its offset to its last stable offset, calling ``apply(tp,
        records)`` (aiokafka ``ConsumerRecord``s, in offset order; tombstones have ``value`` None) per fetch.

        ``starts``: ``{tp: first offset to read}``, or a sequence of them read
        one after the other (the first group's partitions come to their ends
        first); the ends of all are asked for at once. Raises nothing but a
        cancellation: a failure or the budget (``budget_s``, else
        :attr:`budget_s`) running out is logged and ends the read (what was
        applied stays applied; the rest is Faust's recovery's).
        """
        groups = [dict(starts)] if isinstance(starts, Mapping) else [dict(group) for group in starts]
        done = Restored({tp: 0 for group in groups for tp in group})
        if not done.records:
            return done
        started, budget = time.monotonic(), self.budget_s if budget_s is None else budget_s
        try:
            await asyncio.wait_for(self._read(groups, apply, done), max(0.0, budget))
        except asyncio.TimeoutError:
            log.warning("loopwatch: bulk changelog read stopped after %.1f s with %d records read; Faust's recovery "
                        "reads the rest", budget, sum(done.records.values()))
            await self.close()  # the consumer may be mid-fetch: a fresh one next time
        except Exception as exc:  # the broker went away mid-read: Faust's recovery retries as usual
            log.warning("loopwatch: bulk changelog read failed after %d records (%r); Faust's recovery reads the "
                        "rest", sum(done.records.values()), exc)
            await self.close()
        else:
            if sum(done.records.values()):
                log.info("loopwatch: read %d changelog records of %d partition(s) in %.2f s",
                         sum(done.records.values()), len(done.records), time.monotonic() - started)
        return done

    async def _read(self, groups: list[dict[TopicPartition, int]], apply: Callable[[TopicPartition, list[Any]], None],
                    done: Restored) -> None:
        consumer = await self._started()
        ends = await consumer.end_offsets(list(done.records))  # read_committed: the last stable offsets
        for starts in groups:
            todo = {tp: ends[tp] for tp in starts if starts[tp] < ends[tp]}
            done.caught_up.update(tp for tp in starts if tp not in todo)
            if not todo:
                continue
            consumer.assign(list(todo))
            for tp in todo:
                consumer.seek(tp, starts[tp])
            try:
                while todo:
                    batches = await consumer.getmany(*todo, timeout_ms=_FETCH_WAIT_MS, max_records=_MAX_RECORDS)
                    for tp, records in batches.items():
                        records = [record for record in records if record.offset < todo[tp]]
                        if records:
                            apply(tp, records)
                            done.records[tp] += len(records)
                    for tp in list(todo):
                        if await consumer.position(tp) >= todo[tp]:
                            del todo[tp]
                            done.caught_up.add(tp)
            finally:
                consumer.unsubscribe()

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self._bootstrap, group_id=None, enable_auto_commit=False,
                isolation_level="read_committed", auto_offset_reset="earliest", client_id=self._client_id,
                fetch_max_wait_ms=_FETCH_WAIT_MS, max_partition_fetch_bytes=_PARTITION_FETCH_BYTES,
                fetch_max_bytes=4 * _PARTITION_FETCH_BYTES)
            if self._backoff is not None:
                self._backoff.apply(consumer._client)
            await consumer.start()
            self._consumer = consumer
        return self._consumer

    async def close(self) -> None:
        """Stop the consumer (a later :meth:`read` starts a new one)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await stop_consumer(consumer)
