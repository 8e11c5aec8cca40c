"""The worker's start-up and shutdown.

:class:`Lifecycle` is mixed into :class:`streams.worker.app.Loopwatch`.

Start-up: the metrics server (``/metrics``) first, then the output producer
(:mod:`streams.worker.producers`); Faust's "Ready" waits (:meth:`~Lifecycle._reading_input`) until the
worker reads the input of every state partition it owns, so that it means an event sent now gets its verdict.

Shutdown, as Faust's stop begins: in a worker process, the process is bound to end ``shutdown_timeout_s``
later whatever Kafka does (:meth:`~Lifecycle._bound_exit`; at once on a second signal); then, before Faust
stops its consumer and tables, a last checkpoint (the reader stopped, the states and offsets written and
committed: a restart re-sends nothing) if Kafka acknowledges it in time, and the producers and writers stopped
(:meth:`~Lifecycle._on_shutdown`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from . import metrics

__all__ = ["Lifecycle"]

log = logging.getLogger(__name__)

# A stop leaves Faust this long (of shutdown_timeout_s) after the last checkpoint: its consumer
# leaves the group (~1-2 s when the broker is down), then its worker spends ~2 s gathering tasks and
# closing the event loop.
_FAUST_STOP_S = 5.0
_READY_POLL_S, _READY_NOTE_S = 0.02, 10.0  # start-up: looking whether the input is read; saying what it waits for


class Lifecycle:
    """Start-up and shutdown of the module docstring, mixed into the worker.

    The worker provides ``app``, ``settings``, ``table``, ``fleet`` (or None), ``_reader``, ``_writers``,
    ``_offsets``, ``_lock``, ``_out``, ``_rekey_topic``, ``_open_outputs()`` and ``_stop_outputs()``
    (:mod:`streams.worker.producers`), ``_drop()`` and the checkpoint part; it calls
    :meth:`_init_lifecycle` before it starts and hooks the methods into its Faust app.
    """

    def _init_lifecycle(self) -> None:
        self._metrics_started = False
        self._exit_timer: threading.Timer | None = None
        self._last_checkpoint_written = False

    async def _on_start(self) -> None:
        # Metrics first (no await before it): verdicts can flow as soon as partitions are assigned.
        if self.settings.metrics_port and not self._metrics_started:
            from prometheus_client import start_http_server

            try:
                start_http_server(self.settings.metrics_port, self.settings.metrics_addr, registry=metrics.REGISTRY)
                self._metrics_started = True
                log.info("loopwatch: metrics on http://%s:%d/metrics", self.settings.metrics_addr,
                         self.settings.metrics_port)
            except OSError as exc:
                log.error("loopwatch: cannot serve metrics on port %d: %s", self.settings.metrics_port, exc)
        await self._open_outputs()

    async def _reading_input(self) -> None:
        """Return once the worker reads the input of every state partition it owns, its outputs open.

        Faust's assignor gives a worker input partition ``p`` of every input
        topic (and of the rekey topic) with partition ``p`` of the state
        table: each active table partition must have all of them fetched by the
        reader. A worker that owns none (more workers than partitions) is ready
        as it is. Logs what it waits for every ``_READY_NOTE_S`` s.
        """
        noted = time.monotonic()
        while not self.app.should_stop:
            waiting = self._unread_inputs()
            if not waiting:
                reading = sorted(self._reader.reading())
                log.info("loopwatch: reading %d input partition(s)%s", len(reading),
                         ": " + ", ".join(f"{topic}[{partition}]" for topic, partition in reading) if reading else "")
                return
            if time.monotonic() - noted >= _READY_NOTE_S:
                noted = time.monotonic()
                log.warning("loopwatch: not ready yet, waiting for %s", waiting)
            await asyncio.sleep(_READY_POLL_S)

    def _unread_inputs(self) -> str:
        """What keeps the worker from being ready ("" when nothing): see :meth:`_reading_input`."""
        if self.app.rebalancing:
            return "the group's rebalance"
        if self._out is None:
            return "the output topics and producers"
        changelog = self.table.changelog_topic.get_topic_name()
        owned = {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == changelog}
        reading = self._reader.reading()
        unread = [f"{topic}[{partition}]" for partition in sorted(owned)
                  for topic in (*self.settings.input_topics, self._rekey_topic) if (topic, partition) not in reading]
        return f"input partitions {', '.join(unread)}" if unread else ""

    async def _on_shutdown(self, *args: Any, **kwargs: Any) -> None:
        """Graceful stop: a last checkpoint, committed (a restart re-sends nothing), if Kafka acknowledges it
        within ``shutdown_timeout_s`` less :data:`_FAUST_STOP_S`; else one warning, and the stop goes on."""
        loop = asyncio.get_running_loop()
        budget = max(1.0, self.settings.shutdown_timeout_s - _FAUST_STOP_S)
        until = loop.time() + budget
        try:
            await asyncio.wait_for(self._last_checkpoint(), budget)
        except asyncio.TimeoutError:
            log.warning("loopwatch: no last checkpoint: Kafka did not acknowledge it within %g s (is the broker "
                        "down?); the events since the previous checkpoint are applied again at the next start, "
                        "their verdicts published again", budget)
        await self._stop_outputs(until)
        await self._writers.close(max(0.1, until - loop.time()))
        await self._offsets.close()

    async def _last_checkpoint(self) -> None:
        async with self._lock:
            await self._reader.stop()  # no batch is being handled: we hold the lock
            pending = self._handled or self._outputs or self._dirty or self._expired
            try:
                fenced = await self._final_checkpoint()
            except Exception as exc:
                log.warning("loopwatch: checkpoint at shutdown failed: %r", exc)
            else:
                if fenced:  # removed from the group while stopping: the new owner goes on from its own
                    log.warning("loopwatch: partitions %s are owned by another worker now: their last states here "
                                "were not written", ", ".join(map(str, sorted(fenced))))
                self._last_checkpoint_written = self._failed is None and not self._tainted and not fenced
                if self._last_checkpoint_written and pending:
                    log.info("loopwatch: last checkpoint written")
            if self.fleet is not None:
                await self.fleet.flush()  # the fleet windows changed since the last flush (bounded)
            self._drop()

    def _bound_exit(self) -> None:
        """In a worker process, as its stop begins: end the process ``shutdown_timeout_s`` later whatever Kafka
        does (Faust's consumer thread waits for a broker that is down), and at once on a second signal."""
        if not self.app.in_worker or self._exit_timer is not None:
            return
        bound = self.settings.shutdown_timeout_s
        log.info("loopwatch: stopping: last checkpoint, then exit (within %g s)", bound)
        self._exit_timer = threading.Timer(bound, self._exit_now, (f"still stopping {bound:g} s after the stop began "
                                                                   "(Kafka clients waiting for the broker)",))
        self._exit_timer.daemon = True
        self._exit_timer.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._exit_now, "a second signal")

    def _exit_now(self, reason: str) -> None:
        """End the process now (any thread): one line, flushed logs, status 0 (1 if the worker had crashed)."""
        what = ("the last checkpoint is written" if self._last_checkpoint_written else
                "without a last checkpoint: the events since the previous one are applied again at the next start")
        log.warning("loopwatch: %s: exiting now, %s", reason, what)
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(1 if self._failed is not None or self.app.crash_reason is not None else 0)
