"""``loopwatch fleet list|clear``: the fleet breakers the workers hold, and clearing one by hand.

Both read ``loopwatch.fleet-events`` as the workers' breaker readers do
(:mod:`streams.worker.fleet`): every partition, no consumer group, from
``holdSeconds + windowSeconds`` ago (the config's ``options.fleet``), through the
same :class:`~streams.detection.fleet_breaker.FleetBreaker`. A breaker is active
until ``holdSeconds`` after its loop's last observation, by the wall clock here.

``clear`` publishes a ``fleet_clear`` record (key = the signature) to the
fleet-events topic, which every worker's breaker reads and acts on (the loop is
forgotten until a ``fleet_loop`` record of it is published again), and an audit
record to ``loopwatch.loop-events``::

    {kind: fleet, action: cleared, detector: fleet_loop, rule: <signature>,
     message, by, reason, enforced: true, key, event_ts, ...}
"""

from __future__ import annotations

import asyncio
import getpass
import json
import socket
import sys
import time
from datetime import datetime, timezone
from typing import Any

import click

from streams.detection.fleet import FleetSettings, fleet_settings
from streams.detection.fleet_breaker import FleetBreaker
from streams.wire.brokers import bootstrap_option
from streams.wire.codecs import DecodeError, decode_event, encode_msgpack

from .replay import config_option, load_config_or_exit

__all__ = ["fleet", "read_breakers", "clear_record", "audit_record"]

_TOPIC = "loopwatch.fleet-events"
_LOOP_EVENTS = "loopwatch.loop-events"


