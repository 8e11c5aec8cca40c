"""StateTable writes: the local store takes a changelog record only once the broker acknowledged its batch.

No broker: a stand-in producer hands out aiokafka batch builders and keeps each
batch's future for the test to resolve (acknowledge) or fail.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from aiokafka.producer.message_accumulator import BatchBuilder
from faust.types import TP

from streams.worker.app import Loopwatch
from streams.worker.outputs import Outputs
from streams.worker.settings import WorkerSettings


class _Producer:
    """create_batch/send_batch as aiokafka's; sent batches wait in ``sent`` as (topic, partition, count, future)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, int, asyncio.Future]] = []

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(16384, 0)

    async def send_batch(self, builder: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self.sent.append((topic, partition, builder.record_count(), future))
        return future


def _acknowledge(entry: tuple[str, int, int, asyncio.Future], base_offset: int) -> None:
    topic, partition, _, future = entry
    future.set_result(SimpleNamespace(topic_partition=TP(topic, partition), offset=base_offset))


def test_store_follows_the_acknowledged_changelog(tmp_path: Path) -> None:
    worker = Loopwatch(WorkerSettings(broker="kafka://127.0.0.1:1", app_id="lw-unit", input_topics=["unit.events"],
                                      partitions=2, metrics_port=0, data_dir=str(tmp_path / "faust")))
    table, producer = worker.table, _Producer()
    changelog = table.changelog_topic.get_topic_name()
    store = table.data
    persisted: dict[TP, int] = {}
    store.set_persisted_offset = lambda tp, offset: persisted.__setitem__(tp, offset)  # memory: a no-op

    async def run() -> None:
        out = Outputs(producer, {changelog: 2})
        await table.put_many([(b"a", b"A1", 0), (b"b", b"B1", 1), (b"c", b"C1", 0)], out)
        assert [(t, p, n) for t, p, n, _ in producer.sent] == [(changelog, 0, 2), (changelog, 1, 1)]
        assert dict(store.items()) == {} and table.key_partitions == {b"a": 0, b"b": 1, b"c": 0}
        _acknowledge(producer.sent[0], 40)
        await asyncio.sleep(0)
        assert dict(store.items()) == {b"a": b"A1", b"c": b"C1"} and persisted == {TP(changelog, 0): 41}

        # b expires and comes back before its tombstone is acknowledged: the tombstone goes first
        table.expire(b"b", 1, out)
        assert table.key_partitions == {b"a": 0, b"c": 0}
        await table.put_many([(b"b", b"B2", 1)], out)
        assert [(p, n) for _, p, n, _ in producer.sent[2:]] == [(1, 2)]  # [tombstone, B2] in one batch
        producer.sent[1][3].set_exception(RuntimeError("not acknowledged"))  # B1 never stored
        _acknowledge(producer.sent[2], 7)
        await asyncio.sleep(0)
        assert dict(store.items()) == {b"a": b"A1", b"c": b"C1", b"b": b"B2"}
        assert persisted == {TP(changelog, 0): 41, TP(changelog, 1): 8}

        # an expiry whose tombstone is not acknowledged leaves the store as the changelog has it
        table.expire(b"a", 0, out)
        await table.send(out)
        assert dict(store.items())[b"a"] == b"A1"
        producer.sent[3][3].set_exception(RuntimeError("not acknowledged"))
        await asyncio.sleep(0)
        assert dict(store.items())[b"a"] == b"A1" and persisted[TP(changelog, 0)] == 41
        table.expire(b"c", 0, out)
        await table.send(out)
        _acknowledge(producer.sent[4], 42)
        await asyncio.sleep(0)
        assert dict(store.items()) == {b"a": b"A1", b"b": b"B2"} and persisted[TP(changelog, 0)] == 42

    asyncio.run(run())


def _worker(tmp_path: Path, store: str) -> Loopwatch:
    return Loopwatch(WorkerSettings(broker="kafka://127.0.0.1:1", app_id="lw-unit", input_topics=["unit.events"],
                                    partitions=2, metrics_port=0, store=store, data_dir=str(tmp_path / "faust")))


def test_rocksdb_takes_no_write_for_a_partition_not_assigned(tmp_path: Path) -> None:
    worker = _worker(tmp_path, "rocksdb://")
    table, producer = worker.table, _Producer()
    changelog = table.changelog_topic.get_topic_name()
    store = table.data
    store._db_for_partition(0)  # what the store does for an assigned partition

    async def run() -> None:
        out = Outputs(producer, {changelog: 2})
        await table.put_many([(b"a", b"A1", 0), (b"b", b"B1", 1)], out)
        _acknowledge(producer.sent[0], 10)
        _acknowledge(producer.sent[1], 20)
        await asyncio.sleep(0)
        # partition 1 was never opened here: its database stays closed, its offset unknown
        assert sorted(store._dbs) == [0]
        assert store._dbs[0][b"a"] == b"A1" and store.persisted_offset(TP(changelog, 0)) == 10

        # partition 0 revoked while a write is in flight: acknowledged, not written, not reopened
        await table.put_many([(b"a", b"A2", 0)], out)
        store.revoke_partitions(table, {TP(changelog, 0)})
        _acknowledge(producer.sent[2], 11)
        await asyncio.sleep(0)
        assert store._dbs == {}
        assert store._db_for_partition(0)[b"a"] == b"A1"  # behind the changelog by the skipped record...
        assert store.persisted_offset(TP(changelog, 0)) == 10  # ...which a recovery reads after offset 10

    asyncio.run(run())


def test_a_failed_local_write_crashes_the_worker(tmp_path: Path) -> None:
    worker = _worker(tmp_path, "rocksdb://")
    table, producer = worker.table, _Producer()
    changelog = table.changelog_topic.get_topic_name()
    crashed: list[BaseException] = []

    async def crash(exc: BaseException) -> None:
        crashed.append(exc)

    class _FullDisk:
        def put(self, key: bytes, value: bytes) -> None:
            raise OSError(28, "No space left on device")

    worker.app.crash = crash
    table.data._dbs[0] = _FullDisk()

    async def run() -> None:
        await table.put_many([(b"a", b"A1", 0)], Outputs(producer, {changelog: 2}))
        _acknowledge(producer.sent[0], 10)
        for _ in range(3):
            await asyncio.sleep(0)
        assert [str(exc) for exc in crashed] == ["[Errno 28] No space left on device"]

    asyncio.run(run())


def test_a_checkpoint_leaves_out_a_state_too_large_for_a_changelog_record_with_its_key(tmp_path: Path) -> None:
    from streams.worker import metrics

    worker = _worker(tmp_path, "memory://")
    before = metrics.STATES_NOT_WRITTEN._value.get()
    writes = [(b"k" * 600_000, b"s" * 600_000, 0), (b"small", b"s" * 600_000, 1), (b"k2", b"s" * 999_000, 0)]
    # 600 KB of state fits alone but not with a 600 KB key; the changelog record holds both
    assert worker._fitting(writes) == writes[1:]
    assert metrics.STATES_NOT_WRITTEN._value.get() == before + 1
    assert worker.table.key_partitions[b"k" * 600_000] == 0  # idle expiry still finds it
