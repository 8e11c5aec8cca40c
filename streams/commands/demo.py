"""``loopwatch demo`` (``make run``): broker, worker, example fleet, live verdicts.

Steps, each announced on stderr:

1. a Kafka broker at ``--bootstrap``: used if it answers, else (for the
   default local address) started with ``deploy/kafka/kafka.sh start``;
2. a ``loopwatch worker`` subprocess with a fresh app id and fresh topics
   (``<app_id>.events``, ``.verdicts``, ``.loop-events``, ``.dead-letters``),
   so every demo starts clean; its log and data go under ``.work/demo/<app_id>``
   (:func:`streams.assets.work_dir`), removed again on exit unless the demo failed;
3. the example events (``examples/events.jsonl``) produced keyed by run id and
   stamped as ``loopwatch produce`` stamps them: ``ts`` set to the send time (the
   worker's verdict latency runs from it), a missing ``event_id`` filled in;
4. one line per verdict as it arrives, then a summary and where the metrics are;
5. the worker keeps running until Ctrl-C (``--once``: stop after the replay).

On exit the worker is stopped, the demo's topics deleted (unless
``--keep-topics``) and the broker stopped only if the demo started it.

Size: one command that drives a whole pipeline (broker, worker process, producer, live
consumer, clean-up); each step above is a function of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import click
import msgpack

from streams.assets import asset, checkout, work_dir
from streams.wire.brokers import DEFAULT_BOOTSTRAP, bootstrap_option
from streams.wire.codecs import DecodeError, decode_event
from streams.offline.replay import ReplaySummary
from .produce import ProduceSummary, file_events, publish_events
from .tail import format_verdict, json_safe

__all__ = ["demo"]



def _shipped(relative: str) -> Path:
    """A file shipped with loopwatch (checkout or wheel); its plain path when this install lacks it."""
    try:
        return asset(relative)
    except FileNotFoundError:
        return Path(relative)


ROOT = checkout() or Path(__file__).resolve().parents[2]
KAFKA_SH = _shipped("deploy/kafka/kafka.sh")
DEFAULT_EVENTS = _shipped("examples/events.jsonl")
DEFAULT_CONFIG = _shipped("examples/openclaw.json")


def _shown(path: Path) -> str:
    """``path`` as the user would type it here: relative below the current folder, else absolute."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative
READY_LINE = "[^Worker]: Ready"  # Faust logs it once the worker has its partitions


def _say(message: str) -> None:
    try:
        click.echo(f"demo: {message}", err=True)
    except OSError:  # stderr closed (piped into `head`, terminal gone): cleanup must still run
        pass


def _port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _loopwatch_command() -> str:
    """How to call loopwatch from a shell: ``loopwatch`` when on PATH, else the script beside this Python."""
    import shutil

    script = os.path.join(os.path.dirname(sys.executable), "loopwatch")
    on_path = shutil.which("loopwatch")
    if on_path and os.path.realpath(on_path) == os.path.realpath(script):
        return "loopwatch"
    return os.path.relpath(script) if os.path.exists(script) else "loopwatch"


