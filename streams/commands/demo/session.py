"""The demo's run: the example events produced as ``loopwatch produce`` stamps them, one line per
verdict (or dead letter) as it arrives, then a summary, the latency, the metrics and what to try next.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import click
import msgpack

from streams.offline.replay import ReplaySummary
from streams.wire.codecs import DecodeError, decode_event
from streams.wire.logs import limit_kafka_client_logs
from ..produce import ProduceSummary, file_events, publish_events
from ..tail import format_verdict, json_safe
from .common import DEFAULT_CONFIG, say, shown

__all__ = ["run_session"]


def loopwatch_command() -> str:
    """How to call loopwatch from a shell: ``loopwatch`` when on PATH, else the script beside this Python."""
    import shutil

    script = os.path.join(os.path.dirname(sys.executable), "loopwatch")
    on_path = shutil.which("loopwatch")
    if on_path and os.path.realpath(on_path) == os.path.realpath(script):
        return "loopwatch"
    return os.path.relpath(script) if os.path.exists(script) else "loopwatch"


def dead_letter_line(value: bytes | None) -> str:
    """One line for a dead letter: where the refused record was and why."""
    try:
        letter = msgpack.unpackb(value or b"", raw=False, strict_map_key=False)
        source = letter.get("source") or {}
        return (f"partition {source.get('partition')} offset {source.get('offset')}: "
                f"{letter.get('reason_class')}: {letter.get('reason')}")
    except Exception:  # the worker's own record, but this line must never stop the demo
        return "a record the worker refused (its dead letter could not be read)"


def metrics_line(port: int) -> str:
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            text = response.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"metrics: {url} did not answer ({exc})"
    verdicts = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("loopwatch_verdicts_total{"))
    return f"metrics: {url} (Prometheus text; loopwatch_verdicts_total = {verdicts:g})"


async def run_session(bootstrap: str, topics: dict[str, str], events_path: str, rate: float | None,
                   timeout: float, once: bool, verdicts_out: str | None, metrics_port: int,
                   config_path: str = str(DEFAULT_CONFIG)) -> int:
    from aiokafka import AIOKafkaConsumer

    limit_kafka_client_logs()  # a broker outage repeats aiokafka's errors many times a second on the terminal

    # the dead letters too: an event the worker refuses gets no verdict, and the demo should say why
    # instead of waiting out its timeout for it
    consumer = AIOKafkaConsumer(topics["verdicts"], topics["dead-letters"], bootstrap_servers=bootstrap,
                                group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    seen: dict[str, dict[str, Any]] = {}
    dead: list[str] = []
    sent_at: dict[str, float] = {}
    latencies: list[float] = []
    out = open(verdicts_out, "w", encoding="utf-8", errors="backslashreplace") if verdicts_out else None

    def show(batches: dict) -> None:
        for message in sorted((r for b in batches.values() for r in b), key=lambda r: r.timestamp):
            if message.topic == topics["dead-letters"]:
                dead.append(dead_letter_line(message.value))
                click.echo(f"[DEAD] {dead[-1]}")
                continue
            try:
                record = decode_event(message.value or b"")
            except DecodeError:
                continue
            event_id = record.get("event_id")
            if not isinstance(event_id, str) or not event_id:  # e.g. "event_id": null: one per input record
                source = record.get("source") or {}
                event_id = f"{source.get('topic')}:{source.get('partition')}@{source.get('offset')}"
            if event_id in seen:
                continue  # a re-published verdict (after a worker restart): byte-identical, shown once
            seen[event_id] = record
            if event_id in sent_at:
                latencies.append(time.time() - sent_at[event_id])
            click.echo(f"[{len(seen):>4}] {format_verdict(record, message.timestamp)}")
            if out is not None:
                out.write(json.dumps(json_safe(record), ensure_ascii=False) + "\n")
                out.flush()

    producing: asyncio.Future | None = None
    try:
        produced = ProduceSummary()

        def on_bad(path: str, position: int, reason: str) -> None:
            produced.bad += 1
            say(f"{path}:{position}: skipped: {reason}")

        def on_sent(event: dict[str, Any], now: float) -> None:
            if isinstance(event.get("event_id"), str):
                sent_at[event["event_id"]] = now

        pace = f" at {rate:g} events/s" if rate else ""
        say(f"producing {events_path} to {topics['events']}{pace}, keyed by run id; verdicts as they arrive:")
        click.echo(f"[   #] {'time':<12}  {'run':<18} {'tool / event':<24} {'VERDICT':<6} detector level xcount")
        # stamped as `loopwatch produce` stamps by default (its --keep-ts off): ts = send time, so the
        # worker's loopwatch_verdict_latency_seconds is real; a missing event_id filled in, which
        # is how the verdicts are matched to the events here
        producing = asyncio.ensure_future(publish_events(
            # not validated here: an event the worker refuses is shown with its dead letter's reason
            bootstrap, topics["events"], file_events([events_path], on_bad, validate=False), rate=rate, stamp=True,
            fill_ids=True, summary=produced, on_sent=on_sent))
        deadline = None
        while True:
            batches = await consumer.getmany(timeout_ms=200)
            show(batches)
            if producing.done():
                producing.result()
                if deadline is None:
                    deadline = time.monotonic() + timeout
                if len(seen) + len(dead) >= produced.sent or time.monotonic() > deadline:
                    break
        summary = ReplaySummary()
        for record in seen.values():
            summary.add(record, record)
        click.echo("")
        say(f"{produced.sent} event(s) produced in {produced.elapsed_s:.1f} s, {len(seen)} verdict(s) received"
             + (f", {len(dead)} refused by the worker (dead letters, reasons above)" if dead else "")
             + (f", {produced.bad} bad line(s) skipped" if produced.bad else ""))
        for line in summary.lines()[1:]:
            click.echo(f"  {line}")
        if latencies:
            ordered = sorted(latencies)
            click.echo(f"  latency:    event sent -> verdict received: p50 {statistics.median(ordered) * 1000:.1f} ms, "
                       f"max {ordered[-1] * 1000:.1f} ms")
        if metrics_port:
            say(metrics_line(metrics_port))
        missing = produced.sent - len(seen) - len(dead)
        if missing > 0:
            say(f"ERROR: {missing} verdict(s) did not arrive within {timeout:g} s")
            return 1
        if dead:
            say(f"ERROR: the worker refused {len(dead)} event(s) of {shown(Path(events_path))} (dead letters)")
            return 1
        command = loopwatch_command()
        say(f"the same verdicts offline, without Kafka: {command} replay --key-by run "
             f"--config {shown(Path(config_path))} {shown(Path(events_path))}")
        if once:
            return 0
        say("the worker keeps running; Ctrl-C stops it. Meanwhile, in another shell:")
        say(f"  {command} produce --bootstrap {bootstrap} --topic {topics['events']} FILE      # more events")
        say(f"  {command} tail loop-events --bootstrap {bootstrap} --topic {topics['loop-events']} --from-beginning")
        while True:
            show(await consumer.getmany(timeout_ms=1000))
    finally:
        if out is not None:
            out.close()
        await consumer.stop()
        if producing is not None and not producing.done():
            # Ctrl-C while events are still going out: last, as with the broker down its producer's stop
            # may take until run_interruptible gives up on it
            producing.cancel()
            await asyncio.wait([producing])
