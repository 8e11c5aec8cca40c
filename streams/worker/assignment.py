"""Partitions assigned and revoked: what the worker does when the group moves partitions to or from it.

:class:`Assignments` is mixed into :class:`streams.worker.app.Loopwatch`; Faust calls it at each rebalance:

* revocation (:meth:`~Assignments._on_revoked`): a last checkpoint of the states and offsets
  (:mod:`streams.worker.checkpoint`), the in-memory states dropped, the reader stopped; the fleet view's
  windows written and its copies dropped;
* assignment, before Faust recovers the table (:meth:`~Assignments._own_partitions`, the table's
  ``before_recovery``): the changelog writers of the active partitions started, fencing their former owners
  (:mod:`streams.worker.fencing`);
* assignment (:meth:`~Assignments._on_assigned`): the group's committed offsets of the input and rekey
  partitions read (:mod:`streams.worker.offsets`), and the reader (:mod:`streams.worker.reader`) told to read
  them from there, each once its state is recovered (:meth:`~Assignments._ready`).

A broker that does not answer on the way starts an outage (:mod:`streams.worker.outage`) instead of a crash.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from . import metrics
from .outage import is_broker_trouble

__all__ = ["Assignments"]

log = logging.getLogger(__name__)

_OFFSET_ATTEMPTS, _OFFSET_RETRY_S = 5, 1.0  # reading the committed offsets at an assignment


class Assignments:
    """The rebalance handlers of the module docstring, mixed into the worker.

    The worker provides ``app``, ``settings``, ``table``, ``fleet`` (or None), ``_reader``, ``_writers``,
    ``_offsets`` (:class:`~streams.worker.offsets.CommittedOffsets`), ``_lock``, ``_drop()``, and the
    checkpoint (``_final_checkpoint``, ``_wait_checkpoint``) and outage (``_enter_outage``, ``_outage_over``,
    ``_outage_since``) parts; it calls :meth:`_init_assignments` before it starts.
    """

    def _init_assignments(self) -> None:
        self._owned_generation: int | None = None  # the group generation whose writers this worker started
        self._revoked_at = time.monotonic()  # when the last rebalance took the partitions away (or the start)

    async def _on_revoked(self, *args: Any, **kwargs: Any) -> None:
        """Partitions move: checkpoint the states and offsets (see streams.worker.checkpoint), drop the cache;
        write the fleet view's windows and drop its copies."""
        self._revoked_at = time.monotonic()
        # The windows go out on the output producer, the checkpoint on the changelog writers: both at once.
        await asyncio.gather(self._flush_fleet_windows(), self._checkpoint_at_revoke())

    async def _flush_fleet_windows(self) -> None:
        if self.fleet is not None:
            await self.fleet.flush()
            self.fleet.windows.forget()

    async def _checkpoint_at_revoke(self) -> None:
        async with self._lock:
            try:
                fenced = await self._final_checkpoint()
                if fenced:
                    log.warning("loopwatch: partitions %s were fenced (another worker took them over, or the "
                                "transaction coordinator aborted a transaction that outlived transaction_timeout_s): "
                                "their last states here were not written; their next owner re-applies from the "
                                "last checkpoint",
                                ", ".join(map(str, sorted(fenced))))
                    metrics.FENCED.inc(len(fenced))
                    self._writers.renew()
            except Exception as exc:  # the next owner re-applies from the previous checkpoint
                log.warning("loopwatch: checkpoint at rebalance failed: %r", exc)
            self._drop()
            self._reader.revoke()

    async def _on_assigned(self, *args: Any, **kwargs: Any) -> None:
        """New assignment: read its input partitions here, from their committed offsets, once recovered.

        Faust's consumer is told to leave the input partitions alone while the committed offsets are read
        (both go to the broker; the offsets by :class:`~streams.worker.offsets.CommittedOffsets`, in this
        loop, not behind the calls Faust's recovery makes in the consumer thread at the same moment)."""
        consumer = self.app.consumer
        mine = [tp for tp in consumer.assignment() if tp.topic in consumer.transport.external_topics]
        async with self._lock:
            await self._wait_checkpoint()
            self._drop()  # the table is the truth
            self._reader.revoke()
            stopping = asyncio.ensure_future(consumer.stop_fetching(mine))
            try:
                await self._read_input_from_committed(mine)
            finally:
                await stopping

    async def _read_input_from_committed(self, mine: list[Any]) -> None:
        """The reader reads ``mine`` (the input and rekey partitions assigned) from their committed offsets."""
        generation = self.app.consumer_generation_id
        if self._outage_since is not None and self._owned_generation != generation:
            return  # no fresh writers for this assignment (Kafka did not answer): the next one reads
        for attempt in range(1, _OFFSET_ATTEMPTS + 1):
            try:
                # stable (no offset commit of a transaction pending), never Faust's consumer's answer:
                # aiokafka's consumer cannot ask for stable offsets (streams.worker.offsets)
                committed = await self._offsets.read(mine)
                break
            except Exception as exc:
                if self.app.consumer_generation_id != generation:
                    return  # the group rebalanced again: its assignment comes next
                if attempt == _OFFSET_ATTEMPTS:  # no input read until a restart otherwise
                    if is_broker_trouble(exc):
                        self._enter_outage(exc)  # a rebalance once Kafka answers assigns them again
                        return
                    log.error("loopwatch: cannot read the committed offsets: %r", exc)
                    await self.app.crash(exc)
                    return
                log.warning("loopwatch: reading the committed offsets failed (attempt %d): %r", attempt, exc)
                await asyncio.sleep(_OFFSET_RETRY_S)
        try:
            await self._reader.start()
        except Exception as exc:
            if not is_broker_trouble(exc):
                raise
            self._enter_outage(exc)
            return
        self._reader.assign(committed)
        at_once = sum(1 for tp in mine if self._ready(tp))
        log.info("loopwatch: generation %d: reading %d input partition(s) from their committed offsets, %d at once "
                 "(states caught up), %.2f s after the revocation", generation, len(mine), at_once,
                 time.monotonic() - self._revoked_at)
        self._outage_over()

    async def _own_partitions(self, generation: int) -> None:
        """Start the changelog writers of the active partitions just assigned (fencing their former owners).

        Called by the table at each assignment, before Faust recovers the
        partitions' states, so the recovery and the committed offsets read
        afterwards hold everything a former owner committed, and nothing it
        sends later is accepted. A broker that cannot be reached crashes the
        worker (a restart starts over).
        """
        if generation != self.app.consumer_generation_id:
            return  # a newer rebalance is under way: its assignment comes next (Faust's recovery skips it too)
        try:
            await self._writers.own(self._active_partitions(), generation)
        except Exception as exc:
            if is_broker_trouble(exc) and not self.app.should_stop:
                self._owned_generation = None
                self._enter_outage(exc)  # nothing is read until an assignment starts its writers
                return
            log.error("loopwatch: cannot start the changelog writers of the assigned partitions: %r", exc)
            await self.app.crash(exc)
        else:
            self._owned_generation = generation

    def _ready(self, tp: Any) -> bool:
        """Whether ``tp``'s state is recovered (its input may be applied).

        Either Faust's recovery has completed (it resumed ``tp``), or, sooner,
        the partition's writer fenced its former owners in this generation and
        the bulk read brought the store to the changelog's end
        (:attr:`streams.worker.table.StateTable.caught_up`): Faust's recovery
        has nothing of it left to read then, and the checkpoints wait until
        it has completed (``app.rebalancing``), so it never finds the store
        past the changelog's end it took.
        """
        consumer = self.app.consumer
        if consumer.flow_active and tp in consumer._get_active_partitions():
            return True
        return (tp.partition in self.table.caught_up and self._owned_generation is not None
                and self._owned_generation == self.app.consumer_generation_id and not self.app.should_stop)

    def _active_partitions(self) -> set[int]:
        """The state partitions this worker owns now (active, not standby)."""
        inputs = set(self.settings.input_topics)
        return {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic in inputs}
