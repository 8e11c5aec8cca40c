"""Transactional changelog writers, one per owned partition, that fence a former owner.

Input partition ``p``, rekey partition ``p`` and changelog partition ``p``
are always assigned together (co-partitioned, :mod:`streams.worker.app`). The
worker that owns ``p`` writes the states of ``p``'s keys and commits ``p``'s
input offsets through one transactional producer whose ``transactional.id``
is ``<app_id>-states-<p>``: the same for whichever worker owns ``p``. Starting
such a producer (``InitProducerId``) makes the broker's transaction
coordinator bump the id's epoch and abort a transaction of the previous
epoch still open; from then on every produce, ``AddOffsetsToTxn`` or
``EndTxn`` of a producer with the older epoch is refused
(``ProducerFenced``/``InvalidProducerEpoch``). So once a new owner has started
its writer for ``p``, a former owner (paused, cut off, or just slow to learn
of the rebalance) can neither write a state of ``p`` to the changelog nor
commit an offset of ``p``: what it tried is aborted, and readers of the
changelog (``read_committed``) never see it. See
:mod:`streams.worker.checkpoint` for why this makes the crash argument hold
for a revocation by session timeout.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Iterable

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, ProducerFenced

from streams.wire.outages import Backoff, stop_producer

__all__ = ["Fenced", "PartitionWriters", "is_fenced", "transaction_state"]

log = logging.getLogger(__name__)

# How long a transaction may stay open before the coordinator aborts it, by default (aiokafka's own
# is 60 s; the worker's setting transaction_timeout_s). A checkpoint's transaction lasts one
# changelog round trip; a worker killed with one open would hold back read_committed readers of
# its partition until this much time, were the next owner's fencing not to abort it first.
_TRANSACTION_TIMEOUT_MS = 30_000


class Fenced(Exception):
    """This worker's writer of a partition was fenced: another worker owns the partition now."""


def is_fenced(exc: BaseException) -> bool:
    """Whether ``exc`` says the producer's epoch is stale (a newer owner started its writer)."""
    if isinstance(exc, (Fenced, ProducerFenced)):
        return True
    name = type(exc).__name__
    return isinstance(exc, KafkaError) and name in {"InvalidProducerEpoch", "ProducerFenced",
                                                     "InvalidProducerIdMapping"}


