"""loopwatch's engine beside OpenClaw's own loop detection and a compiled reference, per event, in one run.

Three engines take the same synthetic fleet (:mod:`bench.workload`, about
200,000 events at the default ``--runs 7850``), each in its own process. A
pass goes through the events in chunks of ``--chunk`` events, each chunk
applied by every engine in turn (the first one rotating), so all three run
under the same machine load within a fraction of a second:

* **OpenClaw**: ``tools.loopDetection`` of a real OpenClaw install, run by
  ``bench/openclaw_engine.mjs`` in node (detect, warning dedupe, record the
  call, record its outcome: what OpenClaw's ``before_tool_call`` hook and
  outcome recording do per call). ``--openclaw`` is the install's package
  directory (``.../node_modules/openclaw``); see bench/README.md for getting one.
* **reference**: ``bench/reference.c`` compiled here (``cc``, ``-lcrypto``):
  canonical form and SHA-256 of each call's args and result, and a scan of the
  session's last 30 records. No decoding, no outcome fingerprints, no verdict
  records: what no engine can go below.
* **loopwatch**: ``Engine.process`` under ``openclaw-2026.7`` with detection
  on and OpenClaw's defaults, states keyed by session key as OpenClaw keeps them.

Each figure is the process's own CPU time per event (not wall time: the other
processes on the machine do not count against it), summed over a pass's
chunks, best pass of each; the ratios are loopwatch's events/s over each
floor's, best against best and the median of the passes' ratios. Events are decoded before timing in all three
(the parse cost is printed apart).

    python bench/vs_openclaw.py --openclaw .work/openclaw/node_modules/openclaw
    python bench/vs_openclaw.py --openclaw DIR --runs 2000 --rounds 3 --no-reference
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.host import interpreter  # noqa: E402
from bench.options import positive  # noqa: E402
from bench.workload import generate  # noqa: E402
from streams.detection import Engine, OpenClawConfig, SessionState  # noqa: E402
from streams.detection.canonical import ACCELERATED  # noqa: E402
from streams.detection.events import state_key  # noqa: E402

_HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--openclaw", default=os.environ.get("LOOPWATCH_BENCH_OPENCLAW"),
                        help="OpenClaw's package directory (node_modules/openclaw; env LOOPWATCH_BENCH_OPENCLAW)")
    parser.add_argument("--node", default=os.environ.get("LOOPWATCH_BENCH_NODE") or shutil.which("node"),
                        help="node executable (default: env LOOPWATCH_BENCH_NODE, else node on PATH)")
    parser.add_argument("--runs", type=positive(int), default=7850,
                        help="agent runs in the workload (default 7850: about 200,000 events)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=positive(int), default=5, help="passes of each engine (default 5)")
    parser.add_argument("--chunk", type=positive(int), default=2000,
                        help="events each engine applies before the next takes the same ones (default 2000)")
    parser.add_argument("--no-reference", action="store_true", help="skip the compiled reference")
    options = parser.parse_args()
    if not options.openclaw or not (Path(options.openclaw) / "dist").is_dir():
        parser.error("--openclaw: an OpenClaw package directory with dist/ (see bench/README.md)")
    if not options.node:
        parser.error("--node: no node executable found")

    events = generate(runs=options.runs, seed=options.seed)
    print(f"workload: {len(events):,} events, {options.runs:,} runs (seed {options.seed})")
    print(f"interpreter: {interpreter()}; C accelerator {'on' if ACCELERATED else 'off'}")
    with tempfile.TemporaryDirectory(prefix="loopwatch-vs-openclaw-") as work:
        floors = {"OpenClaw": _start_openclaw(options, events, Path(work))}
        if not options.no_reference:
            floors["reference"] = _start_reference(events, Path(work))
        engine = Engine(OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}}))
        gc.collect()
        gc.freeze()  # the decoded events stay alive throughout, as the worker freezes what it keeps
        names = ["loopwatch", *floors]
        cpu: dict[str, list[float]] = {name: [] for name in names}
        wall: dict[str, list[float]] = {name: [] for name in names}
        counts: dict[str, Counter] = {}
        for _ in range(options.rounds):
            for name in names:
                cpu[name].append(0.0)
                wall[name].append(0.0)
            for floor in floors.values():
                floor.reset()
            states: dict[str | None, SessionState] = {}
            counts["loopwatch"] = Counter()
            for number, first in enumerate(range(0, len(events), options.chunk)):
                end = min(first + options.chunk, len(events))
                for name in names[number % len(names):] + names[:number % len(names)]:
                    if name == "loopwatch":
                        spent, took = _loopwatch_run(engine, events[first:end], states, counts[name])
                    else:
                        answer = floors[name].run(first, end)
                        spent, took = answer["cpu_us"] / 1e6, answer["wall_us"] / 1e6
                        counts[name] = Counter(answer.get("verdicts") or {"flagged": answer.get("flagged", 0)})
                    cpu[name][-1] += spent
                    wall[name][-1] += took
        for floor in floors.values():
            floor.close()
    _report(len(events), names, cpu, wall, counts, floors)


class _Child:
    """A floor process speaking bench/openclaw_engine.mjs's line protocol."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"{argv[0]} exited (status {self.process.wait()}) before it was ready")
        self.ready = json.loads(line)

    def reset(self) -> None:
        self.process.stdin.write("reset\n")

    def run(self, first: int, end: int) -> dict:
        self.process.stdin.write(f"run {first} {end}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"a floor process exited (status {self.process.wait()}) during a pass")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


def _start_openclaw(options: argparse.Namespace, events: list[dict], work: Path) -> _Child:
    path = work / "events.jsonl"
    with path.open("w") as out:
        for event in events:
            out.write(json.dumps(event) + "\n")
    home = work / "home"  # OpenClaw reads its config from ~/.openclaw: an empty one, and no console logging
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "OPENCLAW_LOG_LEVEL": "silent"}
    child = _Child([options.node, str(_HERE / "openclaw_engine.mjs"), options.openclaw, str(path)], env)
    path.unlink()
    version = json.loads((Path(options.openclaw) / "package.json").read_text())["version"]
    print(f"OpenClaw {version} in node {child.ready['node']}: parsed {child.ready['ready']:,} events in "
          f"{child.ready['parse_cpu_us'] / child.ready['ready']:.1f} µs CPU each")
    return child


