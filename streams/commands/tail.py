"""``loopwatch tail``: follow the worker's output topics, one readable line per record.

The consumer has no consumer group (``group_id=None``): it reads every
partition, commits nothing and never joins the worker's group, so tailing
cannot disturb the worker. The ``format_*`` functions are shared with
``loopwatch demo``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from datetime import datetime
from typing import Any, Callable, Mapping

import click

from streams.wire.brokers import bootstrap_option
from streams.wire.codecs import DecodeError, decode_event
from streams.wire.verdicts import PROBE_RUN, is_probe
from .interruptible import run_interruptible
from streams.detection.decision import findings

__all__ = ["tail", "format_verdict", "format_loop_event", "format_dead_letter", "format_fleet_event", "finding_text",
           "STREAMS", "json_safe"]

# stream name -> the worker's default topic
STREAMS = {
    "verdicts": "loopwatch.verdicts",
    "loop-events": "loopwatch.loop-events",
    "dead-letters": "loopwatch.dead-letters",
    "fleet-events": "loopwatch.fleet-events",
}


def _clock(ms: Any) -> str:
    if not isinstance(ms, (int, float)):
        return "--:--:--.---"
    return datetime.fromtimestamp(ms / 1000.0).strftime("%H:%M:%S.%f")[:-3]


def _short(text: Any, width: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _time_of(record: Mapping[str, Any], ts: Any) -> Any:
    # the Kafka record timestamp (produce time); verdict_ts in records of earlier workers
    return ts if ts is not None else record.get("verdict_ts")


def finding_text(finding: Mapping[str, Any]) -> str:
    """One finding of a ``decided_by`` (:mod:`streams.detection.decision`) as text:
    ``generic_repeat critical x6``, ``ping_pong warning x3 (suppressed)``,
    ``escalation critical x3 (escalation)``, ``would block: fleet_loop critical x5 (fleet: <signature>, shadow)``,
    ``run ended (compaction_loop_persisted)``, ``generic_repeat warning x10 (policy: perTool[0] tool=x, exempted)``."""
    kind, action = finding.get("kind") or "detection", str(finding.get("action"))  # no kind: an older worker's
    if kind == "run_end":
        return f"run ended ({finding.get('detector')})"
    if kind == "correction":  # a late result's: the block or abort of its call did not stop it
        corrects = finding.get("corrects") or {}
        return f"{corrects.get('verdict')} of call {corrects.get('tool_call_id')} did not happen" + (
            f" ({finding['detector']})" if finding.get("detector") else "")
    text = f"{finding.get('detector')}" + (f" {finding['level']}" if finding.get("level") else "")
    if finding.get("count") is not None:
        text += f" x{finding['count']}"
    notes = []
    rule = finding.get("rule")
    if kind not in ("detection", "guard"):
        notes.append(f"{kind}: {rule}" if rule and rule != finding.get("detector") else str(kind))
    if action == "suppressed":
        notes.append("suppressed")
    elif action == "allow":  # a perTool exemption: the rule let through what OpenClaw's thresholds flag
        notes.append("exempted")
    if finding.get("recovery"):
        notes.append(str(finding["recovery"]))
    if finding.get("enforced") is False:
        text = f"{action.replace('_', ' ')}: {text}"
        notes.append("shadow")
    return text + (f" ({', '.join(notes)})" if notes else "")


def format_verdict(record: Mapping[str, Any], ts: float | None = None) -> str:
    """One line for a verdict record: time (``ts``, epoch ms), run, event type/tool, VERDICT, then what decided
    (its ``decided_by``, :func:`finding_text`) and any shadow finding beside it.

    A call's ``block`` or ``abort`` produced after its runner's ``deadline`` shows as ``LATE`` (the
    fail-open runner ran the call), and a result the runner sent ``ran_without_verdict`` says so, and
    that its call's refusal did not stop it when the record ``corrects`` one."""
    kind = record.get("type")
    what = record.get("tool_name") if kind in ("tool_call", "tool_result") else kind
    if kind == "tool_result":
        what = f"{what} (result)"
    verdict = str(record.get("verdict", "?")).upper()
    detail = ""
    found = findings(record)
    guard = record.get("guard") or {}
    if found:
        detail = finding_text(found[0])
        shadow = [f for f in found[1:] if f["enforced"] is False]
        if shadow and found[0]["enforced"] is not False:
            detail += "; " + "; ".join(finding_text(f) for f in shadow)
    elif kind == "compaction_retry" and guard.get("armed"):
        detail = f"guard armed for {guard.get('remaining')} outcome(s)"
    elif record.get("verdict") == "ignore":
        detail = _short(record.get("ignored"), 60)
    late = _late(record, _time_of(record, ts))
    if late and kind == "tool_call" and record.get("verdict") in ("block", "abort"):
        # the runner ran the call before this refusal came: the line does not say it was refused
        verdict, late = "LATE", f"{record['verdict']} {late[len('LATE: '):]}, the runner ran the call"
    if late:
        detail = f"{detail}  {late}" if detail else late
    return (f"{_clock(_time_of(record, ts))}  {_short(record.get('run_id') or record.get('key'), 18):<18} "
            f"{_short(what, 24):<24} {verdict:<6} {detail}").rstrip()


