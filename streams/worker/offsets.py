"""The group's committed input offsets, read in the app's own event loop.

At each assignment the worker reads the committed offset of every input
partition it got before its reader starts (:meth:`streams.worker.app.Loopwatch._on_assigned`).
Faust's consumer answers such a call in its own thread, one call after
another, so it waited there behind the changelog ends that Faust's recovery
asks for at the same moment (:meth:`streams.worker.consumer._ConsumerThread._highwaters`):
0.2-0.3 s of a failover on the loaded development machine. :class:`CommittedOffsets`
sends the same request (``OffsetFetch`` of the group, any client may send
it) from the app's loop with an admin client of its own, and keeps the
group coordinator's id between calls.

It only reads: the offsets are still committed by the group member (in the
checkpoints' transactions, :mod:`streams.worker.checkpoint`). A partition the
group has no offset for (a fresh group; the rekey topic, which nothing may
ever have been written to) gets None: read from its beginning.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams.wire.outages import Backoff

__all__ = ["CommittedOffsets"]

log = logging.getLogger(__name__)


class CommittedOffsets:
    """Reads a consumer group's committed offsets with an admin client (started at the first read, kept).

    Arguments:
        bootstrap: aiokafka's ``host:port[,host:port]``.
        group_id: the consumer group (the worker's app id).
        client_id: the admin client's id.
        backoff: the worker's retry and reconnect pacing, or None.
    """

    def __init__(self, bootstrap: str, group_id: str, client_id: str, backoff: Backoff | None = None) -> None:
        self._bootstrap, self._group, self._client_id, self._backoff = bootstrap, group_id, client_id, backoff
        self._admin: AIOKafkaAdminClient | None = None
        self._coordinator: int | None = None

    async def read(self, tps: Iterable[Any]) -> dict[Any, int | None]:
        """``{tp: committed offset, or None if the group has none}`` for ``tps`` (keys as given, anything with
        ``topic`` and ``partition``). Raises aiokafka's errors; a failed call forgets the coordinator and the
        client."""
        tps = list(tps)
        if not tps:
            return {}
        try:
            admin = await self._started()
            if self._coordinator is None:
                self._coordinator = await admin.find_coordinator(self._group)
            found = await admin.list_consumer_group_offsets(
                self._group, self._coordinator, [TopicPartition(tp.topic, tp.partition) for tp in tps])
        except BaseException:
            await self.close()
            raise
        offsets: dict[Any, int | None] = {}
        for tp in tps:
            meta = found.get(TopicPartition(tp.topic, tp.partition))
            offsets[tp] = meta.offset if meta is not None and meta.offset >= 0 else None
        return offsets

    async def _started(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap, client_id=self._client_id)
            if self._backoff is not None:
                self._backoff.apply(admin._client)
            try:
                await admin.start()
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
