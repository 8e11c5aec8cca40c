"""Two workers in one consumer group while partitions move between them (eager rebalances).

Worker A runs alone; events are produced at a paced rate; worker B joins (A's
partitions are revoked, B gets some of them); later A stops gracefully
(SIGTERM: all partitions move to B); production goes on after that. Every
event must have a verdict, repeated verdicts must be byte-identical (see the
checkpoint design in streams/worker/checkpoint.py) and equal to the offline engine's.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import urllib.request
from typing import Any

import msgpack
import pytest

from tests.worker.test_worker import ENABLED, _fleet_stream, _free_port, _offline, _same, verdicts_by_source
from tests.worker_harness import PacedProducer, WorkerProcess, count_records, create_topics, worker_settings

pytestmark = [pytest.mark.kafka]

_RATE_BATCH, _RATE_SLEEP = 15, 0.05  # ~300 events/s: the rebalances land mid-stream
_AFTER_STOP = 450  # events produced after A has stopped (only B can handle them)


def _events_applied(port: int) -> float:
    """The worker's ``loopwatch_events_total``, summed over event types (0 before its first event)."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=15).read().decode()
    except OSError:  # the endpoint is not up yet
        return 0.0
    return sum(float(m) for m in re.findall(r"^loopwatch_events_total\{[^}]*\} (\S+)$", text, re.M))


def _wait_until(predicate: Any, timeout: float, what: str, *workers: WorkerProcess) -> None:
    """Poll ``predicate``; fail at once (with its log) if one of ``workers`` exits meanwhile."""
    deadline = time.monotonic() + timeout
    while not predicate():
        for worker in workers:
            if worker.proc is not None and worker.proc.poll() is not None:
                pytest.fail(f"worker exited with {worker.proc.returncode} while waiting for: {what}\n"
                            f"{worker.log_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not in {timeout} s: {what}")
        time.sleep(0.1)


def assert_every_verdict_once_as_offline(events: list[dict[str, Any]], sources: list[tuple[str, int, int]],
                                         by_source: dict[tuple[str, int, int], list[bytes]]) -> list[dict[str, Any]]:
    """Every event (by its source) has a verdict, a verdict published again is byte for byte the same,
    and each equals the offline engine's on the same events; returns the verdicts, in event order."""
    missing = [s for s in sources if s not in by_source]
    assert missing == [], f"{len(missing)} events without a verdict, by partition: {_ranges(missing)}"
    differing = sorted(s for s, v in by_source.items() if len(set(v)) > 1)
    assert differing == [], f"{len(differing)} repeated verdicts differ, e.g. {differing[:5]}"
    keys = [e["run_id"] for e in events[:len(sources)]]
    want = _offline(events[:len(sources)], sources, ENABLED, keys)
    got = [msgpack.unpackb(by_source[s][0]) for s in sources]
    mismatches = [(i, sources[i]) for i, (g, w) in enumerate(zip(got, want)) if not _same(g, w)]
    assert mismatches == [], f"{len(mismatches)} verdicts differ from the offline engine, e.g. {mismatches[:5]}"
    return got


def end_production(producing: PacedProducer, finish: threading.Event, bootstrap: str, verdicts_topic: str) -> tuple[
        list[dict[str, Any]], list[tuple[str, int, int]], dict[tuple[str, int, int], list[bytes]]]:
    """Set ``finish`` (``producing`` adds its last events), wait for them, and read the verdicts published so far:
    (events, their sources, the verdicts by source; an event without any is left out)."""
    finish.set()
    sources = producing.join(60)
    assert not producing.ran_out, "the stream ran out before the scenario ended"
    by_source = verdicts_by_source(bootstrap, verdicts_topic, sources, timeout=60, partial=True)
    return producing.sent, sources, by_source


def _ranges(sources: list[tuple[str, int, int]]) -> dict[int, list[int]]:
    """Offsets per partition (for failure messages)."""
    by_partition: dict[int, list[int]] = {}
    for _, partition, offset in sorted(sources):
        by_partition.setdefault(partition, []).append(offset)
    return by_partition