def _late(record: Mapping[str, Any], ts: Any) -> str | None:
    """``LATE ...`` for a verdict no runner waited for: the call ran without it (``late``), or the verdict of a
    call was produced after the deadline its runner sent (``deadline`` against the record's time ``ts``)."""
    if record.get("late"):
        corrects = record.get("corrects")
        if isinstance(corrects, Mapping):  # its call's verdict had refused it: that did not happen
            return f"LATE: ran without a verdict (its {corrects.get('verdict')} did not stop it)"
        return "LATE: ran without a verdict"
    deadline = record.get("deadline")
    if record.get("type") == "tool_call" and isinstance(deadline, (int, float)) and isinstance(ts, (int, float)) \
            and not isinstance(deadline, bool) and ts > deadline:
        return f"LATE: {(ts - deadline) / 1000:.1f} s after the runner's deadline"
    return None


def format_loop_event(record: Mapping[str, Any], ts: float | None = None) -> str:
    """One line for a loop event: time (``ts``, epoch ms), run, tool, ACTION, the finding, message."""
    action = str(record.get("action", "?")).upper()
    return (f"{_clock(_time_of(record, ts))}  {_short(record.get('run_id') or record.get('key'), 18):<18} "
            f"{_short(record.get('tool_name'), 16):<16} {action:<11} "
            f"{finding_text(record)}: {_short(record.get('message'), 90)}")


def format_fleet_event(record: Mapping[str, Any], ts: float | None = None) -> str:
    """One line for a fleet-events record: a ``fleet_loop`` (a loop seen in many runs), a ``fleet_block``
    (a call the breaker blocked, or would have in shadow mode) or a ``fleet_clear`` (a breaker cleared by hand)."""
    kind = record.get("type")
    clock = _clock(_time_of(record, ts))
    if kind == "fleet_loop":
        agents = record.get("agents") or []
        return (f"{clock}  FLEET LOOP  {record.get('signature')}  runs {record.get('runs')}  "
                f"events {record.get('events')}  agents {','.join(map(str, agents[:3])) or '-'}: "
                f"{_short(record.get('message'), 120)}")
    if kind == "fleet_block":
        action = "WOULD BLOCK" if record.get("shadow") else "BLOCK"
        return (f"{clock}  {_short(record.get('run_id'), 18):<18} {_short(record.get('tool_name'), 16):<16} "
                f"{action:<11} fleet_loop runs {record.get('runs')} ({record.get('signature')})"
                + (f": {_short(record.get('reason'), 90)}" if record.get("reason") else ""))
    if kind == "fleet_clear":
        return (f"{clock}  CLEARED     {record.get('signature')}  by {record.get('by')}"
                + (f": {_short(record.get('reason'), 90)}" if record.get("reason") else ""))
    return f"{clock}  {str(kind).upper()}  (not a fleet record)"


def format_dead_letter(record: Mapping[str, Any], ts: float | None = None) -> str:
    """One line for a dead letter: reason class, where the record was, reason."""
    source = record.get("source") or {}
    key = record.get("key")
    key_text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    return (f"{str(record.get('reason_class', '?')).upper():<7} {source.get('topic')}:{source.get('partition')}"
            f"@{source.get('offset')}  key={key_text!r}  {_short(record.get('reason'), 120)}")


_FORMATTERS: dict[str, Callable[..., str]] = {
    "verdicts": format_verdict,
    "loop-events": format_loop_event,
    "dead-letters": format_dead_letter,
    "fleet-events": format_fleet_event,
}


