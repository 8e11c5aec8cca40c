"""The worker with ``--store rocksdb://`` against the real broker: restarts, kill -9, idle expiry.

The RocksDB store keeps each changelog partition in a local database together
with the offset of the last changelog record written to it, and at start reads
only the changelog records after that offset. These tests check what the
databases hold (state bytes and offsets, read with ``rocksdict`` while the
worker is stopped) and that a restarted worker continues from them (in the
first test the changelog is emptied before the restart, so counts that
continue can only come from the database), and that idle keys recovered from
the databases expire with a tombstone on their own changelog partition.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from pathlib import Path

import msgpack
import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import PolicyViolationError
from faust.types import TP

from streams.wire.keys import verdict_partition
from streams.worker.states import decode_state
from tests.worker.test_worker import ENABLED, _calls, _offline, _same, stopped_mid_stream_loses_nothing
from tests.worker_harness import (
    WorkerProcess, consume_all, create_topics, encode, produce, running_worker, worker_settings,
)

rocksdict = pytest.importorskip("rocksdict")

pytestmark = [pytest.mark.kafka]

OFFSET_KEY = b"__faust\0offset__"  # faust.stores.rocksdb.Store.offset_key


def _databases(data_dir: Path) -> dict[int, Path]:
    """Changelog partition -> database directory of the ``states`` table under a worker's data dir."""
    found = {int(path.name.removesuffix(".db").rsplit("-", 1)[1]): path
             for path in data_dir.rglob("states-*.db") if path.is_dir()}
    assert found, f"no RocksDB database under {data_dir}"
    return found


def _read_database(path: Path) -> dict[bytes, bytes]:
    """Every key and value of a (closed) database, as Faust opened it (raw mode)."""
    db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True),
                         access_type=rocksdict.AccessType.read_only())
    try:
        return dict(db.items())
    finally:
        db.close()


