"""The worker's own CPU per event, without Kafka: what bench/pipeline.py's worker spends beside the pass-through.

The events of :mod:`bench.workload` are encoded as msgpack, keyed by run id and
spread over ``--partitions`` partitions as Kafka's default partitioner puts
them, then handed to the worker's path in fetches of ``--fetch`` records per
partition, as :meth:`streams.worker.app.Loopwatch._on_batch` does:

* :meth:`streams.worker.processor.Processor.handle` (decode, engine, verdict
  record and its encoding, loop events, metric counts), with the fleet view's
  observations (:meth:`streams.worker.fleet.FleetView.after_apply`, msgpack
  to the signals topic) when the config has the fleet view on (the default);
* the records to publish packed into producer batches
  (:class:`streams.worker.outputs.Outputs` with aiokafka's ``BatchBuilder``;
  each batch is built, checksum included, and not sent) and the batch's
  metrics published;
* a checkpoint's encoding of every state changed, each time a partition has
  had ``--checkpoint-events`` events, and ``gc.freeze()`` then, as the worker
  does.

Each pass starts from empty states; the figure is the process's CPU time per
event (so other processes on the machine do not count against it), per pass,
with the best and the median. Compare two versions of the code by running
this script from each checkout in turn (its imports are the checkout's).

    python bench/worker_path.py                   # 1,000 runs (~25k events), 5 passes
    python bench/worker_path.py --runs 2000 --no-fleet
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgpack  # noqa: E402
from aiokafka.producer.message_accumulator import BatchBuilder  # noqa: E402

from bench.host import interpreter  # noqa: E402
from bench.options import config, positive  # noqa: E402
from bench.workload import generate  # noqa: E402
from streams.detection import Engine, OpenClawConfig  # noqa: E402
from streams.detection.fleet import observation  # noqa: E402
from streams.wire.keys import verdict_partition  # noqa: E402
from streams.worker.outputs import Outputs  # noqa: E402
from streams.worker.processor import Processor, Topics  # noqa: E402
from streams.worker.states import States  # noqa: E402

TOPICS = Topics("verdicts", "loop-events", "dead-letters", "bench-rekey", "bench-states-changelog")
SIGNALS = "bench-fleet-signals"
BATCH_BYTES = 1_048_576  # the worker's producer_max_batch_size


class _Producer:
    """The two calls Outputs makes of aiokafka's producer; batches are built (their CRC too), not sent.
    ``records``: how many went to each topic."""

    def __init__(self) -> None:
        self.records: dict[str, int] = {}

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(BATCH_BYTES, 0)

    async def send_batch(self, builder: BatchBuilder, topic: str, *, partition: int) -> None:
        builder._build()  # what the producer's sender does with it (aiokafka internals), before the request
        self.records[topic] = self.records.get(topic, 0) + builder.record_count()


def _fetches(events: list[dict[str, Any]], partitions: int, per_partition: int) -> list[list[tuple[Any, list]]]:
    """The events as fetches: ``[(partition, records)]``, ``per_partition`` records of each partition a fetch."""
    logs: list[list[Any]] = [[] for _ in range(partitions)]
    for event in events:
        key = str(event["run_id"]).encode()
        log = logs[verdict_partition(key, partitions)]
        log.append(SimpleNamespace(key=key, value=msgpack.packb(event, use_bin_type=True), offset=len(log),
                                   timestamp=event.get("ts")))
    tps = [SimpleNamespace(topic="events", partition=p) for p in range(partitions)]
    longest = max(len(log) for log in logs)
    return [[(tps[p], log[start:start + per_partition]) for p, log in enumerate(logs) if log[start:start + per_partition]]
            for start in range(0, longest, per_partition)]


def one_pass(fetches: list, cfg: OpenClawConfig, fleet: bool, checkpoint_events: int, partitions: int
             ) -> tuple[float, dict[str, int]]:
    """CPU seconds of the worker's path over every fetch, from empty states, and the records it gave per topic."""
    processor = Processor(Engine(cfg), topics=TOPICS)
    processor.states = States({}, processor.encode_state)
    if fleet:
        pack = msgpack.Packer(use_bin_type=True).pack

        def after_apply(record: dict, event: dict, key: bytes, found: list, add: Any) -> None:
            found_obs = observation(record, cfg.fleet, event.get("agent_id"))
            if found_obs is not None:
                add(SIGNALS, found_obs["sig"].encode("utf-8"), pack(found_obs))

        processor.observe = after_apply
    producer = _Producer()
    out = Outputs(producer, {topic: partitions for topic in (*TOPICS[:4], SIGNALS)})
    loop = asyncio.new_event_loop()
    changed: dict[bytes, int] = {}
    since = [0] * partitions
    gc.collect()
    gc.freeze()
    started = time.process_time()
    for fetch in fetches:
        done = processor.handle(fetch, 0.0)
        out.add_all(done.publish)
        loop.run_until_complete(out.send())
        processor.flush_metrics()
        changed.update(done.changed)
        for tp, records in fetch:
            since[tp.partition] += len(records)
        if max(since) >= checkpoint_events:  # a checkpoint: every changed state encoded
            for key in changed:
                processor.encode_state(processor.states.cache[key])
            changed.clear()
            since = [0] * partitions
            gc.freeze()
    took = time.process_time() - started
    gc.unfreeze()
    loop.close()
    return took, producer.records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=positive(int), default=1000, help="agent runs in the workload (1,000: ~25k events)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--config", help="openclaw.json (default: enabled: true, all defaults, the fleet view on)")
    parser.add_argument("--passes", type=positive(int), default=5, help="timed passes (5)")
    parser.add_argument("--partitions", type=positive(int), default=4, help="input partitions (4)")
    parser.add_argument("--fetch", type=positive(int), default=300,
                        help="records of a partition per fetch (300: about 1 MB of 3 KB events, aiokafka's "
                             "max_partition_fetch_bytes)")
    parser.add_argument("--checkpoint-events", type=positive(int), default=1000,
                        help="events of one partition that make a checkpoint (1,000, the worker's default)")
    parser.add_argument("--no-fleet", action="store_true", help="without the fleet view's observations")
    options = parser.parse_args()

    cfg = config(options.config)
    t0 = time.perf_counter()
    events = generate(runs=options.runs, seed=options.seed)
    fetches = _fetches(events, options.partitions, options.fetch)
    print(f"workload: {len(events):,} events, {options.runs:,} runs, {len(fetches):,} fetches of up to "
          f"{options.fetch} records per partition (built in {time.perf_counter() - t0:.1f} s)")
    print(f"interpreter: {interpreter()}")
    fleet = cfg.fleet.enabled and not options.no_fleet
    per_event = []
    for _ in range(options.passes):
        took, records = one_pass(fetches, cfg, fleet, options.checkpoint_events, options.partitions)
        per_event.append(took / len(events) * 1e6)
    print("records of a pass: " + ", ".join(f"{topic} {count:,}" for topic, count in sorted(records.items())))
    print(f"worker path{' with the fleet view' if fleet else ''}: CPU µs per event per pass "
          f"{' '.join(f'{us:.1f}' for us in per_event)}; best {min(per_event):.1f}, median "
          f"{statistics.median(per_event):.1f}")


if __name__ == "__main__":
    main()
