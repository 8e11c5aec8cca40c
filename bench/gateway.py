"""Gateway benchmark: a runner's hook round trip through ``loopwatch gateway`` against the direct client.

One ``loopwatch worker`` (detection on, default thresholds) and one ``loopwatch gateway`` per
``--processes`` value (default: one of 1 process, one of 2) run as subprocesses on fresh topics of
one broker. At each offered rate (default 200 and 1,000 requests/s, 10 s each), in turn:

(a) direct -- the floor: ``LoopwatchClient.check()``, one ``tool_call`` per request (what an
    embedded Python runner pays: Kafka there and back, the worker between);
(b) each gateway -- the same tool calls as Claude Code ``PreToolUse`` hook calls POSTed to
    ``/v1/hooks/claude-code`` over keep-alive connections, answered in Claude Code's hook output.

Both are sent by bench/loadgen.py, a process of its own (``--loadgen-cpus`` pins it, e.g. to
another core than the gateway's, ``--gateway-cpus``), paced open-loop: request ``i`` is due at
``start + i / rate``. Its HTTP client is a raw asyncio protocol with each request's bytes made
beforehand, so that it costs a small fraction of the gateway's CPU per request.

Round trip = from when the request is due to its answer; p50/p99/max per phase, side by side,
with the gateway/direct ratios (target: gateway p99 within 2x the direct p99). Beside them: CPU
per request of the serving side (the direct client's process; the gateway's processes), of the
HTTP load generator apart, and the highest load average (1 min) seen at the phase's start or end.
``--repeat N`` goes through every rate N times (alternating runs on one worker and broker, for a
machine whose load moves).

Then the command hook's start-up: ``loopwatch hook claude-code`` started N times (default 40) with a
``PreToolUse`` payload on stdin, each timed from spawn to exit (answer printed), against the bare
interpreter's start-up (``python -c pass``) as the floor, the two in turn. Target p50 <= 80 ms.
``--starts-only`` times the start-ups alone (worker and one gateway, no rate phases).

    deploy/kafka/kafka.sh start
    .venv/bin/python bench/gateway.py
    .venv/bin/python bench/gateway.py --rates 1000 --processes 1,2 --repeat 3 --starts 0
    .venv/bin/python bench/gateway.py --rates 1000 --processes 1 --gateway-cpus 0 --loadgen-cpus 1 --starts 0
    .venv/bin/python bench/gateway.py --rates 200 --duration 5 --starts 20
    .venv/bin/python bench/gateway.py --starts-only --starts 100

Every topic is named ``bench.<random>...`` and deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STARTUP_TARGET_MS = 80  # p50 of the command hook's start-up to answer

from bench.host import interpreter  # noqa: E402
from bench.options import positive  # noqa: E402
from bench.loadgen import TIMEOUT_S, WARM_UP, pre_tool_use  # noqa: E402
from bench.pipeline import READY_TIMEOUT_S, Worker, _cleanup, _cpu_seconds, _free_port, _quantile  # noqa: E402


class Gateway:
    """``loopwatch gateway`` as a subprocess on the worker's topics (``processes`` of them: ``--processes``)."""

    def __init__(self, bootstrap: str, worker: Worker, workdir: Path, processes: int = 1,
                 cpus: set[int] | None = None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.processes = processes
        self.log = workdir / f"gateway-{processes}.log"
        self.args = [sys.executable, "-c", "from streams.cli import main; main()", "gateway",
                     "--bootstrap", bootstrap, "--port", str(self.port), "--timeout", str(TIMEOUT_S),
                     "--events-topic", worker.input, "--verdicts-topic", worker.output,
                     "--processes", str(processes)]
        self.proc: subprocess.Popen | None = None
        self.cpus = cpus
        # The bearer token the gateway asks, sent by the requests below and the command hook (from the env).
        self.env = {**os.environ, "LOOPWATCH_GATEWAY_TOKEN": uuid.uuid4().hex}

    def start(self) -> None:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True, env=self.env,
                                         preexec_fn=_pinned(self.cpus))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while f"loopwatch gateway: {self.url}" not in self.log.read_text("utf-8", "replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gateway did not start (exit {self.proc.poll()}):\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def cpu_seconds(self) -> float | None:
        """CPU time so far of the gateway's processes (with ``--processes`` above 1, the parent and its children)."""
        if self.proc is None:
            return None
        pids = [self.proc.pid]
        try:
            pids += [int(pid) for pid in Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()]
        except OSError:
            pass
        times = [_cpu_seconds(pid) for pid in pids]
        return None if None in times else sum(times)  # type: ignore[arg-type]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _cpus(text: str | None) -> set[int] | None:
    return {int(cpu) for cpu in text.split(",")} if text else None


def _pinned(cpus: set[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that pins the child (and what it forks) to ``cpus`` (Linux), or None."""
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None  # type: ignore[misc]


def _loadgen(mode: str, rate: float, duration: float, cpus: set[int] | None, *args: str,
             env: dict[str, str] | None = None) -> dict[str, Any]:
    """One phase of bench/loadgen.py in a process of its own (pinned to ``cpus``); its figures."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "loadgen.py"), mode, "--rate", str(rate),
                           "--duration", str(duration), *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, preexec_fn=_pinned(cpus), timeout=duration + 120)
    if done.returncode != 0:
        raise RuntimeError(f"loadgen {mode} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _direct(bootstrap: str, worker: Worker, rate: float, duration: float, cpus: set[int] | None) -> dict[str, Any]:
    result = _loadgen("direct", rate, duration, cpus, "--bootstrap", bootstrap, "--events-topic", worker.input,
                      "--verdicts-topic", worker.output)
    result["cpu_us"] = result.pop("loadgen_us")  # the direct client is its own load generator: its CPU is the client's
    return result


def _through_gateway(gateway: Gateway, rate: float, duration: float, cpus: set[int] | None) -> dict[str, Any]:
    return _loadgen("http", rate, duration, cpus, "--url", gateway.url, env=gateway.env)


def _sent(phase: dict[str, Any]) -> int:
    """Requests a phase made, the warm-up's included: answered or not in time, each was served."""
    return phase["answered"] + phase["failed"] + WARM_UP


def _per_request(before: float | None, after: float | None, requests: int) -> float | None:
    """CPU µs per request between two readings of a process's CPU time (None off Linux)."""
    return None if before is None or after is None or not requests else (after - before) / requests * 1e6


def _startups(commands: dict[str, tuple[list[str], bytes, dict[str, str] | None]], count: int) -> dict[str, Any]:
    """Wall time of ``count`` runs of each of ``commands`` (name -> (command, stdin, environment)), spawn to exit
    with the output read, after one warm-up of each; the commands in turn (A B A B ...), so that a load that moves
    weighs on each alike. ``{name: {runs, p50_ms, p99_ms, max_ms}, "load": highest 1-min load average seen}``."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    load = os.getloadavg()[0]
    for n in range(count + 1):
        for name, (command, stdin, env) in commands.items():
            started = time.perf_counter()
            done = subprocess.run(command, input=stdin, capture_output=True, cwd=ROOT, env=env)
            elapsed = (time.perf_counter() - started) * 1000
            if done.returncode not in (0, 2):  # 2: a blocking answer
                raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
            if n:
                times[name].append(elapsed)
        if n % 10 == 0:
            load = max(load, os.getloadavg()[0])
    figures: dict[str, Any] = {name: {"runs": count, "p50_ms": _quantile(t, 0.50), "p99_ms": _quantile(t, 0.99),
                                      "max_ms": max(t)} for name, t in times.items()}
    figures["load"] = max(load, os.getloadavg()[0])
    return figures


def _report(rounds: list[dict[str, Any]], startup: dict[str, Any], answered: str) -> None:
    if rounds:
        _report_rounds(rounds)
    if startup:
        floor, hook = startup["floor"], startup["hook"]
        print()
        print(f"command hook start-up to answer, ms ({hook['runs']} runs each, in turn; load average (1 min) up to "
              f"{startup['load']:.1f})")
        print(f"{'':<52}{'p50':>6} {'p99':>7} {'max':>7}")
        for name, r in (("python -c pass (floor)", floor), (f"loopwatch hook claude-code ({answered})", hook)):
            print(f"  {name:<50}{r['p50_ms']:>6.1f} {r['p99_ms']:>7.1f} {r['max_ms']:>7.1f}")
        print(f"  target p50 <= {STARTUP_TARGET_MS} ms; above the floor: p50 {hook['p50_ms'] - floor['p50_ms']:.1f} ms")


def _report_rounds(rounds: list[dict[str, Any]]) -> None:
    print()
    print("hook round trip, ms; gateway/direct ratios; CPU per request (µs, user + system) of the side that serves it")
    print("and of the HTTP load generator apart; load average (1 min), the higher of the phase's start and end")
    print(f"{'offered req/s':>13} {'path':<12} {'achieved':>8}  {'p50':>7} {'p99':>7} {'max':>7}   {'p50':>5} {'p99':>5}"
          f"  {'CPU/req':>7} {'loadgen':>7}  {'load':>5}")
    for phase in rounds:
        direct = phase["direct"]
        rows = [("direct", direct)] + [(f"gateway x{n}", r) for n, r in sorted(phase["gateway"].items())]
        for name, r in rows:
            ratio = (f"{r['p50_ms'] / direct['p50_ms']:>4.1f}x {r['p99_ms'] / direct['p99_ms']:>4.1f}x"
                     if name != "direct" else f"{'':>5} {'':>5}")
            cpu = f"{r['cpu_us']:>7,.0f}" if r.get("cpu_us") is not None else f"{'-':>7}"
            gen = f"{r['loadgen_us']:>7,.0f}" if r.get("loadgen_us") is not None else f"{'(incl)':>7}"
            print(f"{r['offered']:>13,.0f} {name:<12} {r['achieved']:>8,.0f}  {r['p50_ms']:>7.1f} {r['p99_ms']:>7.1f}"
                  f" {r['max_ms']:>7.1f}   {ratio}  {cpu} {gen}  {r['load']:>5.1f}")
            if r["failed"]:
                print(f"  ! {name} at {r['offered']:,.0f}/s: {r['failed']} request(s) without a verdict within "
                      f"{TIMEOUT_S:g} s")
    print("direct: CPU of the direct client's process (the client and its pacing); gateway xN: CPU of its N "
          "processes (and the parent);\nloadgen: bench/loadgen.py's raw HTTP client while it sends (its own process)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default=os.environ.get("LOOPWATCH_KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--rates", default="200,1000", help="offered requests/s, comma-separated (200,1000)")
    parser.add_argument("--duration", type=positive(float), default=10.0, help="seconds per phase (10)")
    parser.add_argument("--starts", type=int, default=40, help="command-hook start-ups timed (40; 0: none)")
    parser.add_argument("--starts-only", action="store_true",
                        help="time the command hook's start-ups alone: no rate phases, one gateway (the first of "
                             "--processes)")
    parser.add_argument("--processes", default="1,2",
                        help="gateways to measure, by their --processes, comma-separated (1,2): each is started "
                             "once and every phase runs through each in turn")
    parser.add_argument("--repeat", type=positive(int), default=1,
                        help="times to go through every rate (alternating runs on one worker and broker) (1)")
    parser.add_argument("--partitions", type=positive(int), default=4, help="partitions of every topic (4)")
    parser.add_argument("--loadgen-cpus", metavar="CPUS",
                        help="CPUs (comma-separated, e.g. 1) the load generator runs on, both the HTTP one and the "
                             "direct client (default: any)")
    parser.add_argument("--gateway-cpus", metavar="CPUS",
                        help="CPUs (comma-separated, e.g. 0) the gateways run on (default: any)")
    parser.add_argument("--nice", type=int, default=0,
                        help="niceness of this process and so of everything it starts (worker, gateways, load "
                             "generator); below 0 (root only) gives them a larger share of a machine that other work "
                             "keeps busy, the broker excepted (0)")
    parser.add_argument("--json", dest="json_out", help="also write the figures to this JSON file")
    options = parser.parse_args()
    try:
        rates = [positive(float)(r) for r in options.rates.split(",")]
        processes = [positive(int)(n) for n in options.processes.split(",")]
    except argparse.ArgumentTypeError as exc:
        parser.error(f"--rates/--processes: {exc}")
    if options.starts_only:
        if options.starts <= 0:
            parser.error("--starts-only needs --starts above 0")
        rates, processes = [], processes[:1]

    if options.nice:
        os.setpriority(os.PRIO_PROCESS, 0, options.nice)  # inherited by every process started from here on
    tag = uuid.uuid4().hex[:8]
    print(f"interpreter: {interpreter()} (worker and gateway run on it too); broker {options.bootstrap}; "
          f"topics bench.{tag}.*", flush=True)
    rounds: list[dict[str, Any]] = []
    startup: dict[str, Any] = {}
    answered = ""
    workdir = Path(tempfile.mkdtemp(prefix="loopwatch-bench-"))
    worker = Worker(options.bootstrap, tag, options.partitions, workdir)
    loadgen_cpus = _cpus(options.loadgen_cpus)
    gateways = {n: Gateway(options.bootstrap, worker, workdir, n, _cpus(options.gateway_cpus)) for n in processes}
    print(f"CPUs: {os.cpu_count()}; load generator on {options.loadgen_cpus or 'any'}, gateways on "
          f"{options.gateway_cpus or 'any'}; nice {os.getpriority(os.PRIO_PROCESS, 0)}; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    try:
        worker.start()
        for gateway in gateways.values():
            gateway.start()
        for repeat in range(options.repeat):
            for rate in rates:
                print(f"{rate:,.0f} req/s: direct client, then the gateway with "
                      f"{' and '.join(map(str, processes))} process(es), {options.duration:g} s each ...", flush=True)
                load = os.getloadavg()[0]
                direct = _direct(options.bootstrap, worker, rate, options.duration, loadgen_cpus)
                direct.update(load=max(load, os.getloadavg()[0]))
                print(f"  direct {json.dumps(direct)}", flush=True)
                phase: dict[str, Any] = {"direct": direct, "gateway": {}}
                for n, gateway in gateways.items():
                    served, load = gateway.cpu_seconds(), os.getloadavg()[0]
                    through = _through_gateway(gateway, rate, options.duration, loadgen_cpus)
                    through.update(cpu_us=_per_request(served, gateway.cpu_seconds(), _sent(through)),
                                   load=max(load, os.getloadavg()[0]))
                    print(f"  gateway x{n} {json.dumps(through)}", flush=True)
                    phase["gateway"][n] = through
                rounds.append(phase)
        if options.starts:
            first = gateways[processes[0]]
            payload = json.dumps(pre_tool_use(0, f"st{tag}")).encode()
            loopwatch = shutil.which("loopwatch", path=str(Path(sys.executable).parent)) or "loopwatch"
            hook = [loopwatch, "hook", "claude-code", "--url", first.url]
            print(f"command hook: {' '.join(hook)}, {options.starts} start-ups ...", flush=True)
            startup = _startups({"floor": ([sys.executable, "-c", "pass"], b"", None),
                                 "hook": (hook, payload, first.env)}, options.starts)
            answered = subprocess.run(hook, input=payload, capture_output=True,
                                      env=first.env).stdout.decode().strip() or "{}"
    finally:
        for gateway in gateways.values():
            gateway.stop()
        worker.stop()
        deleted = asyncio.run(_cleanup(options.bootstrap, (f"bench.{tag}.", f"bench-{tag}-")))
        print(f"deleted {deleted} bench topic(s)", flush=True)
        shutil.rmtree(workdir, ignore_errors=True)
    _report(rounds, startup, "allow" if answered == "{}" else "answered")
    if options.json_out:
        Path(options.json_out).write_text(json.dumps({"rounds": rounds, "startup": startup},
                                                     indent=2, default=str))


if __name__ == "__main__":
    main()
