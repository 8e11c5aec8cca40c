"""``loopwatch produce``: publish event files to the worker's input topic.

:func:`publish_events` is the reusable part (``loopwatch demo`` and the
benchmarks call it): events in, one Kafka record each, keyed by
:func:`streams.keys.partition_key`, optionally paced to a rate.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import click

from ..codecs import encode_json, encode_msgpack
from ..keys import KEY_BY, partition_key
from .replay import event_records

__all__ = ["produce", "publish_events", "ProduceSummary", "file_events"]

_PROGRESS_EVERY_S = 2.0  # seconds between progress lines when stderr is not a terminal


@dataclass
class ProduceSummary:
    """What :func:`publish_events` did. ``elapsed_s`` runs from the first send to the last acknowledgement."""

    sent: int = 0
    bad: int = 0
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
        if self.keyless:
            out.append(f"{self.keyless} event(s) without run id or session id: sent without a key "
                       "(the worker derives one)")
        if self.failed:
            out.append(f"{self.failed} event(s) NOT acknowledged by the broker")
        return out


def file_events(paths: Iterable[str], on_bad: Callable[[str, int, str], None]) -> Iterator[dict[str, Any]]:
    """The events of JSON Lines / msgpack files; bad records go to ``on_bad(path, position, reason)``.

    Raises ``click.UsageError`` for a folder.
    """
    for path, position, event, error in event_records("events", paths, progress=False):
        if event is None:
            on_bad(path, position, error or "unreadable")
        else:
            yield event


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
) -> ProduceSummary:
    """Publish events, one record each, and wait until the broker acknowledged all of them.

    Arguments:
        bootstrap: ``host:port`` (a ``kafka://`` prefix is accepted).
        topic: the input topic.
        events: decoded events; the record key is ``partition_key(event, key_by)``
            (UTF-8), no key when that is empty.
        codec: ``msgpack`` or ``json`` record values.
        rate: events per second to pace the sends to (None: as fast as possible).
        stamp: set each event's ``ts`` to the send time (epoch ms) before encoding
            (the producer time the worker measures verdict latency from).
        fill_ids: give an event without ``event_id`` a fresh one (uuid4 hex).
        summary: counts to add to (e.g. with ``bad`` already counted by the reader).
        on_progress: called about every 2 s while sending, with the summary so far.
        on_sent: called with ``(event, time.time())`` just before each send.
        on_bad: called with ``("<events>", index, reason)`` for an event that cannot
            be encoded at all (it is counted in ``bad`` and skipped).
        linger_ms: producer batching delay (0 with ``rate``: send at once).
    Returns:
        The summary; ``failed`` counts records the broker did not acknowledge.
    Raises:
        aiokafka.errors.KafkaConnectionError: the broker is unreachable.
    """
    from aiokafka import AIOKafkaProducer

    encode = _encoder(codec)
    summary = summary if summary is not None else ProduceSummary()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap.removeprefix("kafka://"), acks="all",
                                linger_ms=0 if rate else linger_ms, max_batch_size=256 * 1024)
    try:
        await producer.start()
    except BaseException:
        await producer.stop()  # releases what start() opened (else: "Unclosed AIOKafkaProducer")
        raise
    pending: set[asyncio.Future] = set()

    def done(future: asyncio.Future) -> None:
        pending.discard(future)
        if future.cancelled() or future.exception() is not None:
            summary.failed += 1
        else:
            summary.partitions.add(future.result().partition)

    try:
        started = time.monotonic()
        last_progress = started
        for index, event in enumerate(events):
            if rate:
                delay = started + index / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            key_text = partition_key(event, key_by) if isinstance(event, dict) else ""
            key = key_text.encode("utf-8", "surrogatepass") if key_text else None
            now = time.time()
            if stamp:
                event["ts"] = int(now * 1000)
            if fill_ids and "event_id" not in event:
                event["event_id"] = uuid.uuid4().hex
            try:
                value = encode(event)
            except ValueError as exc:
                summary.bad += 1
                if on_bad is not None:
                    on_bad("<events>", index + 1, str(exc))
                continue
            if key is None:
                summary.keyless += 1
            else:
                summary.keys.add(key)
            if on_sent is not None:
                on_sent(event, now)
            future = await producer.send(topic, value=value, key=key)
            pending.add(future)
            future.add_done_callback(done)
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


def _encoder(codec: str) -> Callable[[dict[str, Any]], bytes]:
    """The record encoder; an event msgpack cannot carry (integers beyond 64 bits,
    lone surrogates) goes as ASCII-escaped JSON, which the worker also reads.
    Raises ``ValueError`` for an event neither can encode."""
    primary = encode_msgpack if codec == "msgpack" else encode_json

    def encode(event: dict[str, Any]) -> bytes:
        try:
            return primary(event)
        except (OverflowError, TypeError, ValueError, UnicodeEncodeError):
            pass
        try:
            return json.dumps(event, ensure_ascii=True, separators=(",", ":")).encode("ascii")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"cannot encode the event: {exc}") from None

    return encode


@click.command("produce", epilog="""\b
Examples:
  loopwatch produce examples/events.jsonl
  loopwatch produce --rate 50 examples/events.jsonl          # 50 events/s, like a live fleet
  loopwatch produce --codec json --topic my.events a.jsonl b.msgpack
  loopwatch import --format openclaw ~/.openclaw/agents | loopwatch produce -
  loopwatch produce --keep-ts recorded.jsonl                # keep the events' own ts
""")
@click.option("--bootstrap", default="127.0.0.1:9092", show_default=True, envvar="LOOPWATCH_BOOTSTRAP",
              show_envvar=True, help="Kafka bootstrap server(s), host:port[,host:port].")
@click.option("--topic", default="loopwatch.events", show_default=True,
              help="Topic to publish to (the worker's input topic).")
@click.option("--codec", type=click.Choice(["msgpack", "json"]), default="msgpack", show_default=True,
              help="Encoding of the record values.")
@click.option("--key-by", type=click.Choice(KEY_BY), default="run", show_default=True,
              help="Record key: 'run' = run id (else session key, else session id), as runners key "
                   "their events; 'session' = session key, else session id.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Events per second (default: as fast as the broker takes them).")
@click.option("--keep-ts", is_flag=True,
              help="Keep each event's own ts. By default ts is set to the send time (the producer time "
                   "the worker measures verdict latency from), and a missing event_id is filled in.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary; bad records are still reported.")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, allow_dash=True))
def produce(bootstrap: str, topic: str, codec: str, key_by: str, rate: float | None, keep_ts: bool,
            quiet: bool, files: tuple[str, ...]) -> None:
    """Publish the events of FILES to Kafka, one record per event.

    FILES are JSON Lines (one event object per line) or msgpack streams of
    event maps ('-' = standard input), in the event schema of `loopwatch
    replay`. Each record is keyed by the event's run id (falling back to its
    session key, then session id), so a run's events stay in order on one
    partition. Events are not validated here: the worker dead-letters invalid
    ones. A line that is not an event object is reported with its file and
    line, counted and skipped.

    Progress and a summary (events, keys, partitions, rate) go to stderr. Exit
    status 0, or 1 if the broker did not acknowledge every record.
    """
    summary = ProduceSummary()
    started = time.monotonic()

    def on_bad(path: str, position: int, reason: str) -> None:
        summary.bad += 1
        click.echo(f"loopwatch produce: {path}:{position}: skipped: {reason}", err=True)

    def on_progress(current: ProduceSummary) -> None:
        if not quiet:
            rate_now = current.sent / max(1e-9, time.monotonic() - started)
            click.echo(f"loopwatch produce: {current.sent} sent ({rate_now:,.0f}/s) ...", err=True)

    from aiokafka.errors import KafkaConnectionError

    try:
        asyncio.run(publish_events(bootstrap, topic, file_events(files, on_bad), codec=codec, key_by=key_by,
                                   rate=rate, stamp=not keep_ts, fill_ids=True, summary=summary,
                                   on_progress=on_progress, on_bad=on_bad))
    except KafkaConnectionError as exc:
        raise click.ClickException(f"cannot reach Kafka at {bootstrap}: {exc}") from None
    if not quiet:
        for line in summary.lines(topic):
            click.echo(f"loopwatch produce: {line}", err=True)
    if summary.failed:
        sys.exit(1)
