"""CPU use and connection attempts of a worker and a client while the broker is down.

Starts a broker of its own (deploy/kafka/kafka.sh on a free port, never 9092), a
``loopwatch worker`` on fresh topics and a runner process with a LoopwatchClient
checking one tool call every ``--interval`` s (timeout 0.5 s), sends a few events,
stops the broker, and measures for ``--windows`` windows of ``--window`` s:

- ``cpu``: CPU time of each process (all threads, from /proc) per wall second, in % of one core;
- ``connect``: failed connection attempts per second, from the worker's rate-limited
  aiokafka lines ("Unable connect to node ... (and N more like it in the last 10 s)").

Then it restarts the broker (same data) and prints the seconds until the client's
checks get the worker's verdicts again, and stops everything.

    .venv/bin/python bench/outage.py                 # ~1.5 min on 2 cores
    .venv/bin/python bench/outage.py --windows 6     # a longer outage

Figures depend on the machine's load: compare runs made one after the other.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.private_broker import PrivateBroker  # noqa: E402
from tests.worker_harness import WorkerProcess, encode, produce, worker_settings  # noqa: E402

CLIENT = """
import asyncio, logging, sys, time, uuid
logging.basicConfig(format="[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s", level=logging.WARNING)
from streams.runners.client import LoopwatchClient
async def main(bootstrap, events, verdicts, interval):
    async with LoopwatchClient(bootstrap, events, verdicts, timeout=0.5, start_timeout=60) as client:
        number = 0
        while True:
            number += 1
            verdict = await client.check({"type": "tool_call", "run_id": "bench-run", "session_id": "s",
                                          "tool_call_id": f"c{number}", "tool_name": "read",
                                          "args": {"n": number}, "result": "ok"})
            print(f"{time.time():.3f} {'timeout' if verdict.timed_out else 'verdict'}", flush=True)
            await asyncio.sleep(interval)
asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])))
"""


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def connect_rate(log: str, since: float) -> float | None:
    """Failed connection attempts per second from the rate-limited lines logged after ``since`` (epoch s)."""
    total, first, last = 0, None, None
    for match in re.finditer(r"^\[(\S+ \S+)\] .*Unable connect to node[^\n]*?(?:\(and (\d+) more like it[^\n]*)?$", log, re.M):
        stamp = time.mktime(time.strptime(match.group(1).split(",")[0], "%Y-%m-%d %H:%M:%S"))
        if stamp < since:
            continue
        total += 1 + int(match.group(2) or 0)
        first = stamp if first is None else first
        last = stamp
    if first is None or last == first:
        return None
    return total / (last - first + 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, default=3, help="measurement windows during the outage")
    parser.add_argument("--window", type=float, default=10.0, help="seconds per window")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between the client's checks")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="loopwatch-outage-"))
    broker = PrivateBroker(work / "kafka")
    print(f"broker: started on {broker.bootstrap} in {broker.start():.1f} s", flush=True)
    worker = client = None
    try:
        settings = worker_settings(broker.bootstrap, work, partitions=4)
        worker = WorkerProcess(settings, work / "worker.log").start()
        worker.wait_ready()
        client_log = open(work / "client.log", "wb")
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, broker.bootstrap, settings.input_topics[0], settings.verdicts_topic,
             str(args.interval)], cwd=ROOT, stdout=client_log, stderr=subprocess.STDOUT, start_new_session=True)
        event = {"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": "c", "tool_name": "t",
                 "args": {}, "result": "x"}
        asyncio.run(produce(broker.bootstrap, settings.input_topics[0], [(b"r", encode(event))]))
        time.sleep(5)
        broker.stop()
        down_at = time.time()
        print("broker: stopped", flush=True)
        time.sleep(2)
        for window in range(args.windows):
            w0, c0, t0 = cpu_seconds(worker.proc.pid), cpu_seconds(client.pid), time.monotonic()
            time.sleep(args.window)
            elapsed = time.monotonic() - t0
            print(f"outage window {window + 1}: cpu worker {100 * (cpu_seconds(worker.proc.pid) - w0) / elapsed:.1f} %"
                  f", client {100 * (cpu_seconds(client.pid) - c0) / elapsed:.1f} % of one core", flush=True)
        for name, text in (("worker", worker.log_text()), ("client", (work / "client.log").read_text())):
            rate = connect_rate(text, down_at)
            print(f"{name}: failed connection attempts {'n/a' if rate is None else f'{rate:.0f}'} per second "
                  "(from its aiokafka log lines)", flush=True)
        restarted = time.time()
        print(f"broker: restarted in {broker.start():.1f} s", flush=True)
        deadline = time.monotonic() + 90
        back = None
        while back is None and time.monotonic() < deadline:
            time.sleep(0.5)
            for line in (work / "client.log").read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == "verdict" and float(parts[0]) > restarted:
                    back = float(parts[0]) - restarted
                    break
        print(f"client: verdicts again {'not within 90 s' if back is None else f'{back:.1f} s'} after the restart "
              "began", flush=True)
    finally:
        if client is not None:
            client.send_signal(signal.SIGKILL)
            client.wait()
        if worker is not None:
            worker.kill()
        if broker.is_up():
            broker.stop()
        print(f"logs: {work}", flush=True)


if __name__ == "__main__":
    main()
