"""A worker stalled past its transaction timeout, not its session timeout, is fenced without any rebalance,
rejoins the group by itself and loses nothing.

The worker runs with ``transaction_timeout_s=1`` and a 30 s session timeout. The test watches the
transaction coordinator (``DescribeTransactions``) until one of the worker's checkpoint transactions is
open, stops the worker with SIGSTOP right then (tried again if the transaction ended first), and keeps it
stopped until the coordinator has aborted that transaction for its timeout and bumped the writer's epoch
(its look for timed-out transactions runs every 10 s by default). That is shorter than the session timeout,
so the group keeps the worker and no rebalance comes by itself. After SIGCONT the worker's transaction is
refused (fenced), it drops its states and, the group still assigning it the partitions, rejoins
(streams/worker/outage.py ``_rejoin_if_still_assigned``). Every event must then have a verdict,
a verdict published again must be byte-identical and equal the offline engine's, and no committed state
may hold fewer events than its key's previous one.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import threading
import time
import urllib.request

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import CompactArray, CompactString, Int16, Int32, Int64, Schema, TaggedFields

from tests.worker.test_fencing import _changelog, _states_going_back
from tests.worker.test_rebalance import (_events_applied, _wait_until, assert_every_verdict_once_as_offline,
                                         end_production)
from tests.worker.test_worker import ENABLED, _fleet_stream, _free_port
from tests.worker_harness import PacedProducer, WorkerProcess, create_topics, worker_settings

pytestmark = [pytest.mark.kafka]

_SESSION_S = 30.0  # well above the longest stop (transaction timeout + the coordinator's 10 s look + margin)
_LONGEST_STOP_S = 20.0
_AFTER_REJOIN = 300  # events produced once the worker reads again after its rejoin


class _DescribeTransactionsResponse_v0(Response):
    API_KEY = 65
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("transaction_states", CompactArray(
            ("error_code", Int16),
            ("transactional_id", CompactString("utf-8")),
            ("transaction_state", CompactString("utf-8")),
            ("transaction_timeout_ms", Int32),
            ("transaction_start_time_ms", Int64),
            ("producer_id", Int64),
            ("producer_epoch", Int16),
            ("topics", CompactArray(
                ("topic", CompactString("utf-8")),
                ("partitions", CompactArray(Int32)),
                ("tags", TaggedFields),
            )),
            ("tags", TaggedFields),
        )),
        ("tags", TaggedFields),
    )


class _DescribeTransactionsRequest_v0(RequestStruct):
    FLEXIBLE_VERSION = True
    API_KEY = 65
    API_VERSION = 0
    RESPONSE_TYPE = _DescribeTransactionsResponse_v0
    SCHEMA = Schema(("transactional_ids", CompactArray(CompactString("utf-8"))), ("tags", TaggedFields))


class _DescribeTransactions(Request[_DescribeTransactionsRequest_v0]):
    """The transaction coordinator's view of transactional ids (KIP-664; aiokafka has no call for it)."""

    API_KEY = 65

    def __init__(self, ids: list[str]) -> None:
        self._ids = ids

    def build(self, request_struct_class: type[_DescribeTransactionsRequest_v0]) -> _DescribeTransactionsRequest_v0:
        return request_struct_class(self._ids, {})


