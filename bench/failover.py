"""Failover benchmark: kill -9 one of two workers under load; how long its partitions go without verdicts.

Two ``loopwatch worker`` processes share one app id (one consumer group) and
the input topic's partitions. A producer sends fresh events at a fixed rate to
every partition; a consumer notes when each verdict arrives. Then, ``--kills``
times: one worker (alternately) gets SIGKILL, and once the survivor serves
every partition again the killed one is restarted and the group left to settle
before the next kill.

Per kill, from the verdicts' arrival times:

* stall: for each partition the killed worker owned, kill -> the first verdict
  of an event sent after the kill (the survivor has taken the partition over);
  the figure is the slowest of them. A partition counts as the killed worker's
  when none of its events sent after the kill got a verdict within 2 s (the
  session timeout is at least 6 s, so the survivor's own partitions keep
  flowing that long);
* unaffected pause: for the survivor's own partitions, the longest gap
  between two verdicts from the kill until 5 s after the stall (the rebalance
  that hands over the killed worker's partitions pauses them too);
* where the time goes, from the survivor's log: kill -> the group's rebalance
  starts (the session timeout), -> the survivor has joined the new generation,
  -> it reads the input partitions (from their committed offsets; those whose
  states its bulk read caught up at once), -> Faust's table recovery
  completed (it no longer holds the input back), -> the first verdict.

Also the restarted worker's start-up: process start -> its first log line
(Python imports) -> ready, and the longest pause of any partition while it
rejoins (the rebalance, and the recovery of the partitions it takes back); per
kill, the changelog records the survivor's recovery read, from its log: those
of its bulk read (streams/worker/restore.py, "read N changelog records") and
those Faust's recovery read after it (each active changelog partition's
highwater less the offset it started reading at).

``--preload N`` first sends N events as fast as the workers take them (the
synthetic fleet of bench/workload.py, whose fleet-wide failures feed the fleet
view, on by default) so that the kills happen after that much uptime; the
records in the state and fleet-windows changelogs are printed before the kills
and at the end.

The median of each figure over the kills is printed beside its target.

    .venv/bin/python bench/failover.py                         # 5 kills, 4 partitions, 200 events/s
    .venv/bin/python bench/failover.py --kills 7 --rate 400 --standby-replicas 0
    .venv/bin/python bench/failover.py --preload 150000     # after 150k events of uptime

Every topic is named ``bench.<random>...`` and deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgpack  # noqa: E402
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import NewTopic  # noqa: E402

from bench.pipeline import Worker, _admin, _cleanup, _event_id, _events  # noqa: E402

STALL_TARGET_S = 8.0
PAUSE_TARGET_S = 1.0
_OWNED_AFTER_S = 2.0  # a partition without a verdict this long after the kill was the killed worker's
_SETTLE_S = 8.0  # after a restart: the rejoin's rebalance, then steady flow, before the next kill
_LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


class GroupWorker(Worker):
    """One of the two workers: shared app id and topics, its own data directory and metrics port."""

    def __init__(self, bootstrap: str, tag: str, partitions: int, workdir: Path, name: str,
                 overrides: dict[str, str]) -> None:
        self.name = name
        super().__init__(bootstrap, tag, partitions, workdir)
        self.input = f"bench.{tag}.failover.in"
        self.output = f"bench.{tag}.failover.out"
        self.app_id = f"bench-{tag}-failover"
        self.overrides = overrides
        self.started_at = 0.0

    def command(self) -> tuple[list[str], dict[str, str]]:
        args, env = super().command()
        env["LOOPWATCH_DATA_DIR"] = str(self.workdir / f"data-{self.name}")
        env.pop("LOOPWATCH_STANDBY_REPLICAS")  # the worker's default, unless given
        env.update(self.overrides)
        return args, env

    def start(self) -> None:
        self.started_at = time.time()
        if self.log.exists():  # each start writes a fresh log: keep the earlier ones, in order
            with open(self.workdir / f"{self.name}.earlier.log", "ab") as earlier:
                earlier.write(self.log.read_bytes())
        try:
            super().start()
        except RuntimeError as exc:  # the log goes with the temporary folder: keep what says why
            lines = self.log.read_text("utf-8", "replace").splitlines()
            why = [line for line in lines if re.search(r"ERROR|CRITICAL|Error|Exception|raise ", line)][:40]
            raise RuntimeError(f"{exc}\n--- error lines of its log:\n" + "\n".join(why)) from None

    def kill(self) -> float:
        assert self.proc is not None
        at = time.time()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        return at

    def log_lines(self, after: float) -> list[tuple[float, str]]:
        """(epoch s, line) of every log line from the first timestamped one after ``after`` (a line without
        a timestamp, as in Faust's tables, takes the one before it)."""
        out, stamp = [], None
        for line in self.log.read_text("utf-8", "replace").splitlines():
            match = _LOG_TIME.match(line)
            if match:
                stamp = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if stamp is not None and stamp >= after:
                out.append((stamp, line))
        return out

    def log_times(self, after: float) -> list[tuple[float, str]]:
        """(epoch s, line) of each timestamped log line after ``after``."""
        out = []
        for line in self.log.read_text("utf-8", "replace").splitlines():
            match = _LOG_TIME.match(line)
            if match:
                stamp = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                if stamp >= after:
                    out.append((stamp, line))
        return out


class Traffic:
    """Paced events to every partition from a thread; the arrival time of every verdict."""

    def __init__(self, bootstrap: str, source: str, sink: str, rate: float) -> None:
        self.bootstrap, self.source, self.sink, self.rate = bootstrap, source, sink, rate
        self.sent: dict[str, tuple[int, float]] = {}  # event_id -> (partition, send time)
        self.arrived: list[tuple[float, str]] = []  # (arrival time, event_id)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._threads = [threading.Thread(target=lambda: asyncio.run(self._consume()), daemon=True),
                         threading.Thread(target=lambda: asyncio.run(self._produce()), daemon=True)]

    def start(self) -> None:
        self._threads[0].start()
        self._ready.wait(30)
        self._threads[1].start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    async def _produce(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks=1, linger_ms=0)
        await producer.start()
        try:
            t0, index, chunk = time.monotonic(), 0, 0
            while not self._stop.is_set():
                for key, event in _events(4000, seed=chunk, prefix=f"c{chunk}-"):
                    if self._stop.is_set():
                        break
                    delay = t0 + index / self.rate - time.monotonic()
                    if delay > 0.001:
                        await asyncio.sleep(delay)
                    now = time.time()
                    event["ts"] = int(now * 1000)
                    future = await producer.send(self.source, msgpack.packb(event, use_bin_type=True), key=key)
                    future.add_done_callback(
                        lambda f, e=event["event_id"], t=now: f.exception() or self.sent.__setitem__(
                            e, (f.result().partition, t)))
                    index += 1
                chunk += 1
            await producer.flush()
        finally:
            await producer.stop()

    async def _consume(self) -> None:
        consumer = AIOKafkaConsumer(self.sink, bootstrap_servers=self.bootstrap, auto_offset_reset="latest",
                                    enable_auto_commit=False, group_id=None)
        await consumer.start()
        try:
            while not consumer.assignment():
                await asyncio.sleep(0.05)
            for tp in consumer.assignment():
                await consumer.position(tp)  # pins "latest" before the first event is sent
            self._ready.set()
            while not self._stop.is_set():
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    now = time.time()
                    self.arrived.extend((now, _event_id(r.value)) for r in records)
        finally:
            await consumer.stop()

    def arrivals(self, after_sent: float = 0.0) -> dict[int, list[float]]:
        """Arrival times per input partition of the verdicts of events sent after ``after_sent``."""
        by_partition: dict[int, list[float]] = {}
        for arrived, event_id in list(self.arrived):
            sent = self.sent.get(event_id)
            if sent is not None and sent[1] >= after_sent:
                by_partition.setdefault(sent[0], []).append(arrived)
        return by_partition