def _split(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")  # checked: host:port (streams.wire.brokers)
    return host, int(port)


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")  # where kafka.sh can start a broker


def _kafka_sh_start(port: int) -> str:
    """The shell command that starts kafka.sh's broker on 127.0.0.1:``port`` (controller on the next port)."""
    # kafka.sh puts the controller on KAFKA_PORT + 1 by itself; only 65535 has no next port.
    controller = "" if port < 65535 else f" KAFKA_CONTROLLER_PORT={port - 1}"
    return f"KAFKA_PORT={port}{controller} {_shown(KAFKA_SH)} start"


def _no_broker_hint(bootstrap: str) -> str:
    host, port = _split(bootstrap)
    if host in LOCAL_HOSTS:
        return f"no Kafka broker at {bootstrap}; start one ({_kafka_sh_start(port)}) or pass --bootstrap"
    return (f"no Kafka broker at {bootstrap}; check the address, or start a local one "
            f"({_kafka_sh_start(9092)}) and pass --bootstrap 127.0.0.1:9092")


def _kafka_sh(action: str, port: int) -> subprocess.CompletedProcess:
    """``kafka.sh ACTION`` for ``port`` (an exported KAFKA_PORT must not move it elsewhere).

    Its state goes under :func:`work_dir` and it waits with this Python, unless KAFKA_WORK or
    KAFKA_PYTHON say otherwise: from a wheel, the script's own folder is no place for either."""
    env = {"KAFKA_WORK": str(work_dir() / "kafka"), "KAFKA_PYTHON": sys.executable, **os.environ,
           "KAFKA_PORT": str(port)}
    return subprocess.run(["bash", str(KAFKA_SH), action], stdout=sys.stderr, stderr=sys.stderr, env=env)


def _ensure_broker(bootstrap: str) -> bool:
    """Make sure a broker answers; returns True if this call started it."""
    host, port = _split(bootstrap)
    if _port_open(host, port):
        _say(f"using the Kafka broker already running at {host}:{port}")
        return False
    if bootstrap != DEFAULT_BOOTSTRAP or not KAFKA_SH.exists():
        raise click.ClickException(_no_broker_hint(bootstrap))
    state = Path(os.environ.get("KAFKA_WORK") or work_dir() / "kafka") / f"port-{port}"
    _say(f"no broker at {host}:{port}: starting one with {_shown(KAFKA_SH)} start "
         f"(Kafka 3.9.2, data and log under {state})")
    if _kafka_sh("start", port).returncode != 0:
        raise click.ClickException("deploy/kafka/kafka.sh start failed (see above)")
    return True


def _stop_broker(bootstrap: str) -> None:
    _say("stopping the broker this demo started")
    _kafka_sh("stop", _split(bootstrap)[1])


def _die_with_parent() -> None:
    """In the worker's child process: ask Linux to send it SIGTERM when the demo dies.

    The demo stops its worker on exit, but a demo killed outright (SIGKILL, a crash) runs no
    cleanup; the worker lives in its own session, so without this it would keep running alone.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class _Worker:
    """``loopwatch worker`` as a subprocess in its own process group, logging to a file."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "from streams.cli import main; main()", "worker"],
                cwd=log_path.parent, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **env, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    def log_text(self) -> str:
        try:
            return self.log_path.read_text("utf-8", "replace")
        except OSError:
            return ""

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while READY_LINE not in self.log_text():
            if self.proc.poll() is not None:
                raise click.ClickException(f"the worker exited with status {self.proc.returncode}; "
                                           f"last lines of {self.log_path}:\n{self._tail()}")
            if time.monotonic() > deadline:
                raise click.ClickException(f"the worker was not ready within {timeout:g} s; "
                                           f"last lines of {self.log_path}:\n{self._tail()}")
            time.sleep(0.2)

    def _tail(self, lines: int = 25) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _say(f"worker still running after {timeout:g} s: SIGKILL")
            self.proc.kill()
            self.proc.wait(10)


async def _delete_topics(bootstrap: str, prefixes: tuple[str, ...]) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        names = [t for t in await admin.list_topics() if t.startswith(prefixes)]
        if names:
            await admin.delete_topics(names, timeout_ms=10_000)
        return names
    finally:
        await admin.close()


def _dead_letter_line(value: bytes | None) -> str:
    """One line for a dead letter: where the refused record was and why."""
    try:
        letter = msgpack.unpackb(value or b"", raw=False, strict_map_key=False)
        source = letter.get("source") or {}
        return (f"partition {source.get('partition')} offset {source.get('offset')}: "
                f"{letter.get('reason_class')}: {letter.get('reason')}")
    except Exception:  # the worker's own record, but this line must never stop the demo
        return "a record the worker refused (its dead letter could not be read)"


def _metrics_line(port: int) -> str:
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            text = response.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"metrics: {url} did not answer ({exc})"
    verdicts = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("loopwatch_verdicts_total{"))
    return f"metrics: {url} (Prometheus text; loopwatch_verdicts_total = {verdicts:g})"


