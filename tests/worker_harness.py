"""Starting loopwatch workers against the real broker, producing events, reading outputs.

* :func:`worker_settings` -- unique app id, topics and group for one test;
* :func:`running_worker` -- async context manager: an in-process worker
  (``Loopwatch.app.start()``), ready when its partitions are assigned and the
  table recovered; always stopped;
* :class:`WorkerProcess` -- ``loopwatch worker`` as a subprocess (for restarts
  and kill -9), with :meth:`WorkerProcess.wait_ready` reading its log;
* :func:`create_topics`, :func:`produce`, :func:`consume_all` -- aiokafka helpers;
* :func:`committed_to_end` -- wait until a worker's checkpoints cover every event produced so far;
* :class:`PacedProducer` -- events produced from a thread at a paced rate, so a
  stop, kill or rebalance lands mid-stream.

Sync tests drive these with ``asyncio.run`` (the project has no pytest-asyncio).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable

import msgpack
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streams.worker.app import Loopwatch
from streams.detection import Engine
from streams.worker.settings import WorkerSettings

READY_TIMEOUT_S = 60.0
ROOT = Path(__file__).resolve().parents[1]


def topic_tag() -> str:
    """A fresh tag for a test's topics and app id, led by the session's (tests/conftest.py deletes its topics)."""
    return os.environ.get("LOOPWATCH_TEST_SESSION", "") + uuid.uuid4().hex[:6]


def worker_settings(bootstrap: str, tmp_path: Path, **overrides: Any) -> WorkerSettings:
    """Settings with a unique app id and topics, fast group timings, no metrics port."""
    tag = topic_tag()
    values: dict[str, Any] = dict(
        broker=f"kafka://{bootstrap}",
        app_id=f"lw-it-{tag}",
        input_topics=[f"test.lw.{tag}.events"],
        verdicts_topic=f"test.lw.{tag}.verdicts",
        loop_events_topic=f"test.lw.{tag}.loop-events",
        dead_letters_topic=f"test.lw.{tag}.dead-letters",
        fleet_events_topic=f"test.lw.{tag}.fleet-events",
        partitions=2,
        standby_replicas=0,
        metrics_port=0,
        data_dir=str(tmp_path / "faust-{app_id}"),
        session_timeout_s=6,
        rebalance_timeout_s=6,
        expiry_interval_s=3600,
        checkpoint_partition_interval_s=0.25,  # every partition with changes at nearly every look (0.5 s)
    )
    values.update(overrides)
    return WorkerSettings(**values)


def settings_env(settings: WorkerSettings) -> dict[str, str]:
    """The ``LOOPWATCH_*`` environment equivalent to ``settings``."""
    env = {}
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        env[WorkerSettings.env_name(name)] = ",".join(value) if isinstance(value, list) else str(value)
    return env


async def create_topics(bootstrap: str, names: Iterable[str], partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, partitions, 1) for n in names], timeout_ms=10_000)
    finally:
        await admin.close()


async def _ready(loopwatch: Loopwatch, starting: asyncio.Future, timeout: float) -> None:
    app = loopwatch.app
    deadline = time.monotonic() + timeout
    while not (app.started and not app.rebalancing and app.tables.recovery.completed.is_set()
               and app.consumer.assignment()):
        if starting.done():
            starting.result()
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker {app.conf.id} not ready in {timeout} s")
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def running_worker(settings: WorkerSettings, engine: Engine | None = None,
                         timeout: float = READY_TIMEOUT_S) -> AsyncIterator[Loopwatch]:
    """An in-process worker, started and ready; stopped on exit."""
    await create_topics(settings.broker.removeprefix("kafka://"), settings.input_topics, settings.partitions)
    loopwatch = Loopwatch(settings, engine)
    starting = asyncio.ensure_future(loopwatch.app.start())
    try:
        await _ready(loopwatch, starting, timeout)
        yield loopwatch
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(loopwatch.app.stop(), 30)
        starting.cancel()


def checkpoint_wait_s(settings: WorkerSettings) -> float:
    """Seconds within which a checkpoint has begun that covers what a worker with ``settings`` handled before."""
    return settings.checkpoint_partition_interval_s + 2 * settings.checkpoint_interval_s


async def checkpointed(loopwatch: Loopwatch) -> None:
    """Wait until a checkpoint has covered everything handled so far (a partition's longest wait and two looks,
    then the one in flight); assert that no checkpoint failed and no batch was left half-handled."""
    await asyncio.sleep(checkpoint_wait_s(loopwatch.settings))
    await loopwatch._wait_checkpoint()
    assert loopwatch._failed is None and not loopwatch._tainted


async def committed_to_end(bootstrap: str, group: str, topic: str, partitions: int, timeout: float) -> None:
    """Wait until ``group`` (a worker's app id) has committed the end offset, as of the call, of every partition
    of ``topic``: a checkpoint of the worker (a subprocess too) covers every record produced to it before.

    Raises:
        AssertionError: not within ``timeout`` s (the offsets still short of the ends are named).
    """
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        await admin.start()
        ends = await consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while True:
            committed = await admin.list_consumer_group_offsets(group, partitions=tps)
            short = {tp.partition: (committed[tp].offset if tp in committed else None, end)
                     for tp, end in ends.items() if end > 0 and (tp not in committed or committed[tp].offset < end)}
            if not short:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{group} has not committed {topic} to its end within {timeout} s: "
                                     f"(committed, end) by partition {short}")
            await asyncio.sleep(0.2)
    finally:
        await admin.close()
        await consumer.stop()


class WorkerProcess:
    """``loopwatch worker`` (or, ``faust=True``, ``faust -A streams.app worker``) as a subprocess.

    Configured through the environment (``LOOPWATCH_*``).
    """

    def __init__(self, settings: WorkerSettings, log_path: Path, extra_args: Iterable[str] = (),
                 faust: bool = False) -> None:
        self.settings = settings
        self.log_path = log_path
        self.extra_args = list(extra_args)
        self.faust = faust
        self.proc: subprocess.Popen | None = None
        self._log_offset = 0

    def start(self) -> "WorkerProcess":
        env = {**os.environ, **settings_env(self.settings), "PYTHONUNBUFFERED": "1"}
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")
        command = (["-c", "from faust.cli.faust import cli; cli()", "-A", "streams.worker.app", "worker", "-l", "info"]
                   if self.faust else ["-c", "from streams.cli import main; main()", "worker"])
        self.proc = subprocess.Popen(
            [sys.executable, *command, *self.extra_args],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        return self

    def log_text(self) -> str:
        with open(self.log_path, "rb") as handle:
            handle.seek(self._log_offset)
            return handle.read().decode("utf-8", "replace")

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait for Faust's "Ready" log line (worker started, partitions assigned)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}")
            if "[^Worker]: Ready" in self.log_text():
                return
            time.sleep(0.2)
        raise TimeoutError(f"worker not ready in {timeout} s:\n{self.log_text()[-4000:]}")

    def kill(self) -> None:
        """SIGKILL: no flush, no commit, no leave-group."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM and wait; SIGKILL if it does not exit in time."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def encode(event: dict[str, Any]) -> bytes:
    return msgpack.packb(event, use_bin_type=True)


async def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes]],
                  stamp: bool = False) -> None:
    """Produce ``(key, value)`` records in order (acks=all)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await producer.start()
    try:
        futures = [await producer.send(topic, value=value, key=key) for key, value in records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def whole_topic(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every record (aiokafka ``ConsumerRecord``) of ``topic`` (``partitions`` partitions) up to its end offsets
    as of the call, by partition and offset."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        found: list[Any] = []
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                found.extend(records)
        return sorted(found, key=lambda record: (record.partition, record.offset))
    finally:
        await consumer.stop()


async def consume_all(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> list[Any]:
    """Read ``topic`` from the start until ``count`` records (or the timeout): ConsumerRecords."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None)
    await consumer.start()
    records: list[Any] = []
    try:
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for batch in batches.values():
                records.extend(batch)
    finally:
        await consumer.stop()
    return records