def _events_applied(worker: GroupWorker) -> float:
    """The worker's ``loopwatch_events_total`` (0 while its endpoint is not up)."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port}/metrics", timeout=5).read().decode()
    except OSError:
        return 0.0
    return sum(float(m) for m in re.findall(r"^loopwatch_events_total\{[^}]*\} (\S+)$", text, re.M))


def _wait_ready(workers: list[GroupWorker], timeout: float = 120.0) -> None:
    """Wait until every worker's log says Ready."""
    deadline = time.monotonic() + timeout
    while not all(w.log.exists() and w.ready(w.log.read_text("utf-8", "replace")) for w in workers):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the workers are not ready after {timeout:.0f} s")
        time.sleep(0.5)


def _wait_serving(workers: list[GroupWorker], timeout: float = 60.0) -> None:
    """Wait until every worker applies events (the group has settled after a restart)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = [_events_applied(w) for w in workers]
        time.sleep(1.0)
        if all(_events_applied(w) > b for w, b in zip(workers, before)):
            return
    raise TimeoutError(f"the workers do not all apply events after {timeout:.0f} s")


_TABLE_ROW = re.compile(r"^\|\s*(\S+)\s*\|\s*(\d+)\s*\|\s*(-?\d+)\s*\|")


def _log_table(lines: list[tuple[float, str]], title: str, after: float) -> dict[tuple[str, int], int]:
    """The first Faust recovery table titled ``title`` ("Highwater - Active", "Reading Starts At - Active")
    logged after ``after``: {(topic, partition): value}."""
    text = "\n".join(line for _, line in lines)
    rows: dict[tuple[str, int], int] = {}
    at = next((i for i, (stamp, line) in enumerate(lines) if stamp >= after and title in line), None)
    if at is None:
        return rows
    topic = ""
    for raw in text.splitlines()[at:]:
        if raw.startswith("+") and rows:
            break
        match = _TABLE_ROW.match(raw)
        if match:
            topic = topic if match.group(1) == "\u3003" else match.group(1)
            rows[(topic, int(match.group(2)))] = int(match.group(3))
    return rows


def _restored(worker: "GroupWorker", after: float) -> int | None:
    """Changelog records the worker's first recovery after ``after`` read (highwater less start, per partition)."""
    lines = worker.log_lines(after)
    highwaters = _log_table(lines, "Highwater - Active", after)
    starts = _log_table(lines, "Reading Starts At - Active", after)
    if not highwaters:
        return None
    return sum(max(0, hw - starts.get(key, -1)) for key, hw in highwaters.items())


