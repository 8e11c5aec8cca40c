"""Pipeline benchmark: the loopwatch worker against a raw Kafka pass-through, on one broker.

Two processors, each run as its own process against the same local broker:

(a) pass-through -- an aiokafka consumer + producer that copies every record of
    the input topic to an output topic, no decoding, no state (the floor: what
    Kafka and aiokafka cost on this machine);
(b) worker -- one ``loopwatch worker`` subprocess (detection enabled, default
    thresholds, state in its changelog-backed table).

For each, on fresh topics:

* throughput at saturation: N events of bench.workload's synthetic fleet are
  pre-loaded into the input topic, then the processor is started; the figure is
  outputs / (last output - first output), i.e. start-up excluded. It is taken
  ``--repeat`` times per processor, in pairs, the order alternating (pass-through
  then worker, worker then pass-through, ...), each time a fresh process on fresh
  topics; per pair the worker/pass-through ratios, then their median;
* round-trip latency at a fixed offered load (default 1,000 events/s for 20 s):
  a producer sends fresh events keyed by run id; a consumer takes, per output,
  arrival time - send time (same clock). p50/p99/max are printed, with the
  achieved send rate and how many outputs arrived.

    deploy/kafka/kafka.sh start
    .venv/bin/python bench/pipeline.py                       # 3 pairs of 100,000 events, then 1,000/s for 20 s
    .venv/bin/python bench/pipeline.py --events 20000 --rate 500 --duration 10 --bootstrap 127.0.0.1:9092

Every topic is named ``bench.<random>...`` and deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgpack  # noqa: E402
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402

from bench.host import interpreter  # noqa: E402
from bench.options import config, positive  # noqa: E402
from bench.workload import generate  # noqa: E402

READY_TIMEOUT_S = 120.0
DRAIN_TIMEOUT_S = 600.0  # longest wait for the last output of a phase


# ----------------------------------------------------------------------------- workload

GENERATED_MAX = 50_000  # events generated at most; more are copies under other run ids (generating is slow)


def _events(count: int, seed: int, prefix: str) -> list[tuple[bytes, dict[str, Any]]]:
    """``count`` events of the synthetic fleet as (key, event); run ids prefixed so phases do not share runs.

    Past :data:`GENERATED_MAX` events the fleet is repeated, each copy's runs under other run ids
    (``<prefix><copy>.``): new runs to the worker, at a fraction of the generating time.
    """
    wanted = min(count, GENERATED_MAX)
    runs = max(50, wanted // 24 + 1)  # ~24 events per run on average
    events = generate(runs=runs, seed=seed)
    while len(events) < wanted:
        runs *= 2
        events = generate(runs=runs, seed=seed)
    events = events[:wanted]
    out = []
    for number in range(count):
        copy, event = divmod(number, wanted)[0], dict(events[number % wanted])
        run_prefix = f"{prefix}{copy}." if copy else prefix
        event["run_id"] = f"{run_prefix}{event['run_id']}"
        event.pop("event_id", None)
        event = {"event_id": f"{prefix}{number}", **event}  # first, like a verdict's: see _event_id
        out.append((event["run_id"].encode(), event))
    return out


def _event_id(value: bytes) -> str:
    """The event_id of an output record: the first entry of its msgpack map (not decoding the rest).

    Events are generated with event_id first and verdict records start with it,
    so the collector spends next to no CPU on the machine it measures.
    """
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(value)
    unpacker.read_map_header()
    if unpacker.unpack() != "event_id":
        raise ValueError("output record does not start with event_id")
    return unpacker.unpack()


# ----------------------------------------------------------------------------- pass-through process

async def _passthrough(bootstrap: str, source: str, sink: str) -> None:
    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", fetch_max_wait_ms=25, max_poll_records=2000)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, max_batch_size=1024 * 1024)
    await consumer.start()
    await producer.start()
    print("READY", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=100, max_records=2000)
            for records in batches.values():
                for record in records:
                    await producer.send(sink, value=record.value, key=record.key)
    finally:
        await producer.stop()
        await consumer.stop()


# ----------------------------------------------------------------------------- processors

class Processor:
    """A processor subprocess: ``start()`` returns once it is ready to consume."""

    name = ""

    def __init__(self, bootstrap: str, tag: str, partitions: int, workdir: Path, round_: int = 1) -> None:
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.workdir = workdir
        self.tag = tag
        self.round = round_
        self.input = f"bench.{tag}.{self.name}{round_}.in"
        self.output = f"bench.{tag}.{self.name}{round_}.out"
        self.proc: subprocess.Popen | None = None
        self.log = workdir / f"{self.name}{round_}.log"

    def prefixes(self) -> tuple[str, ...]:
        """Name prefixes of every topic this processor's run makes (deleted after it)."""
        return (f"bench.{self.tag}.{self.name}{self.round}.",)

    def command(self) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def ready(self, text: str) -> bool:
        raise NotImplementedError

    def topics(self) -> list[str]:
        return [self.input, self.output]

    def latency_buckets(self) -> dict[float, float] | None:
        """Cumulative counts of the processor's own verdict-latency histogram, if it has one."""
        return None

    def start(self) -> None:
        args, env = self.command()
        with open(self.log, "wb") as log:  # this run's log only: ready() reads it from the start
            self.proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
                                         start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.ready(self.log.read_text("utf-8", "replace")):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(self.log.read_text("utf-8", "replace").splitlines()[-30:])
                raise RuntimeError(f"{self.name} did not start (exit {self.proc.poll()}):\n{tail}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)



class PassThrough(Processor):
    name = "passthrough"

    def command(self) -> tuple[list[str], dict[str, str]]:
        return [sys.executable, str(Path(__file__).resolve()), "_passthrough", self.bootstrap, self.input,
                self.output], {}

    def ready(self, text: str) -> bool:
        return "READY" in text


class Worker(Processor):
    name = "worker"

    def __init__(self, *args: Any, config: str | None = None) -> None:
        super().__init__(*args)
        self.app_id = f"bench-{self.tag}-r{self.round}"
        self.config = config
        self.metrics_port = _free_port()

    def latency_buckets(self) -> dict[float, float] | None:
        """``loopwatch_verdict_latency_seconds`` buckets (upper bound s -> cumulative count) from /metrics."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        buckets = {}
        for line in text.splitlines():
            if line.startswith("loopwatch_verdict_latency_seconds_bucket{"):
                bound = line.split('le="', 1)[1].split('"', 1)[0]
                buckets[float(bound)] = float(line.rsplit(" ", 1)[1])
        return buckets

    def topics(self) -> list[str]:
        return [self.input, self.output, f"{self.input}.loop-events", f"{self.input}.dead-letters"]

    def prefixes(self) -> tuple[str, ...]:
        return (*super().prefixes(), f"{self.app_id}-")

    def command(self) -> tuple[list[str], dict[str, str]]:
        config = self.config or str(self.workdir / "openclaw.json")
        if not self.config:
            Path(config).write_text("{tools: {loopDetection: {enabled: true}}}\n")
        # Environment, not flags: faust's import scans argv for "--loop*" (see loopwatch demo).
        env = {
            "LOOPWATCH_BROKER": f"kafka://{self.bootstrap}", "LOOPWATCH_APP_ID": self.app_id,
            "LOOPWATCH_INPUT_TOPICS": self.input, "LOOPWATCH_VERDICTS_TOPIC": self.output,
            "LOOPWATCH_LOOP_EVENTS_TOPIC": f"{self.input}.loop-events",
            "LOOPWATCH_DEAD_LETTERS_TOPIC": f"{self.input}.dead-letters",
            "LOOPWATCH_PARTITIONS": str(self.partitions), "LOOPWATCH_STANDBY_REPLICAS": "0",
            "LOOPWATCH_CONFIG": config, "LOOPWATCH_METRICS_PORT": str(self.metrics_port),
            "LOOPWATCH_METRICS_ADDR": "127.0.0.1",
            "LOOPWATCH_DATA_DIR": str(self.workdir / "worker-data"), "LOOPWATCH_LOG_LEVEL": "info",  # the Ready line is info
        }
        return [sys.executable, "-c", "from streams.cli import main; main()", "worker"], env

    def ready(self, text: str) -> bool:
        return "[^Worker]: Ready" in text


# ----------------------------------------------------------------------------- measuring

async def _admin(bootstrap: str) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    await admin.start()
    return admin


async def _preload(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    """Send ``(key, value)`` records to ``topic``; the seconds it took."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, max_batch_size=512 * 1024)
    await producer.start()
    t0 = time.monotonic()
    try:
        for key, value in records:
            await producer.send(topic, value=value, key=key)
        await producer.flush()
    finally:
        await producer.stop()
    return time.monotonic() - t0


class Collector:
    """Consumes an output topic from the start; records arrival times per event_id."""

    def __init__(self, bootstrap: str, topic: str, processor: Processor) -> None:
        self.consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                         auto_offset_reset="earliest", fetch_max_wait_ms=10, max_poll_records=5000)
        self.processor = processor
        self.arrivals: dict[str, float] = {}
        self.first: float | None = None
        self.last: float | None = None
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=100)
            now = time.time()
            for records in batches.values():
                for record in records:
                    event_id = _event_id(record.value)
                    if event_id not in self.arrivals:
                        self.arrivals[event_id] = now
                        if self.first is None:
                            self.first = time.monotonic()
                        self.last = time.monotonic()

    async def wait_for(self, ids: set[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ids <= self.arrivals.keys():
            if time.monotonic() > deadline:
                break
            if self._task is not None and self._task.done():
                self._task.result()
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.consumer.stop()


async def _paced(bootstrap: str, topic: str, events: list[tuple[bytes, dict[str, Any]]], rate: float
                 ) -> tuple[dict[str, float], float]:
    """Send at ``rate`` events/s; returns send times (epoch s) by event_id and the elapsed seconds."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await producer.start()
    sent: dict[str, float] = {}
    encoded = [(key, event["event_id"], event) for key, event in events]
    try:
        t0 = time.monotonic()
        for index, (key, event_id, event) in enumerate(encoded):
            due = t0 + index / rate
            delay = due - time.monotonic()
            if delay > 0.001:
                await asyncio.sleep(delay)
            now = time.time()
            event["ts"] = int(now * 1000)
            sent[event_id] = now
            await producer.send(topic, value=msgpack.packb(event, use_bin_type=True), key=key)
        await producer.flush()
        elapsed = time.monotonic() - t0
    finally:
        await producer.stop()
    return sent, elapsed


def _cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of process ``pid`` so far, in seconds (Linux /proc; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


async def _settled(pid: int | None, idle_share: float = 0.05, window_s: float = 0.5, limit_s: float = 30.0) -> float:
    """Wait until process ``pid`` uses under ``idle_share`` of a core over ``window_s`` (at most ``limit_s``);
    return the seconds waited. After the throughput phase the worker still writes the checkpoint of every state
    that phase changed, work the pass-through does not have: the paced phase measures steady state, not that."""
    waited = 0.0
    before = _cpu_seconds(pid)
    while before is not None and waited < limit_s:
        await asyncio.sleep(window_s)
        waited += window_s
        after = _cpu_seconds(pid)
        if after is None or after - before < idle_share * window_s:
            break
        before = after
    return waited


def _cpu_us_per_event(before: float | None, after: float | None, events: int) -> float | None:
    return None if before is None or after is None or not events else (after - before) / events * 1e6


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run_one(processor: Processor, bootstrap: str, throughput_records: list[tuple[str, bytes, bytes]],
                  latency_events: list | None, rate: float, idle_s: float = 0.0) -> dict[str, Any]:
    """One processor's run on fresh topics: the throughput phase over ``throughput_records``
    (``(event_id, key, value)``), then, unless ``latency_events`` is None, the paced phase; its figures."""
    admin = await _admin(bootstrap)
    try:
        await admin.create_topics([NewTopic(t, processor.partitions, 1) for t in processor.topics()],
                                  timeout_ms=30_000)
    finally:
        await admin.close()
    result: dict[str, Any] = {"name": processor.name, "round": processor.round, "partitions": processor.partitions}
    preload_s = await _preload(bootstrap, processor.input, [(key, value) for _, key, value in throughput_records])
    result["preload_s"] = preload_s
    collector = Collector(bootstrap, processor.output, processor)
    await collector.start()
    try:
        t0 = time.monotonic()
        await asyncio.to_thread(processor.start)
        result["startup_s"] = time.monotonic() - t0
        pid = processor.proc.pid if processor.proc else None
        cpu_start = _cpu_seconds(pid)
        ids = {event_id for event_id, _, _ in throughput_records}
        await collector.wait_for(ids, DRAIN_TIMEOUT_S)
        cpu_drained = _cpu_seconds(pid)
        got = len(ids & collector.arrivals.keys())
        span = (collector.last or 0) - (collector.first or 0)
        result["throughput_outputs"] = got
        result["throughput_eps"] = (got - 1) / span if span > 0 else float("nan")
        result["throughput_wall_s"] = (collector.last or time.monotonic()) - t0
        # CPU time of the processor per event (start-up excluded; includes its idle wait for the last output, a few ms)
        result["cpu_us_per_event"] = _cpu_us_per_event(cpu_start, cpu_drained, len(throughput_records))
        if latency_events is None:
            return result

        result["settle_s"] = await _settled(pid)
        before = processor.latency_buckets()
        cpu_paced = _cpu_seconds(pid)
        sent, elapsed = await _paced(bootstrap, processor.input, latency_events, rate)
        await collector.wait_for(set(sent), DRAIN_TIMEOUT_S)
        cpu_end = _cpu_seconds(pid)
        after = processor.latency_buckets()
        if idle_s and cpu_end is not None:  # what the processor costs with nothing to do (its partitions owned)
            await asyncio.sleep(1.0)  # the last fetches and (worker) checkpoint of the paced phase
            cpu_idle = _cpu_seconds(pid)
            await asyncio.sleep(idle_s)
            result["idle_cpu_ms_per_s"] = ((_cpu_seconds(pid) or 0.0) - (cpu_idle or 0.0)) / idle_s * 1000.0
        if cpu_paced is not None and cpu_end is not None:
            result["paced_cpu_ms_per_s"] = (cpu_end - cpu_paced) / elapsed * 1000.0
        result["cpu_us_per_event_paced"] = _cpu_us_per_event(cpu_paced, cpu_end, len(latency_events))
        if before is not None and after is not None:
            # the processor's own view: event ts -> verdict handed to its producer
            counts = {bound: after[bound] - before.get(bound, 0.0) for bound in after}
            total = counts.get(float("inf")) or 1.0
            result["inside_share"] = {f"<={bound * 1000:g}ms": round(count / total, 4)
                                      for bound, count in sorted(counts.items()) if 0.004 < bound <= 0.05}
        latencies = [(collector.arrivals[i] - t) * 1000.0 for i, t in sent.items() if i in collector.arrivals]
        result.update(
            offered=len(sent) / elapsed, latency_sent=len(sent), latency_received=len(latencies),
            p50_ms=statistics.median(latencies) if latencies else float("nan"),
            p99_ms=_quantile(latencies, 0.99) if latencies else float("nan"),
            max_ms=max(latencies) if latencies else float("nan"),
        )
    finally:
        await collector.stop()
        await asyncio.to_thread(processor.stop)
        await _cleanup(bootstrap, processor.prefixes())  # a run's 300 MB of records off the broker's disk and cache
    return result


async def _cleanup(bootstrap: str, prefixes: tuple[str, ...]) -> int:
    """Delete every topic whose name starts with one of ``prefixes``; how many."""
    admin = await _admin(bootstrap)
    try:
        names = [t for t in await admin.list_topics() if t.startswith(prefixes)]
        if names:
            await admin.delete_topics(names, timeout_ms=30_000)
        return len(names)
    finally:
        await admin.close()


def _spread(values: list[float], fmt: str, unit: str = "") -> str:
    """``median (min-max)`` of ``values`` in ``fmt``, each followed by ``unit``; the median alone for one value."""
    if len(values) == 1:
        return format(values[0], fmt) + unit
    return (f"{format(statistics.median(values), fmt)}{unit} "
            f"({format(min(values), fmt)}{unit}-{format(max(values), fmt)}{unit})")


def _pairs(results: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pass-through, worker) results of each round that ran both."""
    by_round: dict[int, dict[str, dict[str, Any]]] = {}
    for r in results:
        by_round.setdefault(r["round"], {})[r["name"]] = r
    return [(runs["passthrough"], runs["worker"]) for _, runs in sorted(by_round.items())
            if "passthrough" in runs and "worker" in runs]


def _report(results: list[dict[str, Any]], events: int, rate: float, duration: float) -> dict[str, Any]:
    """Print the figures; returns the pairs' ratios (empty without both processors)."""
    rounds = max(r["round"] for r in results)
    print()
    print(f"throughput at saturation: {events:,} events pre-loaded, {rounds} run(s) per processor; CPU time per event "
          "(start-up excluded)")
    print(f"{'round':<6} {'processor':<12} {'events/s':>10} {'CPU µs/event':>13} {'startup s':>10} {'wall s':>7}")
    for r in sorted(results, key=lambda r: (r["round"], r["order"])):
        cpu = f"{r['cpu_us_per_event']:,.1f}" if r.get("cpu_us_per_event") is not None else "-"
        print(f"{r['round']:<6} {r['name']:<12} {r['throughput_eps']:>10,.0f} {cpu:>13} {r['startup_s']:>10.1f} "
              f"{r['throughput_wall_s']:>7.1f}")
        if r["throughput_outputs"] != events:
            print(f"  ! {r['name']}: only {r['throughput_outputs']} of {events} outputs in the throughput phase")
    names = sorted({r["name"] for r in results}, reverse=True)
    for name in names:
        eps = [r["throughput_eps"] for r in results if r["name"] == name]
        cpu_values = [r["cpu_us_per_event"] for r in results if r["name"] == name and r.get("cpu_us_per_event")]
        cpu = f", CPU {_spread(cpu_values, ',.1f')} µs per event" if cpu_values else ""
        print(f"  {name}: {_spread(eps, ',.0f')} events/s{cpu}")

    print()
    print(f"latency at {rate:,.0f} ev/s offered for {duration:g} s (round {rounds})")
    print(f"{'processor':<13} {'offered':>8} {'received':>13} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
    paced = [r for r in results if "p99_ms" in r]
    for r in paced:
        received = f"{r['latency_received']}/{r['latency_sent']}"
        print(f"{r['name']:<13} {r['offered']:>8,.0f} {received:>13} {r['p50_ms']:>9.1f} {r['p99_ms']:>9.1f} "
              f"{r['max_ms']:>9.1f}")
        if r["offered"] > r["throughput_eps"]:
            print(f"  ! {r['name']}: offered {r['offered']:,.0f}/s is above its saturation throughput "
                  f"{r['throughput_eps']:,.0f}/s: its latency is queueing over the phase (try a lower --rate)")
        if r.get("settle_s", 0) > 0.5:  # one window: idle at the first look
            print(f"  {r['name']}: busy {r['settle_s']:.1f} s after the throughput phase; the paced phase began once "
                  "it was idle")
        if r.get("cpu_us_per_event_paced") is not None:
            print(f"  {r['name']}: CPU time per event {r['cpu_us_per_event_paced']:,.0f} µs at {rate:,.0f} ev/s")
        if "paced_cpu_ms_per_s" in r:
            idle = r.get("idle_cpu_ms_per_s")
            idle_text = (f"; idle {idle:,.1f} ms per s ({idle / r['partitions']:,.2f} per partition)"
                         if idle is not None else "")
            print(f"  {r['name']}: CPU {r['paced_cpu_ms_per_s']:,.0f} ms per s at {r['offered']:,.0f} ev/s on "
                  f"{r['partitions']} partitions ({r['paced_cpu_ms_per_s'] / r['partitions']:,.2f} per partition)"
                  f"{idle_text}")
        if "inside_share" in r:
            shares = ", ".join(f"{bound} {share:.1%}" for bound, share in r["inside_share"].items())
            print(f"  {r['name']}: event ts -> verdict handed to its producer (its loopwatch_verdict_latency_seconds):"
                  f" {shares}")

    pairs = _pairs(results)
    if not pairs:
        return {}
    throughput = [w["throughput_eps"] / p["throughput_eps"] for p, w in pairs]
    cpu = [w["cpu_us_per_event"] / p["cpu_us_per_event"] for p, w in pairs
           if w.get("cpu_us_per_event") and p.get("cpu_us_per_event")]
    print()
    print("worker / pass-through per round: throughput " + ", ".join(f"{ratio:.2f}x" for ratio in throughput)
          + ("; CPU per event " + ", ".join(f"{ratio:.2f}x" for ratio in cpu) if cpu else ""))
    ratios: dict[str, Any] = {"throughput": throughput, "cpu_per_event": cpu}
    by = {r["name"]: r for r in paced}
    latency = ""
    if "worker" in by and "passthrough" in by:
        w, p = by["worker"], by["passthrough"]
        ratios.update(p50=w["p50_ms"] / p["p50_ms"], p99=w["p99_ms"] / p["p99_ms"])
        latency = (f", p50 latency {ratios['p50']:.1f}x, p99 latency {ratios['p99']:.1f}x (target <= 2x)")
        if w.get("cpu_us_per_event_paced") and p.get("cpu_us_per_event_paced"):
            latency += f", CPU per event paced {w['cpu_us_per_event_paced'] / p['cpu_us_per_event_paced']:.2f}x"
    cpu_text = f", CPU per event at saturation {_spread(cpu, '.2f', 'x')}" if cpu else ""
    print(f"worker / pass-through: throughput {_spread(throughput, '.2f', 'x')}, median of {len(throughput)} pair(s) "
          f"(target >= 0.6x){cpu_text}{latency}")
    return ratios


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_passthrough":
        asyncio.run(_passthrough(*sys.argv[2:5]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default=os.environ.get("LOOPWATCH_KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--events", type=positive(int), default=100_000,
                        help="events pre-loaded for each throughput run (100,000)")
    parser.add_argument("--repeat", type=positive(int), default=3,
                        help="throughput runs per processor, in pairs of alternating order (3); the latency phase "
                             "follows the last")
    parser.add_argument("--rate", type=positive(float), default=1000.0, help="offered load of the latency phase, events/s")
    parser.add_argument("--duration", type=positive(float), default=20.0, help="seconds of the latency phase (20)")
    parser.add_argument("--partitions", type=positive(int), default=4, help="partitions of every topic (4, the worker's default)")
    parser.add_argument("--config", help="openclaw.json for the worker (default: enabled: true, default thresholds)")
    parser.add_argument("--idle", type=float, default=0.0, metavar="S",
                        help="after the latency phase, measure each processor's CPU over S s without traffic (0: not)")
    parser.add_argument("--only", choices=["passthrough", "worker"], help="run one processor only")
    parser.add_argument("--json", dest="json_out", help="also write the figures to this JSON file")
    parser.add_argument("--logs", help="keep the processors' logs (passthrough1.log, worker1.log, ...) in this directory")
    options = parser.parse_args()
    config(options.config)  # a bad file stops here, not in the worker after the workload is built

    tag = uuid.uuid4().hex[:8]
    t0 = time.monotonic()
    throughput_events = _events(options.events, seed=7, prefix="t-")
    throughput_records = [(event["event_id"], key, msgpack.packb(event, use_bin_type=True))
                          for key, event in throughput_events]
    del throughput_events
    latency_events = _events(int(options.rate * options.duration), seed=11, prefix="l-")
    sizes = [len(value) for _, _, value in throughput_records[:2000]]
    print(f"workload: {len(throughput_records):,} events pre-loaded for throughput ({options.repeat} run(s) per "
          f"processor), {len(latency_events):,} paced at {options.rate:,.0f}/s for latency; mean record "
          f"{statistics.mean(sizes) / 1024:.1f} KB msgpack; {options.partitions} partitions; broker "
          f"{options.bootstrap}; topics bench.{tag}.* (generated in {time.monotonic() - t0:.1f} s)", flush=True)
    print(f"interpreter: {interpreter()} (the processors run on it too)", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="loopwatch-bench-") as workdir:
        if options.logs:
            Path(options.logs).mkdir(parents=True, exist_ok=True)
            workdir = options.logs
        kinds = [PassThrough, Worker] if options.only is None else [
            {"passthrough": PassThrough, "worker": Worker}[options.only]]
        try:
            for round_ in range(1, options.repeat + 1):
                last = round_ == options.repeat
                # alternate the order, so neither processor always runs first (the machine's speed drifts);
                # the last round keeps pass-through then worker, as the latency phase always ran
                order = kinds if (options.repeat - round_) % 2 == 0 else kinds[::-1]
                for position, kind in enumerate(order):
                    args = (options.bootstrap, tag, options.partitions, Path(workdir), round_)
                    processor = kind(*args, config=options.config) if kind is Worker else kind(*args)
                    phases = f", then {options.duration:g} s paced" if last else ""
                    print(f"round {round_}, {processor.name}: pre-loading, starting, draining{phases} ...",
                          flush=True)
                    # fresh copies: the latency phase stamps ts into the events
                    paced = [(k, dict(e)) for k, e in latency_events] if last else None
                    result = asyncio.run(run_one(processor, options.bootstrap, throughput_records, paced,
                                                 options.rate, options.idle))
                    result["order"] = position
                    results.append(result)
                    print(f"  {json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()})}",
                          flush=True)
        finally:
            deleted = asyncio.run(_cleanup(options.bootstrap, (f"bench.{tag}.", f"bench-{tag}-")))
            if deleted:
                print(f"deleted {deleted} bench topic(s) left over", flush=True)
    ratios = _report(results, options.events, options.rate, options.duration)
    if options.json_out:
        Path(options.json_out).write_text(json.dumps({"runs": results, "ratios": ratios}, indent=2))


if __name__ == "__main__":
    main()