class PartitionWriters:
    """The transactional producers of the partitions this worker owns.

    Arguments:
        bootstrap: broker addresses (``host:port``, comma-separated).
        app_id: the Faust app id (the consumer group; prefix of every ``transactional.id``).
        backoff: the worker's retry and reconnect backoff (:class:`streams.wire.outages.Backoff`).
        transaction_timeout_ms: how long a transaction of a writer may stay open before the broker's transaction
            coordinator aborts it and fences the writer (``transaction.timeout.ms``).
        producer_options: further :class:`aiokafka.AIOKafkaProducer` options (batch sizes, linger).
    """

    def __init__(self, bootstrap: str, app_id: str, backoff: Backoff | None = None,
                 transaction_timeout_ms: int = _TRANSACTION_TIMEOUT_MS, **producer_options: Any) -> None:
        self._bootstrap = bootstrap
        self._transaction_timeout_ms = transaction_timeout_ms
        self._app_id = app_id
        self._backoff = backoff or Backoff()
        self._options = producer_options
        self._writers: dict[int, AIOKafkaProducer] = {}
        self._retired: list[AIOKafkaProducer] = []  # writers given up since the last assignment, stopped at the next
        self._generation = -2  # the group generation of the last assignment

    def transactional_id(self, partition: int) -> str:
        return f"{self._app_id}-states-{partition}"

    def get(self, partition: int) -> AIOKafkaProducer:
        """The writer of ``partition``, ready to begin a transaction.

        Raises :class:`Fenced` if this worker holds none (does not own it), or if the writer's last
        transaction did not end (committed or aborted): a checkpoint fenced or cancelled half-way leaves
        it ``IN_TRANSACTION``, and a sender that failed leaves it ``FATAL_ERROR``; aiokafka refuses to
        begin another transaction on it (an ``AssertionError``). Such a writer is retired
        (:meth:`retire`) and the partition handled as fenced: a new writer, started at the next
        assignment, ends the open transaction (``InitProducerId``). A new writer is never started here:
        this worker may have lost the partition without knowing, and would fence its new owner.
        """
        writer = self._writers.get(partition)
        if writer is None:
            raise Fenced(f"no changelog writer for partition {partition}: not owned by this worker")
        state = transaction_state(writer)
        if state != "READY":
            self.retire(partition, writer)
            raise Fenced(f"changelog partition {partition}: its writer's last transaction did not end "
                         f"(state {state}); given up until the next assignment")
        return writer

    def retire(self, partition: int, writer: AIOKafkaProducer) -> None:
        """Give up ``writer`` as the writer of ``partition`` if it is that (and every other writer at the next
        assignment, :meth:`renew`): its transaction state is unfit for another transaction. It is stopped
        at the next assignment or :meth:`close`."""
        if self._writers.get(partition) is writer:
            del self._writers[partition]
            self._retired.append(writer)
        self.renew()

    def __contains__(self, partition: int) -> bool:
        return partition in self._writers

    async def own(self, partitions: Iterable[int], generation: int) -> None:
        """Hold a writer for each of ``partitions``, owned from group ``generation`` on; close all others.

        Called at every assignment, before the partitions' states are
        recovered. A partition this worker also owned in the generation just
        before keeps its writer (no other worker can have owned it in
        between); every other one gets a fresh writer, whose start fences its
        former owners: anything they committed is then in the changelog and
        the committed offsets, and nothing they send later is accepted.
        Raises what a producer's start raises (the broker cannot be reached).
        """
        wanted = set(partitions)
        kept = wanted if generation == self._generation + 1 else set()
        self._generation = generation
        old, self._writers = self._writers, {p: w for p, w in self._writers.items() if p in kept}
        retired, self._retired = self._retired, []
        await asyncio.gather(*(_stop(writer) for p, writer in old.items() if p not in self._writers),
                             *(_stop(writer) for writer in retired))
        started = await asyncio.gather(*(self._start(p) for p in sorted(wanted - self._writers.keys())),
                                       return_exceptions=True)
        errors = [result for result in started if isinstance(result, BaseException)]
        for result in started:
            if not isinstance(result, BaseException):
                self._writers[result[0]] = result[1]
        if errors:
            raise errors[0]

    async def _start(self, partition: int) -> tuple[int, AIOKafkaProducer]:
        producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap, client_id=f"{self._app_id}-states-{partition}",
            transactional_id=self.transactional_id(partition), enable_idempotence=True, acks="all",
            transaction_timeout_ms=self._transaction_timeout_ms, retry_backoff_ms=self._backoff.retry_ms,
            **self._options)
        self._backoff.apply(producer.client)
        try:
            await producer.start()  # InitProducerId: bumps the epoch, aborts the former owner's open transaction
        except BaseException:
            await _stop(producer)
            raise
        return partition, producer

    def renew(self) -> None:
        """Start fresh writers for every partition at the next assignment (some writer was fenced)."""
        self._generation = -2

    async def close(self, timeout: float = 10.0) -> None:
        """Close every writer (a stop), waiting at most ``timeout`` s (the broker may be down)."""
        self._generation = -2
        old, self._writers = self._writers, {}
        retired, self._retired = self._retired, []
        await asyncio.gather(*(stop_producer(writer, timeout) for writer in [*old.values(), *retired]),
                             return_exceptions=True)


def transaction_state(writer: AIOKafkaProducer) -> str:
    """The name of ``writer``'s transaction state (aiokafka's ``TransactionState``: ``READY`` between
    transactions, ``IN_TRANSACTION``, ``COMMITTING_TRANSACTION``, ``ABORTING_TRANSACTION``,
    ``ABORTABLE_ERROR``, ``FATAL_ERROR``, ``UNINITIALIZED``)."""
    return writer._txn_manager.state.name  # aiokafka internals: the transaction state machine


async def _stop(producer: AIOKafkaProducer) -> None:
    try:
        await producer.stop()
    except Exception as exc:  # a fenced or failed producer: nothing of it is needed any more
        log.debug("loopwatch: closing a changelog writer: %r", exc)