async def _truncate(bootstrap: str, topic: str, ends: dict[int, int]) -> None:
    """Delete every record of compacted ``topic`` before offset ``ends[partition]``.

    Kafka refuses DeleteRecords on a topic whose cleanup policy lacks
    ``delete``, so the policy becomes ``compact,delete`` first (the partition
    takes it a moment after the change is acknowledged: refusals are retried).
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        policy = ConfigResource(ConfigResourceType.TOPIC, topic, {"cleanup.policy": "compact,delete"})
        for response in await admin.alter_configs([policy]):
            assert [error for error, *_ in response.resources] == [0], response
        deadline = time.monotonic() + 10
        while True:
            try:
                await admin.delete_records({TopicPartition(topic, p): RecordsToDelete(end) for p, end in ends.items()},
                                           timeout_ms=10_000)
                break
            except PolicyViolationError:  # the new policy has not reached the partition's log yet
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
    finally:
        await admin.close()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("stop", ["stop", "kill"], ids=["sigterm", "kill-9"])
def test_state_survives_a_restart_in_the_rocksdb_store_alone(kafka_bootstrap, tmp_path, stop):
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps(ENABLED))
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2, config=config, store="rocksdb://")
    topic, changelog = settings.input_topics[0], f"{settings.app_id}-states-changelog"
    partition = verdict_partition(b"run-a", 2)  # the producer's default partitioner
    events = _calls("run-a", 0, 15) + _calls("run-a", 15, 10)
    asyncio.run(create_topics(kafka_bootstrap, [topic], 2))

    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        worker.wait_ready()
        asyncio.run(produce(kafka_bootstrap, topic, [(b"run-a", encode(e)) for e in events[:15]]))
        assert len(asyncio.run(consume_all(kafka_bootstrap, settings.verdicts_topic, 15, timeout=60))) == 15
        # the checkpoint holding all 15 events reached the changelog
        deadline, last = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            records = asyncio.run(consume_all(kafka_bootstrap, changelog, 10**6, timeout=0.5))
            last = records[-1] if records else None
            if last and decode_state(last.value).last_offsets.get(f"{topic}:{partition}") == 14:
                break
        assert last is not None and last.key == b"run-a" and last.partition == partition
        assert decode_state(last.value).last_offsets == {f"{topic}:{partition}": 14}
        if stop == "kill":
            time.sleep(1.0)  # the acknowledgement's callback stores the offset; then no flush, no commit
        getattr(worker, stop)()
        assert worker.proc.returncode == (0 if stop == "stop" else -9), worker.log_text()[-3000:]

        # the database of the key's partition holds its state and the changelog offset of that state
        stored = _read_database(_databases(Path(settings.data_dir.replace("{app_id}", settings.app_id)))[partition])
        assert stored == {b"run-a": last.value, OFFSET_KEY: str(last.offset).encode()}
        # empty the changelog: a restarted worker can get the state only from its database
        asyncio.run(_truncate(kafka_bootstrap, changelog, {partition: last.offset + 1}))

        worker = WorkerProcess(settings, tmp_path / "worker.log").start()
        worker.wait_ready()
        asyncio.run(produce(kafka_bootstrap, topic, [(b"run-a", encode(e)) for e in events[15:]]))
        records = asyncio.run(consume_all(kafka_bootstrap, settings.verdicts_topic, 25, timeout=60))
    finally:
        worker.stop()
    got = [msgpack.unpackb(r.value) for r in records]
    assert len(got) == 25  # none sent twice
    sources = [(topic, g["source"]["partition"], g["source"]["offset"]) for g in got]
    assert sources == [(topic, partition, offset) for offset in range(25)]
    assert [_same(g, w) for g, w in zip(got, _offline(events, sources, ENABLED))] == [True] * 25
    # the counts continued across the restart: suppressed warnings, then blocks from the 21st call
    assert [g["verdict"] for g in got[15:]] == ["allow"] * 5 + ["block"] * 5
    assert got[15]["detection"]["count"] == 15 and got[-1]["detection"]["count"] == 20



@pytest.mark.timeout(170)
@pytest.mark.parametrize("stop", ["kill", "stop"], ids=["kill-9", "sigterm"])
def test_a_rocksdb_worker_stopped_mid_stream_loses_nothing_and_applies_nothing_twice(kafka_bootstrap, tmp_path,
                                                                                     stop):
    """kill -9, or SIGTERM (Faust closes the databases while it stops: the worker must stop reading and
    checkpoint before), while events flow and checkpoints write the databases; a restart continues from them."""
    def stored_keys(settings) -> int:  # in the databases the restart continues from, less the offset keys
        databases = _databases(Path(settings.data_dir.replace("{app_id}", settings.app_id)))
        return sum(len(_read_database(path)) - 1 for path in databases.values())

    stored = stopped_mid_stream_loses_nothing(kafka_bootstrap, tmp_path, stop, "rocksdb://", stored_keys)
    assert stored > 0, "no checkpoint reached the databases before the stop"


async def _produce_to(bootstrap: str, topic: str, records: list[tuple[bytes, bytes, int]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await producer.start()
    try:
        await asyncio.gather(*[await producer.send(topic, value, key=key, partition=partition)
                               for key, value, partition in records])
    finally:
        await producer.stop()


@pytest.mark.timeout(180)
def test_idle_keys_recovered_from_rocksdb_expire_with_a_tombstone_on_their_own_partition(kafka_bootstrap, tmp_path):
    # Each key is produced to the partition the default partitioner would NOT pick, so a tombstone
    # lands on the right partition only if the table knows the key's partition from its database.
    # one key on each partition
    defaults = {verdict_partition(f"run-{n}".encode(), 2): f"run-{n}".encode() for n in range(10)}
    keys = {defaults[0]: 1, defaults[1]: 0}
    first = worker_settings(kafka_bootstrap, tmp_path, partitions=2, store="rocksdb://")
    second = first.model_copy(update={"state_ttl_s": 1.0, "expiry_interval_s": 0.3})
    topic, changelog = first.input_topics[0], f"{first.app_id}-states-changelog"

    async def run() -> list:
        async with running_worker(first) as loopwatch:
            await _produce_to(kafka_bootstrap, topic,
                              [(key, encode(_calls(key.decode(), 0, 1)[0]), p) for key, p in keys.items()])
            assert len(await consume_all(kafka_bootstrap, first.verdicts_topic, 2, timeout=60)) == 2
            deadline = time.monotonic() + 60  # in the table from its checkpoint's acknowledgement on
            while ((loopwatch.table.key_partitions != keys or not all(key in loopwatch.table.data for key in keys))
                   and time.monotonic() < deadline):
                await asyncio.sleep(0.05)
            assert loopwatch.table.key_partitions == keys
            assert all(key in loopwatch.table.data for key in keys)
            assert len(loopwatch.table.data) == 2
        async with running_worker(second) as loopwatch:
            assert loopwatch.table.key_partitions == keys  # from the databases
            deadline = time.monotonic() + 60  # the databases drop a key once its tombstone is acknowledged
            while (loopwatch.table.key_partitions or len(loopwatch.table.data)) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert loopwatch.table.key_partitions == {}
            assert not any(key in loopwatch.table.data for key in keys) and len(loopwatch.table.data) == 0
            records = await consume_all(kafka_bootstrap, changelog, 4, timeout=60)
            offsets = {p: loopwatch.table.data.persisted_offset(TP(changelog, p)) for p in (0, 1)}
        return records, offsets

    records, offsets = asyncio.run(run())
    by_partition = defaultdict(list)
    for record in records:
        by_partition[record.partition].append((record.key, record.value is None, record.offset))
    assert {p: [(k, dead) for k, dead, _ in recs] for p, recs in by_partition.items()} == {
        p: [(k, False), (k, True)] for k, p in keys.items()}
    # the tombstones' offsets are the databases' persisted offsets
    assert offsets == {p: recs[-1][2] for p, recs in by_partition.items()}
    data_dir = Path(first.data_dir.replace("{app_id}", first.app_id))
    assert {p: _read_database(path) for p, path in _databases(data_dir).items()} == {
        p: {OFFSET_KEY: str(recs[-1][2]).encode()} for p, recs in by_partition.items()}