def _start_reference(events: list[dict], work: Path) -> _Child:
    binary = work / "reference"
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-o", str(binary), str(_HERE / "reference.c"), "-lcrypto"],
                   check=True)
    path = work / "events.bin"
    sessions: dict[str, int] = {}
    with path.open("wb") as out:
        out.write(struct.pack("<I", len(events)))
        out.write(struct.pack("<I", 0))  # session count, patched below
        for event in events:
            session = sessions.setdefault(state_key(event) or "", len(sessions))
            out.write(struct.pack("<I", session))
            chunks: list[bytes] = []
            _string(chunks, event.get("tool_name") or "tool")
            _string(chunks, event.get("run_id") or "")
            _value(chunks, event["args"] if "args" in event else _ABSENT)
            error = event.get("error")
            _value(chunks, error if error is not None else event.get("result", _ABSENT))
            out.write(b"".join(chunks))
        out.seek(4)
        out.write(struct.pack("<I", len(sessions)))
    child = _Child([str(binary), str(path)])
    path.unlink()
    print(f"reference: {binary.name} built with {os.environ.get('CC', 'cc')} -O2")
    return child


_ABSENT = object()


def _string(chunks: list[bytes], text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    chunks.append(struct.pack("<I", len(data)))
    chunks.append(data)


def _value(chunks: list[bytes], value: object) -> None:
    if value is _ABSENT:
        chunks.append(b"U")
    elif value is None:
        chunks.append(b"N")
    elif value is True or value is False:
        chunks.append(b"T" if value else b"F")
    elif isinstance(value, int):
        chunks.append(b"I" + struct.pack("<q", value))
    elif isinstance(value, float):
        chunks.append(b"D" + struct.pack("<d", value))
    elif isinstance(value, str):
        chunks.append(b"S")
        _string(chunks, value)
    elif isinstance(value, (list, tuple)):
        chunks.append(b"A" + struct.pack("<I", len(value)))
        for item in value:
            _value(chunks, item)
    elif isinstance(value, dict):
        chunks.append(b"O" + struct.pack("<I", len(value)))
        for key, item in value.items():
            _string(chunks, key)
            _value(chunks, item)
    else:
        raise TypeError(f"the workload holds a {type(value).__name__}")


def _loopwatch_run(engine: Engine, events: list[dict], states: dict[str | None, SessionState],
                   counts: Counter) -> tuple[float, float]:
    """Apply ``events`` to ``states``, keyed by session key as OpenClaw keys its own: (CPU s, wall s)."""
    process = engine.process
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    for event in events:
        key = state_key(event)
        state = states.get(key)
        if state is None:
            state = states[key] = SessionState()
        counts[process(event, state, event["event_id"])["verdict"]] += 1
    return time.process_time() - cpu_start, time.perf_counter() - wall_start


def _report(n: int, names: list[str], cpu: dict[str, list[float]], wall: dict[str, list[float]],
            counts: dict[str, Counter], floors: dict[str, _Child]) -> None:
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores; "
          f"{len(cpu['loopwatch'])} passes each, engines alternating chunk by chunk")
    for name in names:
        best = min(cpu[name])
        print(f"{name:>10}: {n / best:>9,.0f} events/s per core of CPU, {best / n * 1e6:6.2f} µs CPU per event "
              f"(best; median {statistics.median(cpu[name]) / n * 1e6:.2f} µs; wall {min(wall[name]) / n * 1e6:.2f} µs)"
              f"; {', '.join(f'{v:,} {k}' for k, v in sorted(counts[name].items()))}")
    ours = cpu["loopwatch"]
    for name in floors:
        ratios = [theirs / mine for theirs, mine in zip(cpu[name], ours)]
        print(f"loopwatch / {name}: {min(cpu[name]) / min(ours):.2f}x events/s (best passes), "
              f"median of passes {statistics.median(ratios):.2f}x, range {min(ratios):.2f}-{max(ratios):.2f}x")


if __name__ == "__main__":
    main()