def _iso(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def who() -> str:
    """``user@host`` of whoever runs the command (the audit record's ``by``)."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def clear_record(signature: str, by: str, reason: str | None, now_ms: int) -> dict[str, Any]:
    """The ``fleet_clear`` record the workers' breakers act on (``signature`` ``*``: every breaker)."""
    return {"type": "fleet_clear", "signature": signature, "by": by, "reason": reason, "ts": now_ms}


def audit_record(signature: str, by: str, reason: str | None, now_ms: int, cleared: list[dict[str, Any]]
                 ) -> dict[str, Any]:
    """The loop event that records a breaker cleared by hand (shaped as every loop event, kind ``fleet``)."""
    what = "every fleet breaker" if signature == "*" else f"fleet breaker {signature}"
    message = f"{what} cleared by {by}" + (f": {reason}" if reason else "")
    return {"kind": "fleet", "action": "cleared", "detector": "fleet_loop", "level": None,
            "count": len(cleared), "message": message, "rule": signature, "enforced": True, "by": by,
            "reason": reason, "warning_key": None, "tool_name": cleared[0]["tool"] if len(cleared) == 1 else None,
            "run_id": None, "session_id": None, "key": signature, "event_id": None,
            "evidence": [loop["id"] for loop in cleared], "source": None, "event_ts": now_ms}


async def read_breakers(bootstrap: str, topic: str, settings: FleetSettings) -> FleetBreaker:
    """A breaker fed with the fleet-events topic as a worker's is (fleet_loop records, fleet_clear records).

    Raises click.ClickException when the topic does not exist.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                client_id="loopwatch-fleet")
    try:
        await consumer.start()
        if topic not in await consumer.topics():
            raise click.ClickException(f"topic {topic!r} does not exist on {bootstrap} (the worker creates it "
                                       "when it starts: is it running, with this topic name?)")
        partitions = consumer.partitions_for_topic(topic)
        for _ in range(50):  # a consumer without a subscription learns a topic's partitions on a metadata update
            if partitions:
                break
            consumer._client.add_topic(topic)  # aiokafka has no public call for this (as streams.worker.fleet)
            await consumer._client.force_metadata_update()
            partitions = consumer.partitions_for_topic(topic)
            if not partitions:
                await asyncio.sleep(0.1)
        tps = [TopicPartition(topic, p) for p in sorted(partitions or ())]
        consumer.assign(tps)
        since = int((time.time() - settings.hold - settings.window_s) * 1000)
        found = await consumer.offsets_for_times({tp: since for tp in tps})
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            at = found.get(tp)
            consumer.seek(tp, at.offset if at is not None else ends[tp])
        breaker = FleetBreaker(settings)
        left = {tp for tp in tps if await consumer.position(tp) < ends[tp]}
        while left:
            batches = await consumer.getmany(*left, timeout_ms=1000)
            for tp, records in batches.items():
                for record in records:
                    learn(breaker, record.value)
            left = {tp for tp in left if await consumer.position(tp) < ends[tp]}
        return breaker
    finally:
        await consumer.stop()


def learn(breaker: FleetBreaker, value: bytes | None) -> None:
    """Apply one fleet-events record value to ``breaker`` as the workers do (:meth:`FleetBreaker.learn`)."""
    try:
        record = decode_event(value or b"")
    except DecodeError:
        return
    breaker.learn(record)


def _settings(config_path: str | None) -> FleetSettings:
    return fleet_settings(load_config_or_exit(config_path).raw) if config_path else FleetSettings()


def _run(coro: Any, bootstrap: str) -> Any:
    from aiokafka.errors import KafkaConnectionError
    from streams.wire.logs import cannot_reach

    try:
        return asyncio.run(coro)
    except KafkaConnectionError as exc:
        raise click.ClickException(cannot_reach(bootstrap, exc)) from None


@click.group("fleet")
def fleet() -> None:
    """The fleet breakers: list the active ones, clear one by hand.

    A fleet breaker blocks (or in shadow mode flags) the calls of a loop seen
    in many runs (docs/fleet.md). Use the worker's --config so that holdSeconds
    and windowSeconds are the worker's.
    """


@fleet.command("list", epilog="""\b
Examples:
  loopwatch fleet list --config openclaw.json
  loopwatch fleet list --json | jq .signature
""")
@bootstrap_option()
@config_option
@click.option("--topic", default=_TOPIC, show_default=True, help="The worker's fleet-events topic.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per breaker (the fleet_loop record, with until).")
def list_(bootstrap: str, config_path: str | None, topic: str, as_json: bool) -> None:
    """List the active fleet breakers: signature, tool, runs, until when they hold, why."""
    settings = _settings(config_path)
    breaker = _run(read_breakers(bootstrap, topic, settings), bootstrap)
    active = breaker.active(now_ms=time.time() * 1000)
    for until, loop in active:
        if as_json:
            click.echo(json.dumps({**loop, "until": int(until)}, ensure_ascii=False, separators=(",", ":")))
        else:
            agents = ",".join(loop.get("agents") or []) or "-"
            click.echo(f"{loop['signature']}  {loop['tool']}  runs {loop['runs']}  agents {agents}  "
                       f"last seen {_iso(loop['last_seen'])}  held until {_iso(until)}")
            click.echo(f"    {loop['message']}")
    if not active and not as_json:
        click.echo("no active fleet breaker", err=True)


@fleet.command("clear", epilog="""\b
Examples:
  loopwatch fleet clear 'error:web_fetch:9f2c4e1a0b3d5f67' --reason 'API fixed'
  loopwatch fleet clear --all --reason 'incident over'
""")
@click.argument("signature", required=False)
@click.option("--all", "all_", is_flag=True, help="Clear every active breaker.")
@click.option("--reason", default=None, help="Why, for the audit record on the loop-events topic.")
@bootstrap_option()
@config_option
@click.option("--topic", default=_TOPIC, show_default=True, help="The worker's fleet-events topic.")
@click.option("--loop-events-topic", default=_LOOP_EVENTS, show_default=True,
              help="Where the audit record goes (the worker's loop-events topic).")
def clear(signature: str | None, all_: bool, reason: str | None, bootstrap: str, config_path: str | None, topic: str,
          loop_events_topic: str) -> None:
    """Clear the fleet breaker of SIGNATURE (from `loopwatch fleet list`), or every one with --all.

    Every worker forgets the loop at once: its calls go to OpenClaw's rules
    again until the loop is published anew. The clearing is recorded on the
    loop-events topic (kind fleet, action cleared, by user@host, --reason).
    Exit status 1 when no active breaker has that signature (nothing is sent).
    """
    if bool(signature) == all_:
        raise click.UsageError("give a SIGNATURE or --all (not both)")
    wanted = "*" if all_ else str(signature)
    settings = _settings(config_path)

    async def main() -> list[dict[str, Any]]:
        from aiokafka import AIOKafkaProducer

        breaker = await read_breakers(bootstrap, topic, settings)
        cleared = [loop for _, loop in breaker.active(now_ms=time.time() * 1000)
                   if wanted in ("*", loop["signature"])]
        if not cleared:
            return cleared
        now_ms, by = int(time.time() * 1000), who()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            key = wanted.encode("utf-8")
            await producer.send_and_wait(topic, encode_msgpack(clear_record(wanted, by, reason, now_ms)), key=key)
            await producer.send_and_wait(loop_events_topic, encode_msgpack(
                audit_record(wanted, by, reason, now_ms, cleared)), key=key)
        finally:
            await producer.stop()
        return cleared

    cleared = _run(main(), bootstrap)
    if not cleared:
        click.echo(f"loopwatch fleet: no active fleet breaker{'' if all_ else ' with signature ' + repr(wanted)} "
                   "(loopwatch fleet list shows them); nothing sent", err=True)
        sys.exit(1)
    for loop in cleared:
        click.echo(f"cleared {loop['signature']}  {loop['tool']}  runs {loop['runs']}")