async def _changelog_records(bootstrap: str, app_id: str) -> dict[str, int]:
    """Records (end offset less log start, all partitions) of the app's state and fleet-windows changelogs."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    await consumer.start()
    try:
        out = {}
        for name in ("states", "fleet-windows"):
            topic = f"{app_id}-{name}-changelog"
            partitions = consumer.partitions_for_topic(topic) or set()
            if not partitions:
                await consumer._client.force_metadata_update()
                partitions = consumer.partitions_for_topic(topic) or set()
            tps = [TopicPartition(topic, p) for p in sorted(partitions)]
            if not tps:
                continue
            ends, starts = await consumer.end_offsets(tps), await consumer.beginning_offsets(tps)
            out[name] = sum(ends[tp] - starts[tp] for tp in tps)
        return out
    finally:
        await consumer.stop()


def _preload(bootstrap: str, topic: str, count: int, workers: list["GroupWorker"], timeout: float) -> float:
    """Send ``count`` events (a synthetic fleet) and wait until the workers applied them; seconds it took."""
    started = time.monotonic()

    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=20, max_batch_size=262_144)
        await producer.start()
        try:
            sent, chunk = 0, 0
            while sent < count:
                batch = _events(min(20_000, count - sent), seed=1000 + chunk, prefix=f"p{chunk}-")
                for key, event in batch:
                    event["ts"] = int(time.time() * 1000)
                    await producer.send(topic, msgpack.packb(event, use_bin_type=True), key=key)
                sent += len(batch)
                chunk += 1
            await producer.flush()
        finally:
            await producer.stop()

    before = sum(_events_applied(w) for w in workers)
    asyncio.run(send())
    deadline = time.monotonic() + timeout
    while sum(_events_applied(w) for w in workers) < before + count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the preloaded events were not applied in {timeout:.0f} s")
        time.sleep(1.0)
    return time.monotonic() - started


_BULK_READ = re.compile(r"loopwatch: read (\d+) changelog records of \d+ partition\(s\) in ([\d.]+) s")
_MORE_LIKE_IT = re.compile(r"\(and (\d+) more like it in the last")


def _buffer_full(workdir: Path) -> tuple[int, int]:
    """Faust's "producer buffer full" warnings in every log of the workers (each start's): (warnings, lines
    logged); the log filter (streams.wire.logs) lets one line through per 10 s and counts the rest in it."""
    warnings = lines = 0
    for log in workdir.glob("*.log"):
        for line in log.read_text("utf-8", "replace").splitlines():
            if "producer buffer full" in line:
                more = _MORE_LIKE_IT.search(line)
                lines += 1
                warnings += 1 + (int(more.group(1)) if more else 0)
    return warnings, lines


def _longest_gap(traffic: Traffic, start: float, end: float) -> float:
    """The longest time any partition went without a verdict between ``start`` and ``end`` (epoch s)."""
    longest = 0.0
    for times in traffic.arrivals().values():
        points = [start, *sorted(t for t in times if start <= t <= end), end]
        longest = max(longest, max(b - a for a, b in zip(points, points[1:])))
    return longest


def _first_after(lines: list[tuple[float, str]], needle: str, after: float) -> float | None:
    return next((stamp for stamp, line in lines if stamp >= after and needle in line), None)


def measure(traffic: Traffic, killed_at: float, survivor: GroupWorker, partitions: int,
            timeout: float) -> dict[str, Any]:
    """Wait until every partition has a verdict of an event sent after the kill; the kill's figures."""
    deadline = time.time() + timeout
    while True:
        fresh = traffic.arrivals(after_sent=killed_at)
        if len(fresh) == partitions and all(fresh.values()):
            break
        if time.time() > deadline:
            raise TimeoutError(f"partitions {sorted(set(range(partitions)) - set(fresh))} got no verdict "
                               f"{timeout:.0f} s after the kill")
        time.sleep(0.2)
    first = {p: min(times) - killed_at for p, times in fresh.items()}
    owned = sorted(p for p, delay in first.items() if delay > _OWNED_AFTER_S)
    stall = max(first[p] for p in owned) if owned else max(first.values())
    time.sleep(5.0)  # the window for the survivor's own partitions' pause
    window_end = killed_at + stall + 5.0
    everything = traffic.arrivals()
    pause, pause_at = 0.0, (0.0, 0.0)
    for p in set(range(partitions)) - set(owned):
        times = sorted(t for t in everything.get(p, []) if killed_at <= t <= window_end)
        points = [killed_at, *times, window_end]
        gap, at = max((b - a, a) for a, b in zip(points, points[1:]))
        if gap > pause:
            pause, pause_at = gap, (at - killed_at, at + gap - killed_at)
    lines = survivor.log_times(killed_at)
    rebalance = _first_after(lines, "Revoking previously assigned partitions", killed_at)
    joined = _first_after(lines, "Joined group", rebalance or killed_at)
    recovered = _first_after(lines, "Recovery complete", joined or killed_at)
    reading = _first_after(lines, "input partition(s) from their committed offsets", joined or killed_at)
    phases = {"rebalance starts": rebalance, "joined": joined, "reads input": reading, "recovered": recovered}
    bulk = [(int(m.group(1)), float(m.group(2))) for stamp, line in lines
            if stamp <= (recovered or float("inf")) and (m := _BULK_READ.search(line))]
    faust = _restored(survivor, killed_at)
    restored = None if faust is None and not bulk else (faust or 0) + sum(n for n, _ in bulk)
    return {"stall": stall, "owned": owned, "pause": pause, "pause_at": pause_at, "restored": restored,
            "bulk": sum(n for n, _ in bulk), "bulk_s": sum(t for _, t in bulk),
            **{name: (at - killed_at if at is not None else None) for name, at in phases.items()}}


