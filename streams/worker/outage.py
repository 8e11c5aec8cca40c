"""Riding out a Kafka broker that does not answer: back to the last checkpoint, then on once it answers.

A broker that hangs (a stalled VM, a full disk, SIGSTOP) or cannot be reached
leaves every request of the worker unanswered until aiokafka's
``request_timeout_ms`` (40 s): the verdicts of the last batches expire unsent
(``KafkaTimeoutError``), a checkpoint's transaction times out
(``RequestTimedOut``). The worker used to crash there, every worker of the
group at once. Now such a failure starts an outage (:meth:`Outages._enter_outage`):

1. the worker stops reading its input and forgets every in-memory state and
   everything no checkpoint covered (as a crash would, without the exit): the
   table and the committed offsets are the truth again. Its changelog writers
   are renewed at the next assignment (the new ones' ``InitProducerId`` ends
   the open transaction: committed or aborted, never half) and its output
   producer is replaced (records it still held are given up);
2. it asks the broker every few seconds (backoff up to
   :data:`PROBE_MAX_S`) whether it answers; once it does, it has its consumer
   rejoin the group unless the group rebalanced by itself (a broker frozen
   past the session timeout expires every member when it resumes);
3. the assignment that follows starts fresh writers, Faust's recovery brings
   the table up to the committed changelog (a commit whose answer was lost is
   in it), and the worker reads again from the committed offsets: the events
   since the last checkpoint are applied again, their verdicts published
   again byte for byte (:mod:`streams.worker.checkpoint`, "Why nothing is
   lost"). The outage ends there.

If Kafka has not answered for ``broker_outage_limit_s`` the worker gives up and
exits (status 1), as before the limit existed. Failures that are not the
broker's (a record too large, a bug) still crash the worker at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiokafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError

from . import metrics
from .fencing import is_fenced

__all__ = ["Outages", "SenderFailureLine", "is_broker_trouble", "quiet_sender_failures"]

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 5.0  # one probe of the broker (a metadata request): a hung broker never answers
PROBE_FIRST_S, PROBE_MAX_S = 1.0, 10.0  # the wait between probes doubles from the first to the most
SETTLE_S = 15.0  # after the broker answers: how long the group may take to rebalance by itself
# After a fence: how long a worker that another worker took partitions from may take to learn of that
# rebalance (its next heartbeat, every heartbeat_interval_s) before it rejoins by itself. An early rejoin
# costs a rebalance, never correctness: a worker fenced by a takeover was removed from the group and has
# to rejoin anyway; one fenced by its transaction timeout owns partitions nobody reads until it does.
FENCE_SETTLE_S = 3.0
REJOIN_WAIT_S = 60.0  # after a rejoin: how long the assignment may take before the next probe


def is_broker_trouble(exc: BaseException) -> bool:
    """Whether ``exc`` says the broker did not answer (a timeout, a lost connection, a retriable Kafka error).

    A fence (another worker owns the partition) is not: it is handled as a lost partition. A plain
    :class:`~aiokafka.errors.KafkaError` that aiokafka raised from another error is judged by that error.
    """
    for _ in range(_MOST_WRAPPED):
        if is_fenced(exc):
            return False
        if isinstance(exc, (asyncio.TimeoutError, KafkaTimeoutError, KafkaConnectionError, ConnectionError)):
            return True
        if isinstance(exc, AssertionError) and str(exc) == _NO_BROKER_IN_METADATA:
            return True
        if type(exc) is KafkaError and exc.__cause__ is not None:
            exc = exc.__cause__  # aiokafka's wrapper: what it wraps says
            continue
        return isinstance(exc, KafkaError) and bool(getattr(exc, "retriable", False))
    return False


# A transactional producer's sender wraps what it met in a plain KafkaError, twice: a coordinator
# lookup whose connection closed (the broker going down mid-request) becomes
# ``KafkaError(repr(KafkaConnectionError(...)))``, and the sender task that raised it fails every
# batch it holds with ``KafkaError("Unexpected error during batch delivery")`` caused by that one. The
# cause is the broker's trouble; the worker used to crash there (a broker restart under a checkpoint).
_MOST_WRAPPED = 5


# aiokafka's coordinator lookup (a transactional producer's start, a group join) asserts this when the
# cluster metadata names no broker: what a broker resuming from a hang answers for a moment
# ("No broker metadata found in MetadataResponse"). The next probe finds it whole.
_NO_BROKER_IN_METADATA = "Did we not perform bootstrap?"


class SenderFailureLine(logging.Filter):
    """aiokafka's transactional sender logs "Unexpected error in sender routine" at ERROR with a traceback before
    it fails every batch with that error. When the error is the broker's trouble (:func:`is_broker_trouble`:
    the connection of a coordinator lookup closed), the worker rides it out as an outage, which it says
    itself: the record becomes one WARNING line naming the error, without the traceback of a bug. Install
    with :func:`quiet_sender_failures`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _SENDER_FAILURE and record.exc_info and record.exc_info[1] is not None \
                and is_broker_trouble(record.exc_info[1]):
            cause = record.exc_info[1]
            for _ in range(_MOST_WRAPPED):  # what aiokafka wrapped
                cause = cause.__cause__ or cause
            record.msg = "%s: %r, the broker's trouble (ridden out as an outage)"
            record.args = (_SENDER_FAILURE, cause)
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True