def json_safe(value: Any) -> Any:
    """``value`` with bytes made JSON-friendly: UTF-8 text, else ``{"base64": ...}``."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _line(message: Any, record: dict[str, Any], formatter: Callable[..., str], as_json: bool) -> str:
    """The line ``tail`` prints for ``record`` (read at ``message``); for a record of another producer
    that the formatter cannot show (any shape can come), a line saying so: tailing goes on."""
    try:
        return _shown(message, record, formatter, as_json)
    except Exception as exc:
        return f"p{message.partition}@{message.offset}: cannot show the record ({type(exc).__name__}: {exc})"


def _shown(message: Any, record: dict[str, Any], formatter: Callable[..., str], as_json: bool) -> str:
    if as_json:
        return json.dumps({"partition": message.partition, "offset": message.offset,
                           "timestamp": message.timestamp, **json_safe(record)}, ensure_ascii=False,
                          separators=(",", ":"), default=repr)
    if "undecodable" in record:
        return f"p{message.partition}@{message.offset}: not a loopwatch record: {record['undecodable']}"
    return formatter(record, message.timestamp)


IDLE_NOTICE_S = 30.0
"""Seconds without a record before an interactive ``tail`` says it is still waiting (then again as often)."""


def _interactive() -> bool:
    """Whether a person watches stderr (a terminal): only then does ``tail`` say it is waiting."""
    return sys.stderr.isatty()


async def _tail(bootstrap: str, topic: str, stream: str, from_beginning: bool, max_records: int | None,
                idle_timeout: float | None, as_json: bool, show_probes: bool = False) -> int:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False,
                                auto_offset_reset="earliest" if from_beginning else "latest")
    try:
        await consumer.start()
    except BaseException:
        await consumer.stop()  # releases what start() opened (else: "Unclosed AIOKafkaConsumer")
        raise
    # Subscribing to a missing topic would make the broker auto-create it: check first.
    if topic not in await consumer.topics():
        await consumer.stop()
        raise click.ClickException(f"topic {topic!r} does not exist on {bootstrap} (the worker creates its "
                                   "output topics when it starts: is it running, with these topic names?)")
    consumer.subscribe([topic])
    formatter = _FORMATTERS[stream]
    count = 0
    last = noticed = time.monotonic()
    interactive = _interactive()
    if interactive:  # someone watching: say what an empty screen means
        click.echo(f"loopwatch tail: following {topic} on {bootstrap} "
                   f"({'from the beginning' if from_beginning else 'new records only'}); Ctrl-C stops", err=True)
    try:
        while max_records is None or count < max_records:
            batches = await consumer.getmany(timeout_ms=200)
            if not batches:
                now = time.monotonic()
                if idle_timeout is not None and now - last >= idle_timeout:
                    break
                if interactive and now - max(last, noticed) >= IDLE_NOTICE_S:
                    noticed = now
                    click.echo(f"loopwatch tail: waiting: no new record on {topic} for {now - last:.0f} s "
                               "(is a worker running, and are events being produced?)", err=True)
                continue
            last = time.monotonic()
            records = sorted((r for batch in batches.values() for r in batch), key=lambda r: r.timestamp)
            for message in records:
                try:
                    record = decode_event(message.value or b"")
                except DecodeError as exc:
                    record = {"undecodable": str(exc), "value": message.value}
                if not show_probes and isinstance(record, Mapping) and is_probe(record):
                    continue  # a gateway's /readyz probe: health checking, not an agent's call
                click.echo(_line(message, record, formatter, as_json))
                count += 1
                if max_records is not None and count >= max_records:
                    break
    finally:
        await consumer.stop()
    return count


@click.command("tail", epilog="""\b
Examples:
  loopwatch tail                                   # new verdicts, live
  loopwatch tail loop-events --from-beginning      # every warning, block and abort so far
  loopwatch tail dead-letters --json --from-beginning --idle-timeout 5
  loopwatch tail fleet-events --from-beginning     # fleet loops, fleet breaker blocks, breakers cleared
  loopwatch tail verdicts --max 100 --json > verdicts.jsonl
""")
@click.argument("stream", type=click.Choice(list(STREAMS)), default="verdicts", required=False, metavar="[STREAM]")
@bootstrap_option()
@click.option("--topic", default=None,
              help="Topic to read (default: the worker's default for STREAM: loopwatch.verdicts, "
                   "loopwatch.loop-events, loopwatch.dead-letters or loopwatch.fleet-events).")
@click.option("--from-beginning", is_flag=True, help="Start at the oldest record instead of new ones only.")
@click.option("--max", "max_records", type=click.IntRange(min=1), default=None,
              help="Stop after N records.")
@click.option("--idle-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Stop after S seconds without a record.")
@click.option("--json", "as_json", is_flag=True,
              help="Print each record as one JSON object (with partition and offset) instead of a line of text.")
@click.option("--show-probes", is_flag=True,
              help=f"Also show the records of the gateway's /readyz probes (run {PROBE_RUN}), hidden by default.")
def tail(stream: str, bootstrap: str, topic: str | None, from_beginning: bool, max_records: int | None,
         idle_timeout: float | None, as_json: bool, show_probes: bool) -> None:
    """Follow a loopwatch output topic live.

    STREAM is `verdicts` (default; one per event: time, run, tool, VERDICT,
    and what decided: detector level xcount, the policy, the fleet breaker or
    the run's end, shadow findings beside it), `loop-events` (every finding:
    warnings emitted or suppressed, blocks, aborts, shadow findings, with
    their messages), `dead-letters` (records the worker could not use, with
    the reason and where they were) or `fleet-events` (fleet loops, calls the
    fleet breaker blocked or would block, breakers cleared).

    The records of a gateway's /readyz probes (a compaction of run
    loopwatch-gateway-readyz, sent while the gateway sees no traffic) are
    hidden unless --show-probes.

    Reads without a consumer group and commits nothing, so it never affects
    the worker. Ctrl-C stops; so do --max and --idle-timeout. On a terminal
    it says what it follows, and every 30 s without a record that it is
    still waiting (stderr; nothing of the kind when piped).
    """
    from aiokafka.errors import KafkaConnectionError
    from streams.wire.logs import cannot_reach

    try:
        count = run_interruptible(_tail(bootstrap, topic or STREAMS[stream], stream, from_beginning, max_records,
                                  idle_timeout, as_json, show_probes))
    except KeyboardInterrupt:
        return
    except KafkaConnectionError as exc:
        raise click.ClickException(cannot_reach(bootstrap, exc)) from None
    if count == 0 and sys.stderr.isatty():
        click.echo("loopwatch tail: no records", err=True)
