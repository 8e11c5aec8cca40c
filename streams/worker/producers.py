"""The worker's output producer: verdicts, loop events, dead letters, rekeyed and fleet records go out on it.

:class:`OutputProducers` is mixed into :class:`streams.worker.app.Loopwatch`.
:meth:`~OutputProducers._open_outputs` starts the producer once every output topic exists, and
checks first that every input topic has ``partitions`` partitions (the state table's: a state lives in the
changelog partition of its input partition), crashing the worker with :func:`partition_mismatch`'s text if
not. In an outage (:mod:`streams.worker.outage`) :meth:`~OutputProducers._replace_outputs` drops the
producer; the next batch opens a new one.

A producer of the worker's own (own connection, no transactions): aiokafka has one produce request in flight
per broker connection, so verdicts would otherwise wait behind a checkpoint's state writes, and a transaction
would hold them back from ``read_committed`` readers until its commit. The changelog writers are separate
(:mod:`streams.worker.fencing`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiokafka import AIOKafkaProducer

from streams.wire.outages import stop_producer

from .outputs import Outputs

__all__ = ["OutputProducers", "partition_mismatch"]

log = logging.getLogger(__name__)


class OutputProducers:
    """Opening, replacing and stopping the output producer, mixed into the worker.

    The worker provides ``app``, ``settings``, ``processor`` (its ``topics``), ``fleet`` (or None), the topics
    ``verdicts``, ``loop_events`` and ``dead_letters``, ``_bootstrap`` and ``_backoff``; it calls
    :meth:`_init_producers` before it starts.
    """

    def _init_producers(self) -> None:
        self._out: Outputs | None = None  # opened with its producer, at start or on the first batch
        self._producers: tuple[AIOKafkaProducer, ...] = ()
        self._out_lock = asyncio.Lock()

    def _replace_outputs(self) -> None:
        """Drop the output producer (an outage): the records it still holds are given up, a new one opens
        with the next batch."""
        producers, self._producers, self._out = self._producers, (), None
        for producer in producers:
            asyncio.ensure_future(stop_producer(producer, 1.0))

    async def _open_outputs(self) -> Outputs:
        """The output batches, once the producer runs and every output topic exists.

        Also checks that every input topic has ``partitions`` partitions (the
        state table's): a state lives in the changelog partition of its input
        partition. Raises ``RuntimeError`` (and crashes the app) if not.
        """
        async with self._out_lock:
            if self._out is None and self.app.should_stop:
                raise RuntimeError("the worker is stopping")
            if self._out is None:
                fleet = self.fleet.declare() if self.fleet is not None else []
                for topic in (self.verdicts, self.loop_events, self.dead_letters, *fleet):
                    await topic.maybe_declare()
                started: list[AIOKafkaProducer] = []
                topics = self.processor.topics
                outputs = [topics.verdicts, topics.loop_events, topics.dead_letters, topics.rekey, *(self.fleet.output_topics if self.fleet is not None else [])]
                try:
                    started.append(await self._new_producer("outputs"))
                    producer = started[0]
                    counts = await _partition_counts(producer.client, [*outputs, *self.settings.input_topics])
                    wrong = {name: counts[name] for name in self.settings.input_topics
                             if counts[name] != self.settings.partitions}
                    if wrong:
                        error = RuntimeError(partition_mismatch(self.settings.partitions, wrong))
                        log.error("loopwatch: %s", error)
                        await self.app.crash(error)
                        raise error
                except BaseException:
                    await _stop(*started)
                    raise
                self._producers = (producer,)
                self._out = Outputs(producer, {name: counts[name] for name in outputs})
            return self._out

    async def _new_producer(self, name: str) -> AIOKafkaProducer:
        s = self.settings
        producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap, client_id=f"{s.app_id}-{name}",
            acks="all" if s.producer_acks == -1 else s.producer_acks, linger_ms=s.producer_linger_ms,
            max_batch_size=s.producer_max_batch_size,
            max_request_size=max(1_000_000, s.producer_max_batch_size + 65_536),
            retry_backoff_ms=self._backoff.retry_ms)
        self._backoff.apply(producer.client)
        try:
            await producer.start()
        except BaseException:
            await producer.stop()  # a failed start may leave its client open
            raise
        return producer

    async def _stop_outputs(self, until: float) -> None:
        """Stop the output producers (a stop), giving up what they still hold by ``until`` (the loop's time)."""
        loop = asyncio.get_running_loop()
        async with self._out_lock:  # producers being opened are kept and stopped too
            producers, self._producers, self._out = self._producers, (), None
            for producer in producers:  # records still unacknowledged are given up: no checkpoint covers them
                await stop_producer(producer, max(0.1, until - loop.time()))


def partition_mismatch(partitions: int, wrong: dict[str, int]) -> str:
    """Why the worker cannot read input topics whose partition counts (``wrong``) differ from ``partitions``."""
    counts = set(wrong.values())
    fix = (f"run the worker with --partitions {counts.pop()}, or create the input topic with {partitions}"
           if len(counts) == 1 else f"give every input topic {partitions}")
    return (f"input topic partitions must equal --partitions ({partitions}, the state table's): "
            + ", ".join(f"{name} has {count}" for name, count in wrong.items())
            + f". To fix: {fix} partitions before producing to it (a topic Kafka creates on the first produce "
              "gets the broker's num.partitions)")


async def _partition_counts(client: Any, names: list[str], timeout: float = 30.0) -> dict[str, int]:
    """Partition count of each topic, waiting (up to ``timeout`` s) for topics just created to show up.

    Asks for the metadata of all topics: aiokafka logs an error for every
    request naming a topic the broker does not know yet.
    """
    deadline = time.monotonic() + timeout
    while True:
        cluster = await client.fetch_all_metadata()
        counts = {name: len(cluster.partitions_for_topic(name) or ()) for name in names}
        missing = [name for name, count in counts.items() if not count]
        if not missing:
            return counts
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics not found on the broker: {', '.join(missing)}")
        await asyncio.sleep(0.1)


async def _stop(*producers: AIOKafkaProducer) -> None:
    """Stop each producer, the others too when one's stop raises."""
    if producers:
        try:
            await producers[0].stop()
        finally:
            await _stop(*producers[1:])