async def count_records(bootstrap: str, topic: str, at_least: int, timeout: float) -> int:
    """Records in ``topic`` from the start, counted until ``at_least`` (or the timeout)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None)
    await consumer.start()
    seen = 0
    try:
        deadline = time.monotonic() + timeout
        while seen < at_least and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=50)).values():
                seen += len(batch)
    finally:
        await consumer.stop()
    return seen


class PacedProducer:
    """Produces ``events`` (key = run id) to ``topic`` from a thread: ``every`` events, then a ``pause`` (s).

    With ``until`` (a callable polled after each event): once it returns
    True, ``then`` more events are produced and production ends early.
    ``events`` may be an endless iterator when ``until`` is given: then
    production ends on the condition, never because the stream ran out
    (however slow the machine). :meth:`join` returns the (topic, partition,
    offset) of every event produced, in order, and raises what the thread
    raised; :attr:`sent` holds those events, :attr:`ran_out` says whether
    ``events`` ended before the condition (and its ``then`` events) did.
    """

    def __init__(self, bootstrap: str, topic: str, events: Iterable[dict[str, Any]], every: int = 30,
                 pause: float = 0.02, until: Callable[[], bool] | None = None, then: int = 0) -> None:
        self.bootstrap, self.topic, self.events = bootstrap, topic, events
        self.every, self.pause, self.until, self.then = every, pause, until, then
        self.sent: list[dict[str, Any]] = []
        self.ran_out = True
        self._sources: list[tuple[str, int, int]] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def start(self) -> "PacedProducer":
        self._thread.start()
        return self

    def join(self, timeout: float) -> list[tuple[str, int, int]]:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"production did not finish in {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._sources is not None
        return self._sources

    def _main(self) -> None:
        try:
            self._sources = asyncio.run(self._produce())
        except BaseException as exc:  # raised again by join(), in the test's thread
            self._error = exc

    async def _produce(self) -> list[tuple[str, int, int]]:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5)
        await producer.start()
        try:
            futures, left = [], None
            for number, event in enumerate(self.events, 1):
                futures.append(await producer.send(self.topic, encode(event), key=event["run_id"].encode()))
                self.sent.append(event)
                if left is None and self.until is not None and self.until():
                    left = self.then
                if left is not None:
                    left -= 1
                    if left <= 0:
                        self.ran_out = False
                        break
                if number % self.every == 0:
                    await asyncio.sleep(self.pause)
            return [(m.topic, m.partition, m.offset) for m in await asyncio.gather(*futures)]
        finally:
            await producer.stop()