@pytest.mark.timeout(120)
def test_partitions_moving_between_two_workers_lose_nothing_and_change_nothing(kafka_bootstrap, tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps(ENABLED))
    shared = worker_settings(kafka_bootstrap, tmp_path, partitions=4, config=config)
    topic = shared.input_topics[0]
    # one app id (one group, one changelog); each process its own local files and metrics port
    port_a, port_b = _free_port(), _free_port()
    settings_a = shared.model_copy(update={"data_dir": str(tmp_path / "faust-a-{app_id}"), "metrics_port": port_a})
    settings_b = shared.model_copy(update={"data_dir": str(tmp_path / "faust-b-{app_id}"), "metrics_port": port_b})
    asyncio.run(create_topics(kafka_bootstrap, [topic], 4))

    # an endless stream: production ends on `finish`, never because the events ran out (a fixed
    # 20,000 lasted ~66 s at this rate, which a slow machine's worker starts and stops can outlast)
    finish = threading.Event()  # set once A has stopped: produce _AFTER_STOP more, then end
    async def count_verdicts(at_least: int, timeout: float) -> int:
        return await count_records(kafka_bootstrap, shared.verdicts_topic, at_least, timeout)

    producing = PacedProducer(kafka_bootstrap, topic, _fleet_stream(runs=60), every=_RATE_BATCH, pause=_RATE_SLEEP,
                              until=finish.is_set, then=_AFTER_STOP)
    worker_a = WorkerProcess(settings_a, tmp_path / "worker-a.log").start()
    worker_b = WorkerProcess(settings_b, tmp_path / "worker-b.log")
    try:
        worker_a.wait_ready()
        producing.start()
        assert asyncio.run(count_verdicts(300, 30)) >= 300, "worker A publishes no verdicts"
        applied_a_alone = _events_applied(port_a)

        worker_b.start()  # joins the group: a rebalance moves some of A's partitions to B
        worker_b.wait_ready()
        applied_a_joined = _events_applied(port_a)
        # both apply events while they share the partitions
        _wait_until(lambda: _events_applied(port_b) >= 100, 30, "worker B applies events while A runs",
                    worker_a, worker_b)
        _wait_until(lambda: _events_applied(port_a) >= applied_a_joined + 100, 30,
                    "worker A keeps applying events after B joined", worker_a, worker_b)
        applied_b_shared = _events_applied(port_b)
        applied_a = _events_applied(port_a)

        worker_a.stop()  # graceful: last checkpoint committed, leaves the group; B gets every partition
        assert worker_a.proc.returncode == 0, worker_a.log_text()[-3000:]
        # what is missing is asserted below
        events, sources, by_source = end_production(producing, finish, kafka_bootstrap, shared.verdicts_topic)
        applied_b = _events_applied(port_b)
    finally:
        finish.set()
        worker_a.stop()
        worker_b.stop()

    # both workers did work: B while A still ran (partitions were split), and everything after A left
    assert applied_a_alone > 0 and applied_a >= applied_a_joined + 100 and applied_b_shared >= 100
    assert applied_b >= applied_b_shared + _AFTER_STOP - 1
    assert worker_b.proc.returncode == 0, worker_b.log_text()[-3000:]
    assert "We experienced a crash" not in worker_b.log_text(), worker_b.log_text()[-3000:]
    # B read the changelog of the partitions it took over in bulk (streams.worker.restore), not a record at a time
    bulk = [int(n) for n in re.findall(r"loopwatch: read (\d+) changelog records", worker_b.log_text())]
    assert bulk and max(bulk) > 0, worker_b.log_text()[-3000:]

    got = assert_every_verdict_once_as_offline(events, sources, by_source)
    # OpenClaw blocks (the loopwatch verdict of a blocked call in a run the guard ended is "abort") and warnings
    assert sum(g.get("decision") == "block" for g in got) > 0 and sum(g["verdict"] == "warn" for g in got) > 0
    print(f"\n{len(sources)} events; A applied {applied_a:.0f} (alone {applied_a_alone:.0f}) before its stop, "
          f"B {applied_b_shared:.0f} while sharing, {applied_b:.0f} in all; "
          f"{sum(len(v) > 1 for v in by_source.values())} byte-identical duplicate verdicts")
