"""Idle keys expired: a state untouched for ``state_ttl_s`` is deleted (OpenClaw's idle prune).

:class:`Expiry` is mixed into :class:`streams.worker.app.Loopwatch`, whose timer calls
:meth:`~Expiry._expire_idle` every ``expiry_interval_s``. A key expires only on a partition this worker owns
(a standby copy is expired by its owner) and never while its state waits for a checkpoint; the next
checkpoint writes its tombstone to the changelog (:mod:`streams.worker.checkpoint`). A key recovered from the
changelog counts as idle from the moment the worker first looks at it.
"""

from __future__ import annotations

import time

__all__ = ["Expiry"]


class Expiry:
    """Idle-key expiry, mixed into the worker.

    The worker provides ``app``, ``settings``, ``table``, ``states``, ``_lock``, ``_out``,
    ``_active_partitions()`` and the checkpoint (``_checkpoint``, ``_tainted``, ``_failed``, ``_dirty``,
    ``_not_written``, ``_expire_key()``) and outage (``_outage_since``) parts.
    """

    async def _expire_idle(self) -> None:
        """Delete keys idle for ``state_ttl_s`` (OpenClaw's idle prune), with changelog tombstones."""
        async with self._lock:
            if self._checkpoint is not None and not self._checkpoint.done():
                return  # its state writes must not land after a tombstone: next time
            if (self.app.rebalancing or self._tainted or self._failed is not None or self._out is None
                    or self._outage_since is not None):
                return  # partitions are moving (next time), or the worker is stopping
            self._expire_idle_now()  # the next checkpoint writes the tombstones

    def _expire_idle_now(self) -> None:
        now = time.monotonic()
        active = self._active_partitions()
        ttl = self.settings.state_ttl_s
        last_seen = self.states.last_seen
        for key, partition in list(self.table.key_partitions.items()):
            if key in self._dirty:
                continue
            if partition not in active:
                continue  # a standby copy: its owner expires it
            seen = last_seen.setdefault(key, now)  # recovered keys: idle since now
            if now - seen < ttl:
                continue
            self.table.forget(key)
            self._expire_key(key, partition)
            self.states.discard(key)
            self._not_written.discard(key)
            if self._out is not None:
                self._out.forget(key)
