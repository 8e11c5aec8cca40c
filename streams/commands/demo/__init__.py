"""``loopwatch demo`` (``make run``): broker, worker, example fleet, live verdicts.

Steps, each announced on stderr:

1. a Kafka broker at ``--bootstrap``: used if it answers, else (for the
   default local address, ``127.0.0.1:$KAFKA_PORT`` when ``KAFKA_PORT`` is
   exported, else ``127.0.0.1:9092``) started with ``deploy/kafka/kafka.sh start``;
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

One module per part: the broker (``broker.py``), the worker process (``worker_process.py``), the
run (producing, live verdicts, summary: ``session.py``), the shipped files and progress lines
(``common.py``); the command here puts them together and cleans up.
"""

from __future__ import annotations

import shutil
import signal
import socket
import sys
import time
import uuid
from pathlib import Path

import click

from streams.assets import work_dir
from streams.wire.brokers import bootstrap_option
from ..interruptible import run_interruptible
from .broker import delete_topics, ensure_broker, stop_broker
from .common import DEFAULT_CONFIG, DEFAULT_EVENTS, say
from .session import run_session
from .worker_process import DemoWorker

__all__ = ["demo"]


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


@click.command("demo", epilog="""\b
Examples:
  make run                        # the same as: loopwatch demo
  loopwatch demo --once           # stop after the example replay (CI)
  loopwatch demo --rate 5         # slower, to watch the detectors build up
  loopwatch demo --config my-openclaw.json --events my-fleet.jsonl --keep-topics
""")
@bootstrap_option(help="Kafka bootstrap server. At the local address (127.0.0.1:$KAFKA_PORT, else "
                       "127.0.0.1:9092) a broker is started with deploy/kafka/kafka.sh when none answers "
                       "(and stopped again on exit).")
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
            say(f"port {wanted} is taken: metrics on {metrics_port} instead")

    started_broker = ensure_broker(bootstrap)
    worker: DemoWorker | None = None
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
        say(f"starting worker {app_id} (config {config_path}; log {log_path})")
        t0 = time.monotonic()
        worker = DemoWorker(env, log_path)
        worker.wait_ready(timeout)
        say(f"worker ready in {time.monotonic() - t0:.1f} s (pid {worker.proc.pid}); metrics on "
             f"http://127.0.0.1:{metrics_port}/metrics" if metrics_port else
             f"worker ready in {time.monotonic() - t0:.1f} s (pid {worker.proc.pid}); metrics off")
        status = run_interruptible(run_session(bootstrap, topics, events_path, rate or None, timeout, once,
                                               verdicts_out, metrics_port, config_path))
    except KeyboardInterrupt:
        click.echo("", err=True)
        say("interrupted: stopping")
        status = 0
    finally:
        if worker is not None:
            say("stopping the worker")
            worker.stop()
        if work.exists():
            if status == 0:  # its log and data: nothing is left behind by a demo that went well
                shutil.rmtree(work, ignore_errors=True)
            else:
                say(f"the worker's log is kept: {work / 'worker.log'}")
        if not keep_topics:
            try:
                deleted = run_interruptible(delete_topics(bootstrap, (f"{app_id}.", f"{app_id}-")))
                say(f"deleted {len(deleted)} demo topic(s)")
            except Exception as exc:  # cleanup must not hide the outcome
                say(f"could not delete the demo topics: {exc}")
        if started_broker:
            stop_broker(bootstrap)
    sys.exit(status)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
