"""The group's committed input offsets, read stable, in the app's own event loop.

At each assignment the worker reads the committed offset of every input
partition it got before its reader starts (:meth:`streams.worker.assignment.Assignments._on_assigned`).
Faust's consumer answers such a call in its own thread, one call after
another, so it waited there behind the changelog ends that Faust's recovery
asks for at the same moment (:meth:`streams.worker.consumer._ConsumerThread._highwaters`):
0.2-0.3 s of a failover on the loaded development machine. :class:`CommittedOffsets`
sends the request (``OffsetFetch`` of the group, any client may send it) from
the app's loop with an admin client of its own, and keeps the group
coordinator's id between calls.

Stable offsets only (KIP-447). The worker commits its input offsets inside its
checkpoints' transactions (:mod:`streams.worker.checkpoint`, step c). Until such
a transaction has ended -- committed or aborted, and its marker applied by the
group coordinator, which the coordinator does a moment after ``EndTxn`` has
returned -- a plain ``OffsetFetch`` answers the offset committed before it: a new
owner starting there would apply the transaction's events a second time
(their states are restored from the committed changelog with them). So the
request is ``OffsetFetch`` v7 with ``require_stable``
(:mod:`streams.worker.offset_fetch`; aiokafka sends at most v3, without the
flag): the coordinator answers ``UNSTABLE_OFFSET_COMMIT`` for a partition with
such a transaction pending, and :meth:`CommittedOffsets.read` asks again, with
backoff, until every partition is stable. A new owner has fenced the former
owner before it reads (:mod:`streams.worker.fencing`: its ``InitProducerId``
ends the open transaction), so the wait is that of the marker, a few ms; a
transaction left open otherwise ends within the writers' transaction timeout
(then the coordinator aborts it), and :class:`UnstableOffsets` is raised only
past ``stable_wait_s``.

It only reads: the offsets are still committed by the group member (in the
checkpoints' transactions). A partition the group has no offset for (a fresh
group; the rekey topic, which nothing may ever have been written to) gets
None: read from its beginning.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, for_code

from streams.wire.outages import Backoff

from .offset_fetch import UNSTABLE_OFFSET_COMMIT, StableOffsetFetch

__all__ = ["CommittedOffsets", "UnstableOffsets"]

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 5.0  # one OffsetFetch round trip: a broker that does not answer raises this soon
RETRY_FIRST_S, RETRY_MAX_S = 0.01, 0.5  # the wait between reads of unstable offsets doubles from the first to the most
_COORDINATOR_MOVED = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


class UnstableOffsets(KafkaError):
    """Some partition's offset commit was still pending in a transaction after ``stable_wait_s``."""

    retriable = True  # the transaction coordinator ends it: broker trouble if it does not


class CommittedOffsets:
    """Reads a consumer group's stable committed offsets with an admin client (started at the first read, kept).

    Arguments:
        bootstrap: aiokafka's ``host:port[,host:port]``.
        group_id: the consumer group (the worker's app id).
        client_id: the admin client's id.
        backoff: the worker's retry and reconnect pacing, or None.
        stable_wait_s: longest wait, seconds, for partitions whose offset commit a transaction holds pending
            (the transaction timeout of the writers, plus the broker's look for timed-out transactions).
    """

    def __init__(self, bootstrap: str, group_id: str, client_id: str, backoff: Backoff | None = None,
                 stable_wait_s: float = 45.0) -> None:
        self._bootstrap, self._group, self._client_id, self._backoff = bootstrap, group_id, client_id, backoff
        self._stable_wait_s = stable_wait_s
        self._admin: AIOKafkaAdminClient | None = None
        self._coordinator: int | None = None
        self.unstable_reads = 0  # reads answered UNSTABLE_OFFSET_COMMIT for some partition, since the start

    async def read(self, tps: Iterable[Any]) -> dict[Any, int | None]:
        """``{tp: committed offset, or None if the group has none}`` for ``tps`` (keys as given, anything with
        ``topic`` and ``partition``), once no transaction holds an offset commit of theirs pending.

        Raises :class:`UnstableOffsets` past ``stable_wait_s``, ``asyncio.TimeoutError`` if the coordinator does
        not answer within :data:`REQUEST_TIMEOUT_S`, and aiokafka's errors; a failed call forgets the coordinator
        and the client.
        """
        tps = list(tps)
        if not tps:
            return {}
        topics: dict[str, set[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, set()).add(tp.partition)
        deadline = time.monotonic() + self._stable_wait_s
        wait = RETRY_FIRST_S
        while True:
            try:
                found, unstable, moved = await self._fetch(topics)
            except BaseException:
                await self.close()
                raise
            if not unstable and not moved:
                return {tp: found.get((tp.topic, tp.partition)) for tp in tps}
            if moved:
                self._coordinator = None
            else:
                self.unstable_reads += 1
            if time.monotonic() + wait > deadline:
                raise UnstableOffsets(
                    f"the offset commits of {', '.join(unstable)} of group {self._group} still pending after "
                    f"{self._stable_wait_s:g} s" if unstable else
                    f"the coordinator of group {self._group} still moving after {self._stable_wait_s:g} s")
            log.debug("loopwatch: committed offsets of %s not stable yet, reading again in %.2f s",
                      ", ".join(unstable) or "the group (coordinator moved)", wait)
            await asyncio.sleep(wait)
            wait = min(RETRY_MAX_S, wait * 2)

    async def _fetch(self, topics: dict[str, set[int]]) -> tuple[dict[tuple[str, int], int | None], list[str], bool]:
        """One ``OffsetFetch``: (offsets found, ``"topic[p]"`` of the unstable partitions, coordinator moved)."""
        admin = await self._started()
        if self._coordinator is None:
            self._coordinator = await asyncio.wait_for(admin.find_coordinator(self._group), REQUEST_TIMEOUT_S)
        response = await asyncio.wait_for(
            admin._client.send(self._coordinator, StableOffsetFetch(self._group, topics)), REQUEST_TIMEOUT_S)
        if response.error_code in _COORDINATOR_MOVED:
            return {}, [], True
        if response.error_code:
            raise for_code(response.error_code)(f"OffsetFetch of group {self._group}")
        found: dict[tuple[str, int], int | None] = {}
        unstable: list[str] = []
        for topic, partitions, _tags in response.topics:
            for partition, offset, _epoch, _metadata, error_code, _ in partitions:
                if error_code == UNSTABLE_OFFSET_COMMIT:
                    unstable.append(f"{topic}[{partition}]")
                elif error_code:
                    raise for_code(error_code)(f"OffsetFetch of group {self._group}, {topic}[{partition}]")
                else:
                    found[(topic, partition)] = offset if offset >= 0 else None
        return found, unstable, False

    async def _started(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap, client_id=self._client_id)
            if self._backoff is not None:
                self._backoff.apply(admin._client)
            try:
                await asyncio.wait_for(admin.start(), REQUEST_TIMEOUT_S)
            except BaseException:
                await admin.close()
                raise
            self._admin = admin
        return self._admin

    async def close(self) -> None:
        """Stop the admin client (a later :meth:`read` starts a new one)."""
        admin, self._admin, self._coordinator = self._admin, None, None
        if admin is not None:
            try:
                await admin.close()
            except Exception as exc:  # a broker gone away: nothing of it is needed any more
                log.debug("loopwatch: closing the offsets admin client: %r", exc)