async def _stop_in_open_transaction(bootstrap: str, pid: int, ids: list[str], timeout: float) -> tuple[str, float]:
    """SIGSTOP ``pid`` while a transaction of one of ``ids`` is open, and keep it stopped until the coordinator
    has aborted that transaction for its timeout (state CompleteAbort, epoch bumped); return the id and how long
    the process was stopped. A transaction that ends otherwise meanwhile (an EndTxn already on its way) means
    another try. The process is running again on return, also on failure."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    stopped_at = None
    try:
        coordinator = await admin.find_coordinator(ids[0], coordinator_type=1)

        async def states(which: list[str]) -> dict[str, tuple[str, int]]:
            """{transactional id: (state, producer epoch)}"""
            response = await admin._client.send(coordinator, _DescribeTransactions(which))
            return {s[1]: (s[2], s[6]) for s in response.transaction_states if s[0] == 0}

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            open_now = [tid for tid, (state, _) in (await states(ids)).items() if state == "Ongoing"]
            if not open_now:
                await asyncio.sleep(0.002)
                continue
            os.kill(pid, signal.SIGSTOP)
            stopped_at = time.monotonic()
            epochs = {tid: epoch for tid, (state, epoch) in (await states(open_now)).items() if state == "Ongoing"}
            while epochs and time.monotonic() - stopped_at < _LONGEST_STOP_S:
                now = await states(list(epochs))
                aborted = [tid for tid, (state, epoch) in now.items()
                           if state == "CompleteAbort" and epoch > epochs[tid]]
                if aborted:
                    return aborted[0], time.monotonic() - stopped_at
                epochs = {tid: epoch for tid, epoch in epochs.items()
                          if now[tid][0] in ("Ongoing", "PrepareAbort", "PrepareEpochFence")}
                await asyncio.sleep(0.1)
            if epochs:
                raise TimeoutError(f"the coordinator did not abort the transactions of {sorted(epochs)} in "
                                   f"{_LONGEST_STOP_S} s")
            os.kill(pid, signal.SIGCONT)  # they ended before the stop took hold: try again
            stopped_at = None
        raise TimeoutError(f"no transaction of {ids} caught open in {timeout} s")
    finally:
        if stopped_at is not None:
            os.kill(pid, signal.SIGCONT)
        await admin.close()


def _fenced(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=15).read().decode()
    return sum(float(m) for m in re.findall(r"^loopwatch_partitions_fenced_total(?:\{[^}]*\})? (\S+)$", text, re.M))


@pytest.mark.timeout(150)
def test_a_worker_stalled_past_its_transaction_timeout_rejoins_and_loses_nothing(kafka_bootstrap, tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps(ENABLED))
    port = _free_port()
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=4, config=config, metrics_port=port,
                               transaction_timeout_s=1, session_timeout_s=_SESSION_S)
    topic, changelog = settings.input_topics[0], f"{settings.app_id}-states-changelog"
    asyncio.run(create_topics(kafka_bootstrap, [topic], 4))
    finish = threading.Event()  # set once the worker reads again after its rejoin: produce _AFTER_REJOIN more
    producing = PacedProducer(kafka_bootstrap, topic, _fleet_stream(runs=40), every=10, pause=0.05,
                              until=finish.is_set, then=_AFTER_REJOIN)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        worker.wait_ready()
        producing.start()
        _wait_until(lambda: _events_applied(port) >= 100, 60, "the worker applies events", worker)
        ids = [f"{settings.app_id}-states-{p}" for p in range(4)]
        looked = time.monotonic()
        caught, stopped_s = asyncio.run(_stop_in_open_transaction(kafka_bootstrap, worker.proc.pid, ids, 30))
        caught_after = time.monotonic() - looked - stopped_s
        assert stopped_s < _SESSION_S - 5  # the group kept the worker: no rebalance came by itself
        _wait_until(lambda: "rejoining the group" in worker.log_text(), 30, "the fenced worker rejoins", worker)
        applied = _events_applied(port)
        _wait_until(lambda: _events_applied(port) >= applied + 100, 60, "the worker reads again", worker)
        events, sources, by_source = end_production(producing, finish, kafka_bootstrap, settings.verdicts_topic)
        fenced = _fenced(port)
    finally:
        finish.set()
        worker.stop()
    records = asyncio.run(_changelog(kafka_bootstrap, changelog))
    log = worker.log_text()

    assert "We experienced a crash" not in log, log[-3000:]
    assert fenced >= 1
    partition = int(caught.rsplit("-", 1)[1])
    rejoined = re.search(r"partitions ([\d, ]+) are still assigned to this worker .* rejoining the group", log)
    assert rejoined and str(partition) in rejoined.group(1).split(", "), log[-3000:]
    back = _states_going_back(records)
    assert back == [], f"{len(back)} changelog states older than their key's previous one, e.g. {back[:3]}"
    assert_every_verdict_once_as_offline(events, sources, by_source)
    print(f"\n{len(sources)} events; {caught} caught open after {caught_after:.1f} s, stopped {stopped_s:.1f} s; "
          f"partitions fenced {fenced:.0f}")
