"""An asyncio client for agent runners: publish an event, await its verdict.

A runner calls :meth:`LoopwatchClient.check` before executing each tool call
and does what the verdict says (``allow``/``warn``: execute, showing a warning
to the model for ``warn``; ``block``: do not execute; ``abort``: stop the run).
Results and compaction retries are reported with
:meth:`LoopwatchClient.report_result` (or :meth:`LoopwatchClient.publish`, which
returns the verdict as a future): the post-compaction guard's ``abort`` comes on
the verdict of a *result* (or of a tool call that carries its result inline).

How verdicts are read
---------------------
Only the verdicts-topic partitions the client's record keys hash to, from their end, without a
consumer group (:mod:`streams.runners.verdict_reader`).

Events out
----------
Each event is checked with the worker's own schema check before anything is sent (an invalid one raises
``ValueError`` naming the field), completed (``session_key``; a result's ``tool_name`` and ``args``;
``event_id``, ``ts``) and keyed by ``key_by`` (``"run"``: per-run detection; ``"session"``: OpenClaw's
session-level behaviour; use one ``key_by`` for all events of a session): :mod:`streams.runners.outgoing`.

When no verdict comes: fail-open or fail-closed
-----------------------------------------------
A verdict that does not arrive within the timeout (worker down, lagging, or broker unreachable), or an
event Kafka refuses (too large, not authorised, ...; also logged as a warning), yields a :class:`Verdict`
chosen by ``on_timeout``: ``allow`` (fail-open, the default) or ``block`` (fail-closed; ``abort`` for a
result or a compaction retry), ``record`` None, ``timed_out`` or ``error`` saying which, and
:attr:`Verdict.message` saying what happened: the table is in :mod:`streams.runners.verdict`. Fail-open
keeps agents working when loopwatch is unavailable (a loop may then go undetected); fail-closed stops
them instead. A verdict that arrives after its timeout is dropped. Large events: an event over the
producer's ``max_request_size`` (1 MiB; ``producer_options``) or the topic's ``max.message.bytes``
gets that verdict at once, ``error`` saying which limit (:mod:`streams.runners.verdict_wait`).

Every ``tool_call`` of a fail-open client carries ``deadline``, and the ``tool_result`` of a call it
let run without a verdict is sent with ``ran_without_verdict: true`` and not waited for: its
:class:`Verdict` (``allow``, ``waited`` False) comes at once (:mod:`streams.runners.late`).

Kafka unreachable, and nothing taken dropped
--------------------------------------------
The client starts all the same and connects in the background (:mod:`streams.runners.connection`);
until then every event gets the ``on_timeout`` verdict at once, with ``error`` saying so. An outage
after that is met by the timeout, and the client reconnects by itself. :meth:`LoopwatchClient.stop`
returns within ``stop_timeout`` (5 s) in any broker state. aiokafka's repeated warnings are
rate-limited (:mod:`streams.wire.logs`).

Every event :meth:`LoopwatchClient.publish` takes stays in a bounded outbox
(:mod:`streams.runners.outbox`; ``outbox_events``, ``outbox_bytes``) until Kafka acknowledges it,
through an outage of any length, and reaches Kafka in order once the broker is back, whatever
verdict its caller got meanwhile. A full outbox refuses the event (:class:`OutboxFullError` from
``publish``; :meth:`~LoopwatchClient.check` and :meth:`~LoopwatchClient.report_result` give the
``on_timeout`` verdict with ``error`` saying so).

Size: one class, the runner's whole API, of which nearly half the lines are its reference docstrings
(arguments, verdicts, errors raised); the parts with a job of their own are apart: the connection
(:mod:`.connection`), the outbox (:mod:`.outbox`), an event made ready to send (:mod:`.outgoing`, with
what is added to it, :mod:`.completion`), waiting for a verdict (:mod:`.verdict_wait`), fail-open
bookkeeping (:mod:`.late`), the verdict reader (:mod:`.verdict_reader`) and the verdict (:mod:`.verdict`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Literal, Mapping

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from streams.wire.brokers import bootstrap_servers
from streams.wire.codecs import MAX_REQUEST_SIZE, record_encoder
from streams.wire.keys import KEY_BY
from streams.wire.logs import limit_kafka_client_logs

from .completion import EventCompleter
from .connection import Connection, TopicNotFoundError
from .late import LateCalls
from .outbox import DEFAULT_OUTBOX_BYTES, DEFAULT_OUTBOX_EVENTS, Outbox, OutboxFullError
from .outgoing import encode_event, event_type, prepare
from .verdict import TIMEOUT_VERDICTS, Verdict
from .verdict_reader import FETCH_WAIT_MS, VerdictReader
from .verdict_wait import acked_within, resolved, send_error, verdict_future


__all__ = [
    "LoopwatchClient",
    "Verdict",
    "ClientClosedError",
    "OutboxFullError",
    "TopicNotFoundError",
    "DEFAULT_TIMEOUT_S",
]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0        # per event: send + worker + verdict back; a healthy pipeline answers in ms
DEFAULT_START_TIMEOUT_S = 30.0  # waiting for the verdicts topic to exist (the worker creates it)
DEFAULT_STOP_TIMEOUT_S = 5.0  # stop(): longest wait for Kafka to take the records the producer holds

class ClientClosedError(RuntimeError):
    """The client was stopped (or never started) while an event waited for its verdict."""


class LoopwatchClient:
    """Publishes agent events to loopwatch and returns the worker's verdicts.

    Arguments:
        bootstrap: Kafka bootstrap servers, ``"host:port[,host:port]"`` (a
            ``kafka://`` prefix is accepted).
        events_topic: the worker's input topic.
        verdicts_topic: the worker's verdicts topic.
        on_timeout: ``"allow"`` (fail-open, default) or ``"block"``
            (fail-closed): the verdict given when none arrives in time or the
            event cannot be published (the per-event-type table is in
            :mod:`streams.runners.verdict`).
        codec: ``"msgpack"`` (default) or ``"json"``, the event record encoding;
            an event the codec cannot carry goes in the other, as ``loopwatch
            produce`` sends it (:mod:`streams.runners.outgoing`).
        timeout: default seconds to wait for a verdict (send included).
        key_by: the record key of each event: ``"run"`` (default: run id, else
            session key, else session id) or ``"session"`` (session key, else
            session id). The worker keys its detection state by the record key
            as it is (``loopwatch worker --key-by`` only applies to records
            without a key), so this chooses per-run or per-session (OpenClaw's)
            loop detection for the events of this client; use one ``key_by``
            for all events of a session.
        start_timeout: seconds :meth:`start` waits for the verdicts topic to exist.
        stop_timeout: the longest time, seconds, :meth:`stop` (leaving ``async with``)
            takes, whatever Kafka is doing.
        outbox_events, outbox_bytes: the bounds of the outbox of events taken and not yet
            acknowledged by Kafka (see the module docstring); a full outbox refuses events.
        producer_options, consumer_options: extra keyword arguments for
            :class:`aiokafka.AIOKafkaProducer` / :class:`aiokafka.AIOKafkaConsumer`
            (e.g. security settings, or ``max_request_size`` for events over
            1 MiB: the topic's ``max.message.bytes`` must allow them too).
        clock: the wall clock, seconds since the epoch (``ts`` and ``deadline`` of events); tests pass a fake.
    Raises:
        ValueError: an unknown ``on_timeout``, ``codec`` or ``key_by``, a
            ``timeout`` that is not positive, or a ``bootstrap`` entry without
            a port or with one outside 1-65535 (:func:`streams.wire.brokers.bootstrap_servers`).

    Example usage::

        async with LoopwatchClient("127.0.0.1:9092", on_timeout="allow") as client:
            verdict = await client.check({
                "type": "tool_call", "run_id": run_id, "session_id": session_id,
                "tool_call_id": call_id, "tool_name": "exec",
                "args": {"command": "npm test"}, "outcome_follows": True,
            })
            if not verdict.allowed:
                return verdict.message          # blocked (or failed closed): tell the model why
            result = await run_tool(...)
            after = await client.report_result({
                "type": "tool_result", "run_id": run_id, "session_id": session_id,
                "tool_call_id": call_id, "result": result, "error": None,
            })
            if after.verdict == "abort":
                stop_the_run(after.message)
    """

    def __init__(
        self,
        bootstrap: str,
        events_topic: str = "loopwatch.events",
        verdicts_topic: str = "loopwatch.verdicts",
        on_timeout: Literal["allow", "block"] = "allow",
        codec: Literal["msgpack", "json"] = "msgpack",
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        key_by: str = "run",
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT_S,
        outbox_events: int = DEFAULT_OUTBOX_EVENTS,
        outbox_bytes: int = DEFAULT_OUTBOX_BYTES,
        producer_options: Mapping[str, Any] | None = None,
        consumer_options: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if on_timeout not in TIMEOUT_VERDICTS:
            raise ValueError(f"on_timeout must be 'allow' (fail-open) or 'block' (fail-closed), got {on_timeout!r}")
        if codec not in ("msgpack", "json"):
            raise ValueError(f"codec must be 'msgpack' or 'json', got {codec!r}")
        if key_by not in KEY_BY:
            raise ValueError(f"key_by must be one of {KEY_BY}, got {key_by!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.bootstrap = bootstrap_servers(bootstrap)
        self.events_topic = events_topic
        self.verdicts_topic = verdicts_topic
        self.on_timeout = on_timeout
        self.codec = codec
        self.timeout = timeout
        self.key_by = key_by
        self._completer = EventCompleter()
        self._clock = clock
        self._late_calls = LateCalls()  # calls let run without a verdict, until their result is sent
        self.start_timeout = start_timeout
        self._encode = record_encoder(codec)
        self._producer_options = dict(producer_options or {})
        self._consumer_options = dict(consumer_options or {})
        self._producer: AIOKafkaProducer | None = None
        self._verdicts = VerdictReader(verdicts_topic)
        self._started = False
        self.stop_timeout = stop_timeout
        self._connection = Connection(self.bootstrap, verdicts_topic, start_timeout, self._producer_options,
                                      self._consumer_options, self._opened, FETCH_WAIT_MS)
        self._outbox = Outbox(events_topic, outbox_events, outbox_bytes, lambda: self._producer,
                              lambda key: None if self._verdicts.reads(key) else self._verdicts.ensure_partition(key))
        self._pump: asyncio.Task | None = None
        limit_kafka_client_logs()  # an outage repeats aiokafka's errors many times a second, in the runner's log

    # ------------------------------------------------------------ life cycle

    async def start(self) -> None:
        """Connect the producer and the verdict reader, or, with Kafka unreachable, return all the same.

        While Kafka is unreachable the client keeps connecting in the background
        (:mod:`streams.runners.connection`) and every event gets its
        ``on_timeout`` verdict at once, with :attr:`Verdict.error` saying so.

        Raises:
            TopicNotFoundError: Kafka answers but the verdicts topic does not exist within ``start_timeout``.
        """
        if self._started:
            return
        self._started = True
        try:
            await self._connection.open()
        except BaseException:
            self._started = False
            raise

    async def _opened(self) -> None:
        """Connected (at start or later): read verdicts from the new consumer."""
        connection = self._connection
        self._producer = connection.producer
        assert connection.consumer is not None
        self._verdicts.attach(connection.consumer, connection.partitions)

    async def stop(self) -> None:
        """Stop reading and stop the producer, within ``stop_timeout`` s in any broker state.

        Events still waiting for a verdict fail with :class:`ClientClosedError`.
        Events of the outbox that Kafka has not taken within ``stop_timeout`` (the
        broker is down) are given up, with a warning counting them; their events had
        their ``on_timeout`` verdict.
        """
        if not self._started:
            return
        self._started = False
        until = time.monotonic() + self.stop_timeout
        await self._verdicts.stop(ClientClosedError("loopwatch client stopped"))
        left = await self._outbox.flushed(until - time.monotonic()) if self._connection.ready else len(self._outbox)
        if self._pump is not None:
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
        self._outbox.abandon(ClientClosedError("loopwatch client stopped before Kafka acknowledged the event"))
        if left:
            log.warning("loopwatch client: stopping with %d event(s) Kafka has not acknowledged (%s); they may be lost",
                        left, "not connected" if not self._connection.ready else f"none within {self.stop_timeout:g} s")
        self._producer = None
        await self._connection.close(max(0.1, until - time.monotonic()))

    async def __aenter__(self) -> "LoopwatchClient":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    @property
    def assigned_partitions(self) -> frozenset[int]:
        """The verdict partitions this client reads (those its runs hash to)."""
        return frozenset(self._verdicts.assigned)

    @property
    def outbox(self) -> tuple[int, int]:
        """``(events, bytes)`` taken and not yet acknowledged by Kafka."""
        return len(self._outbox), self._outbox.bytes

    @property
    def verdict_partitions(self) -> int:
        """The partition count of the verdicts topic (read when the client connected; 0 until it has)."""
        return self._verdicts.partitions

    # --------------------------------------------------------------- events

    async def check(self, tool_call_event: Mapping[str, Any], timeout: float | None = None) -> Verdict:
        """Publish a ``tool_call`` event and wait for its verdict.

        Arguments:
            tool_call_event: the event (schema: :mod:`streams.detection.engine`):
                ``type="tool_call"``, ``run_id``, ``session_id``,
                ``tool_call_id``, ``tool_name``, ``args``; either the outcome
                inline (``result``/``error``) or ``outcome_follows: true`` with a
                later :meth:`report_result`. ``event_id`` (uuid4 hex) and ``ts``
                (epoch ms) are added when absent; the caller's mapping is not changed.
            timeout: seconds for send + verdict (default: the client's ``timeout``).
        Returns:
            The :class:`Verdict`: ``allow``/``warn`` (execute), ``block`` (do not
            execute), ``abort`` (do not execute and stop the run: its run had
            ended before, :attr:`Verdict.run_ended`; or the guard's abort on an
            inline outcome). When no
            verdict comes in time (``timed_out``) or the event cannot be
            published (``error``, e.g. larger than Kafka takes), the
            ``on_timeout`` choice: ``allow`` (fail-open) or ``block``
            (fail-closed), with a :attr:`Verdict.message` saying so.
        Raises:
            ValueError: the event is not a ``tool_call``, or it is one the worker
                would dead-letter (:class:`~streams.detection.EventError`, e.g.
                no ``session_id``), or it cannot be encoded.
            ClientClosedError: the client is not started, or was stopped meanwhile.
        """
        if event_type(tool_call_event) != "tool_call":
            raise ValueError(f"check() takes a tool_call event, got type {event_type(tool_call_event)!r}")
        return await self._answer(tool_call_event, "tool_call", timeout)

    async def report_result(self, event: Mapping[str, Any], timeout: float | None = None) -> Verdict:
        """Publish a ``tool_result`` or ``compaction_retry`` event and wait for its verdict.

        Arguments:
            event: ``type="tool_result"`` with ``run_id``, ``session_id``,
                ``tool_call_id`` (of the call checked with ``outcome_follows``),
                ``result``, ``error``; or ``type="compaction_retry"`` with
                ``run_id``, ``session_id``, optional ``agent_id``. Sent with
                the session's ``session_key`` and, on a result, the call's
                ``tool_name`` and ``args`` when it lacks them (see the module
                docstring, "What is added to events").
            timeout: seconds for send + verdict (default: the client's ``timeout``).
        Returns:
            The :class:`Verdict`: ``abort`` when the post-compaction guard stops
            the run (or its run had ended before), ``allow`` otherwise, ``ignore``
            for a result of a blocked call or one sent with ``judged: false`` (a
            result whose call the worker never saw is recorded, as OpenClaw
            records it). A result of a call that ran without its verdict
            (``ran_without_verdict``) is not waited for: ``allow`` at once,
            ``waited`` False (module docstring). On a timeout or a failed send (e.g. a result
            larger than Kafka takes), the ``on_timeout`` choice: ``allow``
            (fail-open) or ``abort`` (fail-closed), as :meth:`check`.
        Raises:
            ValueError, ClientClosedError: as :meth:`check`.
        """
        if event_type(event) not in ("tool_result", "compaction_retry"):
            raise ValueError(f"report_result() takes a tool_result or compaction_retry event, "
                             f"got type {event_type(event)!r}")
        return await self._answer(event, event_type(event), timeout)

    async def _answer(self, event: Mapping[str, Any], kind: str, timeout: float | None) -> Verdict:
        """The verdict of ``event``; a full outbox gives the ``on_timeout`` verdict with the reason."""
        try:
            future = await self.publish(event, timeout=timeout)
        except OutboxFullError as exc:
            log.warning("loopwatch client: %s; verdict %s (on_timeout=%r)", exc,
                        TIMEOUT_VERDICTS[self.on_timeout][kind], self.on_timeout)
            event_id = event.get("event_id")
            return Verdict(event_id if isinstance(event_id, str) and event_id else "",
                           TIMEOUT_VERDICTS[self.on_timeout][kind], None, False, 0.0, str(exc))
        return await future

    async def publish(self, event: Mapping[str, Any], timeout: float | None = None) -> "asyncio.Future[Verdict]":
        """Publish any event; return a future of its verdict without waiting for it.

        Returns once Kafka has acknowledged the event (its verdict partition read
        from its current end first), or the wait for that ran out, or at once
        while Kafka is unreachable; the event is in the outbox from the start
        and is sent whatever the wait's outcome (module docstring). The returned future
        resolves to a :class:`Verdict` within ``timeout`` seconds of this call
        (a timed-out one if none came); it never raises ``TimeoutError``. An
        event Kafka refuses gives an already resolved future of the
        ``on_timeout`` verdict with ``error`` set (see the module docstring).

        Arguments:
            event: a ``tool_call``, ``tool_result`` or ``compaction_retry`` event.
            timeout: seconds for send + verdict (default: the client's ``timeout``).
        Returns:
            ``asyncio.Future[Verdict]``.
        Raises:
            ValueError: an event the worker would dead-letter
                (:class:`~streams.detection.EventError`: unknown ``type``, a
                ``tool_call`` or ``compaction_retry`` with no
                ``session_id``/``session_key``, a field of the wrong type), or one neither msgpack
                nor JSON can encode (the message names its type, event id, key
                and tool call id); a ``timeout`` that is not positive.
            OutboxFullError: the outbox holds its bound of events not yet acknowledged
                by Kafka; the event is not taken.
            ClientClosedError: the client is not started, or was stopped meanwhile.
        """
        if not self._started:
            raise ClientClosedError("loopwatch client is not started (use `async with` or await start())")
        kind, key, event, now_ms = prepare(event, self._completer, self.key_by, self._clock)
        event_id = event["event_id"]
        wait = self.timeout if timeout is None else timeout
        if not wait > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {wait!r}")
        call_id = event.get("tool_call_id")
        fails_open = TIMEOUT_VERDICTS[self.on_timeout]["tool_call"] == "allow"
        if kind == "tool_call" and fails_open and "deadline" not in event:
            event["deadline"] = int(now_ms + wait * 1000)
        if kind == "tool_result":
            self._late_calls.mark_result(key, event)
        value = encode_event(self._encode, event, kind, key)
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        taken = self._outbox.put(key, value)  # OutboxFullError: not taken
        if self._pump is None or self._pump.get_loop() is not loop:  # started with the first event
            self._pump = asyncio.ensure_future(self._outbox.run())
        pending = self._verdicts.pending
        arrived: asyncio.Future = loop.create_future()
        pending[event_id] = arrived

        def fallback(timed_out: bool, error: str | None = None) -> Verdict:
            if kind == "tool_call" and fails_open and isinstance(call_id, str):
                self._late_calls.remember(key, call_id)  # the runner runs it without a verdict
            return Verdict(event_id, TIMEOUT_VERDICTS[self.on_timeout][kind], None, timed_out,
                           time.monotonic() - started, error)

        if kind == "tool_result" and event.get("ran_without_verdict") is True:
            # the runner already waited out this call's timeout: sent from the outbox, its verdict not waited for
            pending.pop(event_id, None)
            if self._connection.ready:  # connected: the producer has it before publish() returns (at once)
                try:
                    await asyncio.wait_for(asyncio.shield(taken.handed), wait)
                except asyncio.TimeoutError:
                    pass  # still in the outbox: sent once Kafka answers
            # not connected: no second wait; the outbox keeps it in order with the events that follow
            return resolved(loop, Verdict(event_id, TIMEOUT_VERDICTS["allow"][kind], None, False,
                                          time.monotonic() - started, None, waited=False))

        if not self._connection.ready:  # nothing to wait for: the answer is the policy's, now
            pending.pop(event_id, None)
            return resolved(loop, fallback(timed_out=False, error=(
                f"not connected to Kafka at {self.bootstrap} ({self._connection.unreachable}); reconnecting; "
                f"the event is kept and sent once connected ({len(self._outbox):,} waiting)")))

        try:
            await acked_within(loop, taken.acked, started + wait)
        except TimeoutError:  # still in the outbox: Kafka gets it when it answers again
            pending.pop(event_id, None)
            return resolved(loop, fallback(timed_out=True))
        except KafkaError as exc:
            pending.pop(event_id, None)
            failed = fallback(timed_out=False, error=send_error(
                exc, key, value, self._producer_options.get("max_request_size", MAX_REQUEST_SIZE)))
            log.warning("loopwatch client: %s event %s of %r not sent: %s; verdict %s (on_timeout=%r)",
                        kind, event_id, key.decode("utf-8", "replace"), failed.error, failed.verdict,
                        self.on_timeout)
            return resolved(loop, failed)
        except BaseException:
            pending.pop(event_id, None)
            raise
        if not self._started:
            pending.pop(event_id, None)
            raise ClientClosedError("loopwatch client stopped while the event was sent")

        return verdict_future(loop, arrived, pending, event_id, wait, started, fallback)