async def _session(bootstrap: str, topics: dict[str, str], events_path: str, rate: float | None,
                   timeout: float, once: bool, verdicts_out: str | None, metrics_port: int,
                   config_path: str = str(DEFAULT_CONFIG)) -> int:
    from aiokafka import AIOKafkaConsumer

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
                dead.append(_dead_letter_line(message.value))
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

    try:
        produced = ProduceSummary()

        def on_bad(path: str, position: int, reason: str) -> None:
            produced.bad += 1
            _say(f"{path}:{position}: skipped: {reason}")

        def on_sent(event: dict[str, Any], now: float) -> None:
            if isinstance(event.get("event_id"), str):
                sent_at[event["event_id"]] = now

        pace = f" at {rate:g} events/s" if rate else ""
        _say(f"producing {events_path} to {topics['events']}{pace}, keyed by run id; verdicts as they arrive:")
        click.echo(f"[   #] {'time':<12}  {'run':<18} {'tool / event':<24} {'VERDICT':<6} detector level xcount")
        # stamped as `loopwatch produce` stamps by default (its --keep-ts off): ts = send time, so the
        # worker's loopwatch_verdict_latency_seconds is real; a missing event_id filled in, which
        # is how the verdicts are matched to the events here
        producing = asyncio.ensure_future(publish_events(
            bootstrap, topics["events"], file_events([events_path], on_bad), rate=rate, stamp=True,
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
        _say(f"{produced.sent} event(s) produced in {produced.elapsed_s:.1f} s, {len(seen)} verdict(s) received"
             + (f", {len(dead)} refused by the worker (dead letters, reasons above)" if dead else "")
             + (f", {produced.bad} bad line(s) skipped" if produced.bad else ""))
        for line in summary.lines()[1:]:
            click.echo(f"  {line}")
        if latencies:
            ordered = sorted(latencies)
            click.echo(f"  latency:    event sent -> verdict received: p50 {statistics.median(ordered) * 1000:.1f} ms, "
                       f"max {ordered[-1] * 1000:.1f} ms")
        if metrics_port:
            _say(_metrics_line(metrics_port))
        missing = produced.sent - len(seen) - len(dead)
        if missing > 0:
            _say(f"ERROR: {missing} verdict(s) did not arrive within {timeout:g} s")
            return 1
        if dead:
            _say(f"ERROR: the worker refused {len(dead)} event(s) of {_shown(Path(events_path))} (dead letters)")
            return 1
        command = _loopwatch_command()
        _say(f"the same verdicts offline, without Kafka: {command} replay --key-by run "
             f"--config {_shown(Path(config_path))} {_shown(Path(events_path))}")
        if once:
            return 0
        _say("the worker keeps running; Ctrl-C stops it. Meanwhile, in another shell:")
        _say(f"  {command} produce --bootstrap {bootstrap} --topic {topics['events']} FILE      # more events")
        _say(f"  {command} tail loop-events --bootstrap {bootstrap} --topic {topics['loop-events']} --from-beginning")
        while True:
            show(await consumer.getmany(timeout_ms=1000))
    finally:
        if out is not None:
            out.close()
        await consumer.stop()


@click.command("demo", epilog="""\b
Examples:
  make run                        # the same as: loopwatch demo
  loopwatch demo --once           # stop after the example replay (CI)
  loopwatch demo --rate 5         # slower, to watch the detectors build up
  loopwatch demo --config my-openclaw.json --events my-fleet.jsonl --keep-topics
""")
@bootstrap_option(help="Kafka bootstrap server. At the default address a broker is started with "
                       "deploy/kafka/kafka.sh when none answers (and stopped again on exit).")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), default=str(DEFAULT_CONFIG),
              show_default=True, help="OpenClaw config (JSON5) for the worker.")
@click.option("--events", "events_path", type=click.Path(exists=True, dir_okay=False), default=str(DEFAULT_EVENTS),
              show_default=True, help="Event file to produce (JSON Lines or msgpack).")
@click.option("--rate", type=click.FloatRange(min=0), default=25.0, show_default=True,
              help="Events per second to produce (0 = as fast as possible).")
@click.option("--once", is_flag=True, help="Stop after every verdict of the replay arrived (exit 1 if some did not).")
@click.option("--app-id", default=None, help="Worker app id (default: loopwatch-demo-<random>, a clean start); "
                                              "topics are named <app-id>.events, .verdicts, ...")
@click.option("--partitions", type=click.IntRange(min=1), default=4, show_default=True,
              help="Partitions of the demo's topics.")
@click.option("--metrics-port", type=click.IntRange(min=0, max=65535), default=9464, show_default=True,
              help="Port of the worker's /metrics (the next free one if taken; 0 = off).")
@click.option("--timeout", type=click.FloatRange(min=1), default=120.0, show_default=True,
              help="Seconds to wait for the worker to be ready, and for the last verdict after producing.")
