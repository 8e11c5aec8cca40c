"""Fetch waits paced by load: aiokafka's fetcher back to its busy wait as soon as a response brings records.

Both consumers of the worker that fetch without pause, the input reader (:mod:`streams.worker.reader`) and
Faust's consumer (:mod:`streams.worker.consumer`, the changelogs and standbys), ask the broker to hold an
idle fetch longer once nothing has come for :data:`IDLE_AFTER_S` (fewer requests, less CPU per partition).
:func:`pace` makes their fetcher set the short wait back from the first response that brings records,
before its routine builds the next request, so that a partition never waits behind an idle-length fetch
once records flow.

Relies on aiokafka internals: the consumer's ``_fetcher`` (built by ``start()``), its
``_proc_fetch_request`` (returns whether records were added) and ``_fetch_max_wait_ms`` (each request is
built with it).
"""

from __future__ import annotations

from typing import Any

from aiokafka.consumer.fetcher import Fetcher

__all__ = ["IDLE_AFTER_S", "PacedFetcher", "pace"]

IDLE_AFTER_S = 1.0  # no record for this long: fetches are held up to a longer, idle wait


class PacedFetcher(Fetcher):
    """aiokafka's fetcher, back to ``busy_wait_ms`` as soon as a response brings records (before its routine
    builds the next request)."""

    busy_wait_ms = 25

    async def _proc_fetch_request(self, assignment: Any, node_id: Any, request: Any) -> bool:
        got = await super()._proc_fetch_request(assignment, node_id, request)
        if got:
            self._fetch_max_wait_ms = self.busy_wait_ms
        return got


def pace(fetcher: Fetcher, busy_wait_ms: int) -> None:
    """Make ``fetcher`` (a started consumer's ``_fetcher``, its routine already running) a :class:`PacedFetcher`
    whose busy wait is ``busy_wait_ms``."""
    fetcher.__class__ = PacedFetcher
    fetcher.busy_wait_ms = busy_wait_ms