def _startup(worker: GroupWorker) -> tuple[float | None, float | None]:
    """The worker's last start: process start -> first log line, -> ready."""
    lines = worker.log_times(worker.started_at - 1.0)
    if not lines:
        return None, None
    ready = _first_after(lines, "[^Worker]: Ready", worker.started_at - 1.0)
    return lines[0][0] - worker.started_at, (ready - worker.started_at) if ready else None


def _median(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _fmt(value: float | None) -> str:
    return f"{value:6.2f}" if value is not None else "     -"


async def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = await _admin(bootstrap)
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=10_000)
    finally:
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--kills", type=int, default=5, help="kills to take the median of (default 5)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=float, default=200.0, help="events per second, all partitions (default 200)")
    parser.add_argument("--timeout", type=float, default=90.0, help="longest wait for a failover, s")
    parser.add_argument("--preload", type=int, default=0,
                        help="events sent (as fast as the workers take them) before the kills (default 0)")
    parser.add_argument("--logs", type=Path, help="copy the workers' logs (every start's) into this folder at the end")
    for name in ("session-timeout-s", "heartbeat-interval-s", "rebalance-timeout-s", "standby-replicas", "store"):
        parser.add_argument(f"--{name}", help="worker setting (default: the worker's own)")
    args = parser.parse_args()
    overrides = {f"LOOPWATCH_{name.upper()}": str(value) for name, value in vars(args).items()
                 if name in {"session_timeout_s", "heartbeat_interval_s", "rebalance_timeout_s", "standby_replicas",
                             "store"} and value is not None}
    tag = uuid.uuid4().hex[:8]
    results, startups, rejoins = [], [], []
    with tempfile.TemporaryDirectory(prefix="lw-failover-") as tmp:
        workdir = Path(tmp)
        workers = [GroupWorker(args.bootstrap, tag, args.partitions, workdir, name, overrides) for name in "ab"]
        asyncio.run(_create(args.bootstrap, workers[0].input, args.partitions))
        traffic = Traffic(args.bootstrap, workers[0].input, workers[0].output, args.rate)
        try:
            for worker in workers:
                worker.start()
            if args.preload:
                _wait_ready(workers)
                took = _preload(args.bootstrap, workers[0].input, args.preload, workers, max(600.0, args.preload / 100))
                sizes = asyncio.run(_changelog_records(args.bootstrap, workers[0].app_id))
                print(f"preload: {args.preload} events applied in {took:.0f} s; changelog records: {sizes}", flush=True)
            traffic.start()
            time.sleep(_SETTLE_S)
            for number in range(args.kills):
                _wait_serving(workers)
                victim, survivor = workers[number % 2], workers[1 - number % 2]
                killed_at = victim.kill()
                result = measure(traffic, killed_at, survivor, args.partitions, args.timeout)
                results.append(result)
                victim.start()
                startups.append(_startup(victim))
                time.sleep(_SETTLE_S)
                rejoins.append(_longest_gap(traffic, victim.started_at, time.time()))
                print(f"kill {number + 1}: stall {result['stall']:.2f} s (partitions {result['owned']}), "
                      f"unaffected pause {result['pause']:.2f} s ({result['pause_at'][0]:.2f}-{result['pause_at'][1]:.2f} s "
                      f"after the kill); {result['restored']} changelog records restored "
                      f"({result['bulk']} of them in bulk, {result['bulk_s']:.2f} s); "
                      f"rebalance at {_fmt(result['rebalance starts'])}, "
                      f"joined {_fmt(result['joined'])}, reads input {_fmt(result['reads input'])}, "
                      f"Faust's recovery complete {_fmt(result['recovered'])} s; "
                      f"restart: first log line {_fmt(startups[-1][0])}, ready {_fmt(startups[-1][1])} s, "
                      f"longest pause of a partition while it rejoined {rejoins[-1]:.2f} s", flush=True)
            sizes = asyncio.run(_changelog_records(args.bootstrap, workers[0].app_id))
            print(f"changelog records at the end: {sizes}", flush=True)
            warnings, lines = _buffer_full(workdir)
            print(f"Faust's \"producer buffer full\" warnings in the workers' logs: {warnings} ({lines} lines "
                  f"logged)", flush=True)
        finally:
            traffic.stop()
            for worker in workers:
                worker.stop()
            asyncio.run(_cleanup(args.bootstrap, (f"bench.{tag}.", f"bench-{tag}-")))
            if args.logs:
                args.logs.mkdir(parents=True, exist_ok=True)
                for log in workdir.glob("*.log"):
                    shutil.copy(log, args.logs / log.name)
    stall, pause = _median([r["stall"] for r in results]), _median([r["pause"] for r in results])
    print(f"\nfailover over {len(results)} kills (median; {args.partitions} partitions, {args.rate:.0f} events/s, "
          f"settings: {overrides or 'the worker defaults'})")
    print(f"  {'figure':<44} {'median s':>9} {'target s':>9}")
    print(f"  {'stall of the killed worker partitions':<44} {_fmt(stall):>9} {STALL_TARGET_S:>9.1f}")
    print(f"  {'pause of the unaffected partitions':<44} {_fmt(pause):>9} {PAUSE_TARGET_S:>9.1f}")
    stalls = [r["stall"] for r in results]
    if stalls:
        print(f"  {'stall, largest of the kills':<44} {_fmt(max(stalls)):>9} {STALL_TARGET_S:>9.1f}")
    restored = [r["restored"] for r in results if r["restored"] is not None]
    if restored:
        print(f"  {'changelog records restored (median, largest)':<44} {statistics.median(restored):>9.0f} "
              f"{max(restored):>9}")
    for phase in ("rebalance starts", "joined", "reads input", "recovered"):
        print(f"  {'kill -> ' + phase:<44} {_fmt(_median([r[phase] for r in results])):>9}")
    print(f"  {'restart: process start -> first log line':<44} {_fmt(_median([s[0] for s in startups])):>9}")
    print(f"  {'restart: process start -> ready':<44} {_fmt(_median([s[1] for s in startups])):>9}")
    if rejoins:
        print(f"  {'rejoin: longest pause of a partition':<44} {_fmt(_median(rejoins)):>9}   largest {max(rejoins):.2f}")


if __name__ == "__main__":
    main()
