"""Engine benchmark: events/s and µs per event on one core, and state size per run.

Generates the synthetic fleet workload of :mod:`bench.workload` (decoded
events, as the worker hands them to the engine), then times
``Engine.process`` per event with run-keyed states, as the worker keeps them.
Throughput is events per second of the process's CPU time (one core, not
counting time other processes take from it), with the wall-clock rate beside
it; the best of several passes is reported.

    python bench/engine.py                 # 2,000 runs (~50k events)
    python bench/engine.py --runs 5000 --config openclaw.json
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import timeit
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.host import interpreter  # noqa: E402
from bench.options import config, positive  # noqa: E402
from bench.workload import generate  # noqa: E402
from streams.detection import Engine, SessionState  # noqa: E402
from streams.detection.canonical import ACCELERATED  # noqa: E402
from streams.worker.keys import partition_key  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=positive(int), default=2000, help="agent runs in the workload (default 2000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--config", help="openclaw.json to use (default: enabled: true, all defaults)")
    parser.add_argument("--repeat", type=positive(int), default=5, help="timed passes; the best is reported (default 5)")
    options = parser.parse_args()

    engine = Engine(config(options.config))
    t0 = time.perf_counter()
    events = generate(runs=options.runs, seed=options.seed)
    sizes = [len(str(e.get("args", ""))) + len(str(e.get("result", ""))) for e in events]
    print(f"workload: {len(events):,} events, {options.runs:,} runs, args+result {statistics.mean(sizes)/1024:.1f} KB "
          f"mean (generated in {time.perf_counter() - t0:.1f} s)")
    print(f"interpreter: {interpreter()}")
    keys = [partition_key(e, "run") for e in events]

    best = None
    for _ in range(options.repeat):
        states: dict[str, SessionState] = {}
        timings = []
        verdicts: Counter = Counter()
        gc.collect()
        gc.disable()
        clock = time.perf_counter_ns
        start = clock()
        cpu_start = time.process_time()
        for event, key in zip(events, keys):
            state = states.get(key)
            if state is None:
                state = states[key] = SessionState()
            before = clock()
            verdict = engine.process(event, state, event["event_id"])
            timings.append(clock() - before)
            verdicts[verdict["verdict"]] += 1
        total_s = (clock() - start) / 1e9
        cpu_s = time.process_time() - cpu_start
        gc.enable()
        if best is None or cpu_s < best[0]:
            best = (cpu_s, total_s, timings, verdicts, states)
    cpu_s, total_s, timings, verdicts, states = best
    timings.sort()
    p50 = timings[len(timings) // 2] / 1000
    p99 = timings[int(len(timings) * 0.99)] / 1000
    print(f"engine:   {len(events) / cpu_s:,.0f} events/s per core of CPU time ({len(events) / total_s:,.0f}/s "
          f"wall clock; best of {options.repeat}); per event p50 {p50:.1f} µs, p99 {p99:.1f} µs "
          f"(C accelerator: {'on' if ACCELERATED else 'off'})")
    print("verdicts: " + ", ".join(f"{n:,} {v}" for v, n in sorted(verdicts.items())))
    keep_full = engine.config.smallest_warning_threshold
    state_sizes = sorted(len(s.to_bytes(keep_full)) for s in states.values())
    # A checkpoint re-encodes every state an event changed since the last one (records already packed
    # stay cached); a restart or rebalance decodes each state once.
    encode_s = min(timeit.repeat(lambda: [s.to_bytes(keep_full) for s in states.values()], number=1, repeat=5))
    encoded = [s.to_bytes(keep_full) for s in states.values()]
    decode_s = min(timeit.repeat(lambda: [SessionState.from_bytes(b) for b in encoded], number=1, repeat=5))
    print(f"state:    {len(state_sizes):,} runs; serialised bytes per run mean {statistics.mean(state_sizes):,.0f}, "
          f"p50 {state_sizes[len(state_sizes)//2]:,}, p99 {state_sizes[int(len(state_sizes)*0.99)]:,}, "
          f"max {state_sizes[-1]:,} (historySize {engine.config.for_agent('main').history_size}); "
          f"encode {encode_s / len(encoded) * 1e6:.1f} µs, decode {decode_s / len(encoded) * 1e6:.1f} µs per state "
          f"(best of 5)")


if __name__ == "__main__":
    main()