_SENDER_FAILURE = "Unexpected error in sender routine"  # aiokafka.producer.sender (0.8 to 0.14), log.exception
_SENDER_LOGGER = "aiokafka.producer.sender"


def quiet_sender_failures() -> None:
    """Install :class:`SenderFailureLine` on aiokafka's sender logger (once per process)."""
    logger = logging.getLogger(_SENDER_LOGGER)
    if not any(isinstance(f, SenderFailureLine) for f in logger.filters):
        logger.addFilter(SenderFailureLine())


class Outages:
    """The outage handling of the module docstring, mixed into the worker.

    The worker provides ``app``, ``settings``, ``_reader``, ``_writers``, ``_checkpoint`` (the
    checkpoint in flight),
    ``_owned_generation`` (the generation whose writers it started), ``_drop()``
    and ``_replace_outputs()``; it calls :meth:`_enter_outage` where
    a send or a checkpoint fails for the broker's sake, refuses to handle
    events or start a checkpoint while :attr:`_outage_since` is set, and calls
    :meth:`_outage_over` once an assignment has fresh writers and reads again.
    """

    def _init_outages(self) -> None:
        self._outage_since: float | None = None  # time.monotonic() of the first failure, None when all is well
        self._outage_error: BaseException | None = None
        self._outage_task: asyncio.Future | None = None
        self._fence_rejoin: asyncio.Future | None = None  # see _rejoin_if_still_assigned

    def _enter_outage(self, exc: BaseException) -> None:
        """The broker did not answer: back to the last checkpoint, and ride it out (no-op if already doing so).

        Synchronous (callable with or without the worker's lock held): the
        reader stops delivering at once, a batch being handled is dropped when
        its sends return (its epoch is gone).
        """
        self._outage_error = exc
        if self._outage_since is not None:
            return
        limit = self.settings.broker_outage_limit_s
        if limit <= 0:
            log.error("loopwatch: Kafka did not answer (%r), stopping (broker_outage_limit_s is 0)", exc)
            asyncio.ensure_future(self.app.crash(exc))
            return
        self._outage_since = time.monotonic()
        metrics.KAFKA_OUTAGES.inc()
        log.warning("loopwatch: Kafka did not answer (%r): reading stops, the states go back to the last checkpoint; "
                    "the worker goes on from there once Kafka answers (it gives up after %g s)", exc, limit)
        self._reader.revoke()
        checkpoint = self._checkpoint
        if checkpoint is not None and checkpoint is not asyncio.current_task():
            # its states are dropped, and it may wait for ever on sends of the producer replaced below;
            # the transaction it left open is ended by the fresh writers (InitProducerId)
            checkpoint.cancel()
        self._drop()
        self._writers.renew()
        self._owned_generation = None  # the assignment that ends the outage starts fresh writers
        self._replace_outputs()
        self._outage_task = asyncio.ensure_future(self._ride_out())

    def _outage_over(self) -> None:
        """An assignment has fresh writers and reads from the committed offsets again."""
        if self._outage_since is None:
            return
        took = time.monotonic() - self._outage_since
        self._outage_since = None
        log.warning("loopwatch: Kafka answers again: reading from the last checkpoint after %.0f s (the events "
                    "since it are applied again, their verdicts published again)", took)
        task, self._outage_task = self._outage_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _ride_out(self) -> None:
        """Probe the broker with backoff; once it answers, have the group rebalance; give up past the limit."""
        wait = PROBE_FIRST_S
        rebalances = self.app.rebalancing_count
        while self._outage_since is not None:
            since = self._outage_since
            if time.monotonic() - since > self.settings.broker_outage_limit_s:
                error = RuntimeError(f"Kafka has not answered for {self.settings.broker_outage_limit_s:g} s "
                                     f"(broker_outage_limit_s); last error: {self._outage_error!r}")
                log.error("loopwatch: %s: stopping", error)
                await self.app.crash(error)
                return
            if not await self._broker_answers():
                await asyncio.sleep(wait)
                wait = min(PROBE_MAX_S, wait * 2)
                continue
            wait = PROBE_FIRST_S
            # A broker that was frozen expires the members' sessions when it resumes: that rebalance
            # (or one under way) brings the assignment that ends the outage.
            deadline = time.monotonic() + SETTLE_S
            while self._outage_since is not None and time.monotonic() < deadline:
                if self.app.rebalancing or self.app.rebalancing_count != rebalances:
                    break
                await asyncio.sleep(0.2)
            if self._outage_since is None:
                return
            if not self.app.rebalancing and self.app.rebalancing_count == rebalances:
                log.info("loopwatch: Kafka answers: rejoining the group to be assigned the partitions again")
                await self._rejoin()
            rebalances = self.app.rebalancing_count
            deadline = time.monotonic() + REJOIN_WAIT_S
            while self._outage_since is not None and time.monotonic() < deadline:
                await asyncio.sleep(0.2)

    async def _broker_answers(self) -> bool:
        consumer = self._reader._consumer  # the reader's client: a metadata request is a real round trip
        if consumer is None:
            return False
        try:
            await asyncio.wait_for(consumer._client.fetch_all_metadata(), PROBE_TIMEOUT_S)
            return True
        except Exception:  # timeout, refused, ...: not yet
            return False

    def _rejoin_if_still_assigned(self, partitions: set[int]) -> None:
        """After a fence: rejoin the group if no rebalance follows within :data:`FENCE_SETTLE_S` while the group
        still assigns ``partitions`` to this worker.

        A fence does not always mean another worker took the partitions over: the transaction coordinator
        also fences a writer whose transaction outlived ``transaction.timeout.ms`` (a broker that hung past
        it). No rebalance then comes by itself, and the dropped partitions would wait for one forever.
        """
        rebalances = self.app.rebalancing_count
        self._fence_rejoin = asyncio.ensure_future(self._rejoin_after_fence(partitions, rebalances))

    async def _rejoin_after_fence(self, partitions: set[int], rebalances: int) -> None:
        deadline = time.monotonic() + FENCE_SETTLE_S
        while time.monotonic() < deadline:
            if self.app.should_stop or self.app.rebalancing or self.app.rebalancing_count != rebalances:
                return
            await asyncio.sleep(0.2)
        try:
            still = sorted({tp.partition for tp in self.app.consumer.assignment()} & partitions)
        except Exception:  # no consumer (stopping): nothing to rejoin
            return
        if still and not self.app.rebalancing and self.app.rebalancing_count == rebalances:
            log.warning("loopwatch: partitions %s are still assigned to this worker %.0f s after their writers "
                        "were fenced (a transaction the broker timed out): rejoining the group",
                        ", ".join(map(str, still)), FENCE_SETTLE_S)
            await self._rejoin()

    async def _rejoin(self) -> None:
        thread = self.app.consumer._thread
        try:
            await thread.call_thread(_request_rejoin, thread._ensure_consumer())
        except Exception as exc:  # the next probe tries again
            log.warning("loopwatch: could not ask the group to rebalance: %r", exc)


async def _request_rejoin(consumer: Any) -> None:  # runs in Faust's consumer thread
    consumer._coordinator.request_rejoin()  # aiokafka internals: the consumer's group coordinator
