"""The Faust app of the worker: its configuration, and the two moments of Faust's lifecycle the worker hooks.

:func:`new_faust_app` builds the :class:`WorkerApp` from :class:`~streams.worker.settings.WorkerSettings`
(broker, store, partitions, producer and consumer settings, raw keys and values).
:class:`WorkerApp` is a :class:`faust.App` with two hooks the worker sets
(:class:`streams.worker.app.Loopwatch`): ``before_stop``, awaited before Faust
stops its consumer and tables (the last checkpoint, :mod:`streams.worker.lifecycle`),
and ``input_ready``, awaited before Faust's worker logs "Ready".
"""

from __future__ import annotations

from typing import Any

import faust
from faust.app.base import BootStrategy

from .settings import WorkerSettings

__all__ = ["METADATA_MAX_AGE_MS", "RAW", "WorkerApp", "new_faust_app"]

METADATA_MAX_AGE_MS = 5_000  # the consumer's metadata refresh interval

RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}  # topic options


class NoWebServer(BootStrategy):
    """Faust's start-up without its web server, whatever ``web_enabled`` says by then: Faust's ``worker``
    command sets it from its ``--with-web`` option, on by default, over the app's ``web_enabled=False``.
    ``faust -A streams.app worker`` then bound 0.0.0.0:6066, and a second such worker on the host
    failed to start ("address already in use") before it said anything of its own."""

    enable_web = False


class WorkerApp(faust.App):
    """Faust's app; ``before_stop`` is awaited before Faust stops its consumer and tables,
    ``input_ready`` before Faust's worker logs "Ready".

    Faust sends ``on_before_shutdown`` only after its tables are stopped (a
    RocksDB store has closed its databases by then): the worker must stop
    reading and take its last checkpoint while they are still open.

    Faust's worker says "Ready" once the tables are recovered; the input is
    read by the worker's own reader, which starts a moment later: "Ready" waits
    for it, so that it means an event sent now gets its verdict.
    """

    BootStrategy = NoWebServer
    before_stop: Any = None
    input_ready: Any = None
    on_stopping: Any = None  # called as the stop begins

    async def on_started(self) -> None:
        announce, self.on_startup_finished = self.on_startup_finished, None
        try:
            await super().on_started()
            if announce is not None and self.input_ready is not None and not self.should_stop:
                await self.input_ready()
        finally:
            self.on_startup_finished = announce
        if announce is not None and not self.should_stop:
            await announce()

    async def on_stop(self) -> None:
        if self.on_stopping is not None:
            self.on_stopping()
        if self.before_stop is not None:
            await self.before_stop()
        await super().on_stop()


def new_faust_app(s: WorkerSettings) -> WorkerApp:
    """The worker's Faust app, configured from ``s`` (no topic or table yet; nothing connects until it starts)."""
    return WorkerApp(
        s.app_id,
        broker=s.broker,
        store=s.store,
        datadir=s.data_dir.replace("{app_id}", s.app_id),
        autodiscover=False,
        topic_partitions=s.partitions,
        topic_replication_factor=s.replication_factor,
        topic_disable_leader=True,
        table_standby_replicas=s.standby_replicas,
        producer_linger=s.producer_linger_ms / 1000.0,
        producer_acks=s.producer_acks,
        producer_max_batch_size=s.producer_max_batch_size,
        producer_max_request_size=max(1_000_000, s.producer_max_batch_size + 65_536),
        broker_max_poll_records=s.max_poll_records,
        broker_session_timeout=s.session_timeout_s,
        broker_heartbeat_interval=s.heartbeat_interval_s,
        broker_rebalance_timeout=s.rebalance_timeout_s,
        consumer_auto_offset_reset="earliest",
        # A topic created just after the group leader computed the assignment (the rekey
        # topic, on a fresh app) is "ignored" until the next metadata refresh, 5 min by
        # default: refresh often so such partitions are picked up (and rebalanced) quickly.
        consumer_metadata_max_age_ms=METADATA_MAX_AGE_MS,
        web_enabled=False,
        key_serializer="raw",
        value_serializer="raw",
    )