@click.option("--verdicts-out", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write every verdict record received to this file (JSON Lines).")
@click.option("--keep-topics", is_flag=True, help="Do not delete the demo's topics on exit.")
def demo(bootstrap: str, config_path: str, events_path: str, rate: float, once: bool, app_id: str | None,
         partitions: int, metrics_port: int, timeout: float, verdicts_out: str | None, keep_topics: bool) -> None:
    """Run the whole pipeline on the example fleet and print each verdict live.

    Starts (or reuses) a local Kafka broker, starts a `loopwatch worker` with
    the example OpenClaw config on fresh topics, produces the example events
    keyed by run id, and prints one line per verdict as it arrives (run, tool,
    VERDICT, detector level and count), then a summary (verdicts, detections,
    latency) and the worker's metrics URL. The worker keeps running until
    Ctrl-C unless --once. Everything the demo started is stopped on exit; the
    broker only if the demo started it.
    """
    app_id = app_id or f"loopwatch-demo-{uuid.uuid4().hex[:8]}"
    topics = {name: f"{app_id}.{name}" for name in ("events", "verdicts", "loop-events", "dead-letters",
                                                    "fleet-events")}
    work = work_dir() / "demo" / app_id
    if metrics_port:
        wanted = metrics_port
        while not _port_free(metrics_port) and metrics_port < wanted + 20:
            metrics_port += 1
        if metrics_port != wanted:
            _say(f"port {wanted} is taken: metrics on {metrics_port} instead")

    started_broker = _ensure_broker(bootstrap)
    worker: _Worker | None = None
    status = 1
    signal.signal(signal.SIGTERM, _interrupt)  # `kill PID` cleans up like Ctrl-C
    signal.signal(signal.SIGHUP, _interrupt)   # so does closing the terminal
    try:
        # Settings go through LOOPWATCH_* variables, not flags: faust's import-time argv scan takes
        # any argument starting with "--loop" (as --loop-events-topic does) for its --loop option.
        env = {
            "LOOPWATCH_BROKER": f"kafka://{bootstrap}", "LOOPWATCH_APP_ID": app_id,
            "LOOPWATCH_INPUT_TOPICS": topics["events"], "LOOPWATCH_VERDICTS_TOPIC": topics["verdicts"],
            "LOOPWATCH_LOOP_EVENTS_TOPIC": topics["loop-events"],
            "LOOPWATCH_DEAD_LETTERS_TOPIC": topics["dead-letters"], "LOOPWATCH_PARTITIONS": str(partitions),
            "LOOPWATCH_FLEET_EVENTS_TOPIC": topics["fleet-events"],
            "LOOPWATCH_STANDBY_REPLICAS": "0", "LOOPWATCH_CONFIG": str(Path(config_path).resolve()),
            "LOOPWATCH_METRICS_PORT": str(metrics_port), "LOOPWATCH_DATA_DIR": str(work / "data"),
            "LOOPWATCH_LOG_LEVEL": "info",
        }
        work.mkdir(parents=True, exist_ok=True)  # not before: a demo without a broker leaves nothing behind
        log_path = work / "worker.log"
        _say(f"starting worker {app_id} (config {config_path}; log {log_path})")
        t0 = time.monotonic()
        worker = _Worker(env, log_path)
        worker.wait_ready(timeout)
        _say(f"worker ready in {time.monotonic() - t0:.1f} s (pid {worker.proc.pid}); metrics on "
             f"http://127.0.0.1:{metrics_port}/metrics" if metrics_port else
             f"worker ready in {time.monotonic() - t0:.1f} s (pid {worker.proc.pid}); metrics off")
        status = asyncio.run(_session(bootstrap, topics, events_path, rate or None, timeout, once, verdicts_out,
                                      metrics_port, config_path))
    except KeyboardInterrupt:
        click.echo("", err=True)
        _say("interrupted: stopping")
        status = 0
    finally:
        if worker is not None:
            _say("stopping the worker")
            worker.stop()
        if work.exists():
            if status == 0:  # its log and data: nothing is left behind by a demo that went well
                shutil.rmtree(work, ignore_errors=True)
            else:
                _say(f"the worker's log is kept: {work / 'worker.log'}")
        if not keep_topics:
            try:
                deleted = asyncio.run(_delete_topics(bootstrap, (f"{app_id}.", f"{app_id}-")))
                _say(f"deleted {len(deleted)} demo topic(s)")
            except Exception as exc:  # cleanup must not hide the outcome
                _say(f"could not delete the demo topics: {exc}")
        if started_broker:
            _stop_broker(bootstrap)
    sys.exit(status)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
