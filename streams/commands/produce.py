"""``loopwatch produce``: publish event files to the worker's input topic.

:func:`publish_events` is the reusable part (``loopwatch demo`` and the
benchmarks call it): events in, one Kafka record each, keyed by
:func:`streams.wire.keys.record_key`, optionally paced to a rate.

An event Kafka will not take because of its size (over the producer's
``max_request_size``, or refused by the broker: over the topic's
``max.message.bytes``) is reported with its file and line, counted in
``too_large`` and skipped, like a bad line; the events after it are sent.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import click

from streams.wire.brokers import bootstrap_option, bootstrap_servers
from streams.wire.codecs import MAX_REQUEST_SIZE, record_encoder, record_size, too_large_reason
from streams.wire.keys import KEY_BY, record_key
from streams.detection.events import EventError, validate_event
from streams.runners.completion import EventCompleter
from .bad_input import SkipReport
from .interruptible import run_interruptible
from .replay import event_records

__all__ = ["produce", "publish_events", "ProduceSummary", "file_events", "FileEvents", "MAX_REQUEST_SIZE"]

_PROGRESS_EVERY_S = 2.0  # seconds between progress lines when stderr is not a terminal


@dataclass
class ProduceSummary:
    """What :func:`publish_events` did. ``elapsed_s`` runs from the first send to the last acknowledgement."""

    sent: int = 0
    bad: int = 0
    too_large: int = 0
    keyless: int = 0
    failed: int = 0
    keys: set = field(default_factory=set)
    partitions: set = field(default_factory=set)
    elapsed_s: float = 0.0

    def lines(self, topic: str) -> list[str]:
        rate = self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0
        out = [f"produced {self.sent} event(s) to {topic} in {self.elapsed_s:.2f} s ({rate:,.0f} events/s); "
               f"{len(self.keys)} key(s) over {len(self.partitions)} partition(s)"]
        if self.bad:
            out.append(f"{self.bad} bad record(s) skipped")
        if self.too_large:
            out.append(f"{self.too_large} record(s) too large for Kafka skipped")
        if self.keyless:
            out.append(f"{self.keyless} event(s) without run id or session id: sent without a key "
                       "(the worker derives one)")
        if self.failed:
            out.append(f"{self.failed} event(s) NOT acknowledged by the broker")
        return out


class FileEvents(Iterator[dict[str, Any]]):
    """The events of JSON Lines / msgpack files, remembering where each was read.

    ``path`` and ``position`` (1-based line, or record number in msgpack) are
    those of the event last returned, so :func:`publish_events` can report an
    event it cannot send by file and line. Bad records go to
    ``on_bad(path, position, reason)``. Iterating raises ``click.UsageError``
    for a folder.
    """

    def __init__(self, paths: Iterable[str], on_bad: Callable[[str, int, str], None], validate: bool = True) -> None:
        self._paths = paths
        self._on_bad = on_bad
        self._validate = validate
        self._records: Iterator[tuple[str, int, dict | None, str | None]] | None = None
        self.path = "<events>"
        self.position = 0

    def __next__(self) -> dict[str, Any]:
        if self._records is None:
            self._records = event_records("events", self._paths, progress=False)
        for path, position, event, error in self._records:
            if event is not None and self._validate:
                try:
                    validate_event(event)  # what the worker would dead-letter as a schema error
                except EventError as exc:
                    event, error = None, f"invalid event: {exc}"
            if event is None:
                self._on_bad(path, position, error or "unreadable")
            else:
                self.path, self.position = path, position
                return event
        raise StopIteration


def file_events(paths: Iterable[str], on_bad: Callable[[str, int, str], None], validate: bool = True) -> FileEvents:
    """The events of JSON Lines / msgpack files (a :class:`FileEvents`); bad records go to
    ``on_bad(path, position, reason)``, with ``validate`` also events that do not fit the event
    schema (:func:`streams.detection.validate_event`: an unknown ``type``, a field of the wrong type,
    a call without a session), as ``invalid event: <why>``. Iterating raises ``click.UsageError``
    for a folder."""
    return FileEvents(paths, on_bad, validate)


async def publish_events(
    bootstrap: str,
    topic: str,
    events: Iterable[dict[str, Any]],
    *,
    codec: str = "msgpack",
    key_by: str = "run",
    rate: float | None = None,
    stamp: bool = False,
    fill_ids: bool = False,
    summary: ProduceSummary | None = None,
    on_bad: Callable[[str, int, str], None] | None = None,
    on_progress: Callable[[ProduceSummary], None] | None = None,
    on_sent: Callable[[dict[str, Any], float], None] | None = None,
    linger_ms: int = 5,
    max_request_size: int = MAX_REQUEST_SIZE,
    complete: bool = False,
) -> ProduceSummary:
    """Publish events, one record each, and wait until the broker acknowledged all of them.

    Arguments:
        bootstrap: ``host:port[,host:port...]`` (a ``kafka://`` prefix is accepted), checked by
            :func:`streams.wire.brokers.bootstrap_servers`.
        topic: the input topic.
        events: decoded events; the record key is ``record_key(event, key_by)``
            (:mod:`streams.wire.keys`), no key when that is empty.
        codec: ``msgpack`` or ``json`` record values.
        rate: events per second to pace the sends to (None: as fast as possible).
        stamp: set each event's ``ts`` to the send time (epoch ms) before encoding
            (the producer time the worker measures verdict latency from).
        fill_ids: give an event without ``event_id`` a fresh one (uuid4 hex).
        summary: counts to add to (e.g. with ``bad`` already counted by the reader).
        on_progress: called about every 2 s while sending, with the summary so far.
        on_sent: called with ``(event, time.time())`` just before each send.
        on_bad: called with ``(path, position, reason)`` for an event that cannot be
            encoded at all (counted in ``bad``) or is too large for Kafka (counted
            in ``too_large``: over ``max_request_size``, or refused by the broker);
            it is skipped. ``path``/``position`` are the event's file and line when
            ``events`` is a :class:`FileEvents`, else ``"<events>"`` and its
            1-based index. Only reports: the counting is done here.
        linger_ms: producer batching delay (0 with ``rate``: send at once).
        max_request_size: the largest record the producer sends, bytes (Kafka's
            ``max.request.size``); the topic's ``max.message.bytes`` must allow it too.
        complete: add each session's ``session_key`` to its events without one,
            and a call's ``tool_name``/``args`` to its ``tool_result``, as the
            client does (:class:`~streams.runners.completion.EventCompleter`).
    Returns:
        The summary; ``sent`` counts the records sent and not refused as too
        large, ``failed`` those of them the broker did not acknowledge.
    Raises:
        ValueError: a bad ``bootstrap`` (an entry without a port, or a port outside 1-65535).
        aiokafka.errors.KafkaConnectionError: the broker is unreachable.
    """
    bootstrap = bootstrap_servers(bootstrap)
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import MessageSizeTooLargeError

    encode = record_encoder(codec)
    summary = summary if summary is not None else ProduceSummary()
    report = on_bad if on_bad is not None else (lambda path, position, reason: None)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                linger_ms=0 if rate else linger_ms, max_batch_size=256 * 1024,
                                max_request_size=max_request_size)
    try:
        await producer.start()
    except BaseException:
        await producer.stop()  # releases what start() opened (else: "Unclosed AIOKafkaProducer")
        raise
    pending: set[asyncio.Future] = set()
    completer = EventCompleter() if complete else None

    def where(index: int) -> tuple[str, int]:
        if isinstance(events, FileEvents):
            return events.path, events.position
        return "<events>", index + 1

    def done(location: tuple[str, int], key: bytes | None, size: int, future: asyncio.Future) -> None:
        pending.discard(future)
        error = None if future.cancelled() else future.exception()
        if isinstance(error, MessageSizeTooLargeError):
            # Alone in its batch (it is over max_batch_size), so the broker refused this record only.
            summary.sent -= 1
            summary.too_large += 1
            report(*location, too_large_reason(size))
        elif future.cancelled() or error is not None:
            summary.failed += 1
        else:
            summary.partitions.add(future.result().partition)
            if key is not None:
                summary.keys.add(key)

    try:
        started = time.monotonic()
        last_progress = started
        for index, event in enumerate(events):
            if rate:
                delay = started + index / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            if completer is not None and isinstance(event, dict):
                event = dict(completer.complete(event))
            key = record_key(event, key_by) if isinstance(event, dict) else None
            now = time.time()
            if stamp:
                event["ts"] = int(now * 1000)
            if fill_ids and "event_id" not in event:
                event["event_id"] = uuid.uuid4().hex
            try:
                value = encode(event)
            except ValueError as exc:
                summary.bad += 1
                report(*where(index), str(exc))
                continue
            if on_sent is not None:
                on_sent(event, now)
            size = record_size(key, value)
            try:
                future = await producer.send(topic, value=value, key=key)
            except MessageSizeTooLargeError:
                summary.too_large += 1
                report(*where(index), too_large_reason(size, max_request_size, "--max-request-size"))
                continue
            if key is None:
                summary.keyless += 1
            pending.add(future)
            future.add_done_callback(functools.partial(done, where(index), key, size))
            summary.sent += 1
            if on_progress is not None and time.monotonic() - last_progress >= _PROGRESS_EVERY_S:
                last_progress = time.monotonic()
                on_progress(summary)
        await producer.flush()
        if pending:
            await asyncio.wait(list(pending))
        summary.elapsed_s = time.monotonic() - started
    finally:
        await producer.stop()
    return summary


@click.command("produce", epilog="""\b
Examples:
  loopwatch produce examples/events.jsonl
  loopwatch produce --rate 50 examples/events.jsonl          # 50 events/s, like a live fleet
  loopwatch produce --codec json --topic my.events a.jsonl b.msgpack
  loopwatch import --format openclaw ~/.openclaw/agents | loopwatch produce -
  loopwatch produce --keep-ts recorded.jsonl                # keep the events' own ts
""")
@bootstrap_option()
@click.option("--topic", default="loopwatch.events", show_default=True,
              help="Topic to publish to (the worker's input topic).")
@click.option("--codec", type=click.Choice(["msgpack", "json"]), default="msgpack", show_default=True,
              help="Encoding of the record values; an event it cannot carry goes in the other (msgpack: "
                   "integers beyond 64 bits, lone surrogates; JSON: bytes). The worker reads both.")
@click.option("--key-by", type=click.Choice(KEY_BY), default="run", show_default=True,
              help="Record key: 'run' = run id (else session key, else session id), as runners key "
                   "their events; 'session' = session key, else session id.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Events per second (default: as fast as the broker takes them).")
@click.option("--keep-ts", is_flag=True,
              help="Keep each event's own ts. By default ts is set to the send time (the producer time "
                   "the worker measures verdict latency from), and a missing event_id is filled in.")
@click.option("--max-request-size", type=click.IntRange(min=1024), default=MAX_REQUEST_SIZE, show_default=True,
              metavar="BYTES",
              help="Largest record the producer sends (Kafka's max.request.size); a larger event is reported "
                   "and skipped. The topic's max.message.bytes (by default the broker's message.max.bytes, "
                   "1048588) must allow it too.")
@click.option("--as-is", "as_is", is_flag=True,
              help="Send each event exactly as read. By default an event without session_key gets the one "
                   "its session_id was last sent with, and a tool_result without tool_name/args gets those "
                   "of its outcome_follows call, as OpenClaw's hooks have them (the client does the same).")
@click.option("--no-validate", "no_validate", is_flag=True,
              help="Send events that do not fit the event schema too (an unknown type, a field of the wrong "
                   "type, a call without a session): the worker dead-letters them (to try the dead-letter "
                   "path). By default each is reported with its file:line and skipped.")
@click.option("-q", "--quiet", is_flag=True,
              help="No progress and no summary; bad records are still reported (the first 10, then a count).")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, allow_dash=True))
def produce(bootstrap: str, topic: str, codec: str, key_by: str, rate: float | None, keep_ts: bool,
            max_request_size: int, as_is: bool, no_validate: bool, quiet: bool, files: tuple[str, ...]) -> None:
    """Publish the events of FILES to Kafka, one record per event.

    FILES are JSON Lines (one event object per line) or msgpack streams of
    event maps ('-' = standard input), in the event schema of `loopwatch
    replay`. Each record is keyed by the event's run id (falling back to its
    session key, then session id), so a run's events stay in order on one
    partition. A line that is not an event object, an event that does not
    fit the event schema (what the worker would dead-letter: an unknown
    `type`, a field of the wrong type; see --no-validate) and an event too
    large for Kafka (see --max-request-size) is counted and skipped; the
    first 10 are reported with their file, line and reason, the rest in one
    line.

    Progress and a summary (events, keys, partitions, rate) go to stderr. Exit
    status 0 when every record was sent and acknowledged; 1 when any was
    skipped (bad, or too large for Kafka: the topic then lacks part of the
    input, as replay, import and report say with 1), when the broker cannot
    be reached, or when it did not acknowledge every record sent (see
    docs/commands.md).
    """
    summary = ProduceSummary()
    started = time.monotonic()
    skipped = SkipReport("produce")

    def on_bad(path: str, position: int, reason: str) -> None:  # the reader's: counted here
        summary.bad += 1
        skipped(path, position, reason)

    def on_progress(current: ProduceSummary) -> None:
        if not quiet:
            rate_now = current.sent / max(1e-9, time.monotonic() - started)
            click.echo(f"loopwatch produce: {current.sent} sent ({rate_now:,.0f}/s) ...", err=True)

    from aiokafka.errors import KafkaConnectionError
    from streams.wire.logs import cannot_reach

    try:
        run_interruptible(publish_events(bootstrap, topic, file_events(files, on_bad, not no_validate), codec=codec,
                                   key_by=key_by,
                                   rate=rate, stamp=not keep_ts, fill_ids=True, summary=summary,
                                   on_progress=on_progress, on_bad=skipped, max_request_size=max_request_size,
                                   complete=not as_is))
    except KafkaConnectionError as exc:
        raise click.ClickException(cannot_reach(bootstrap, exc)) from None
    finally:
        skipped.close()
    if not quiet:
        for line in summary.lines(topic):
            click.echo(f"loopwatch produce: {line}", err=True)
    if summary.failed or summary.bad or summary.too_large:
        sys.exit(1)
