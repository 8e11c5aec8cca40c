"""StateTable writes: the local store takes changelog records only once their transaction committed.

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


def test_store_takes_only_committed_records_in_changelog_order(tmp_path: Path) -> None:
    worker = Loopwatch(WorkerSettings(broker="kafka://127.0.0.1:1", app_id="lw-unit", input_topics=["unit.events"],
                                      partitions=2, metrics_port=0, data_dir=str(tmp_path / "faust")))
    table, producer = worker.table, _Producer()
    changelog = table.changelog_topic.get_topic_name()
    store = table.data
    persisted: dict[TP, int] = {}
    store.set_persisted_offset = lambda tp, offset: persisted.__setitem__(tp, offset)  # memory: a no-op

    async def run() -> None:
        out = Outputs(producer, {changelog: 2})
        zero = await table.write(out, 0, [(b"a", b"A1"), (b"c", b"C1")])
        one = await table.write(out, 1, [(b"b", b"B1")])
        assert [(t, p, n) for t, p, n, _ in producer.sent] == [(changelog, 0, 2), (changelog, 1, 1)]
        assert [records for records, _ in zero] == [[(b"a", b"A1"), (b"c", b"C1")]]
        assert dict(store.items()) == {} and table.key_partitions == {b"a": 0, b"b": 1, b"c": 0}
        _acknowledge(producer.sent[0], 40)
        _acknowledge(producer.sent[1], 7)
        await asyncio.sleep(0)
        assert dict(store.items()) == {}  # acknowledged, not committed: the store waits
        table.store_committed(0, zero)
        assert dict(store.items()) == {b"a": b"A1", b"c": b"C1"} and persisted == {TP(changelog, 0): 41}
        table.store_committed(1, one)
        assert persisted == {TP(changelog, 0): 41, TP(changelog, 1): 7}

        # c expires and comes back: [tombstone, C2] in one batch, stored in that order
        table.forget(b"c")
        assert table.key_partitions == {b"a": 0, b"b": 1}
        again = await table.write(out, 0, [(b"c", None), (b"c", b"C2"), (b"a", None)])
        assert [(p, n) for _, p, n, _ in producer.sent[2:]] == [(0, 3)]
        assert table.key_partitions == {b"b": 1, b"c": 0}
        _acknowledge(producer.sent[2], 42)
        table.store_committed(0, again)
        assert dict(store.items()) == {b"b": b"B1", b"c": b"C2"} and persisted[TP(changelog, 0)] == 44

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
        zero = await table.write(out, 0, [(b"a", b"A1")])
        one = await table.write(out, 1, [(b"b", b"B1")])
        _acknowledge(producer.sent[0], 10)
        _acknowledge(producer.sent[1], 20)
        table.store_committed(0, zero)
        table.store_committed(1, one)
        # partition 1 was never opened here: its database stays closed, its offset unknown
        assert sorted(store._dbs) == [0]
        assert store._dbs[0][b"a"] == b"A1" and store.persisted_offset(TP(changelog, 0)) == 10

        # partition 0 revoked while a write is in flight: committed, not written, not reopened
        zero = await table.write(out, 0, [(b"a", b"A2")])
        store.revoke_partitions(table, {TP(changelog, 0)})
        _acknowledge(producer.sent[2], 11)
        table.store_committed(0, zero)
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
        batches = await table.write(Outputs(producer, {changelog: 2}), 0, [(b"a", b"A1")])
        _acknowledge(producer.sent[0], 10)
        table.store_committed(0, batches)
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


def _changelog_event(topic: str, partition: int, offset: int, key: bytes, value: bytes | None) -> SimpleNamespace:
    return SimpleNamespace(key=key, value=value, message=SimpleNamespace(
        tp=TP(topic, partition), partition=partition, offset=offset, key=key, value=value))


def test_the_memory_store_knows_its_offsets_and_keeps_standby_partitions(tmp_path: Path) -> None:
    from streams.worker.table import MemoryStore

    worker = _worker(tmp_path, "memory://")
    store, changelog = worker.table.data, worker.table.changelog_topic.get_topic_name()
    assert isinstance(store, MemoryStore)
    zero, one = TP(changelog, 0), TP(changelog, 1)
    assert store.persisted_offset(zero) is None  # nothing held: Faust reads the partition from its start
    store.apply_changelog_batch([_changelog_event(changelog, 0, 5, b"a", b"A1"),
                                 _changelog_event(changelog, 1, 3, b"b", b"B1"),
                                 _changelog_event(changelog, 0, 7, b"a", b"A2")], lambda k: k, lambda v: v)
    assert (store.persisted_offset(zero), store.persisted_offset(one)) == (7, 3)
    assert dict(store.data) == {b"a": b"A2", b"b": b"B1"}

    asyncio.run(store.on_recovery_completed({zero}, {one}))  # partition 1 a standby: kept, with its offset
    assert dict(store.data) == {b"a": b"A2", b"b": b"B1"} and store.persisted_offset(one) == 3
    asyncio.run(store.on_recovery_completed({zero}, set()))  # partition 1 no longer here at all
    assert dict(store.data) == {b"a": b"A2"} and store.persisted_offset(one) is None
    assert store.persisted_offset(zero) == 7


def test_records_faust_queued_before_a_bulk_read_went_further_are_skipped(tmp_path: Path) -> None:
    worker = _worker(tmp_path, "memory://")
    table, changelog = worker.table, worker.table.changelog_topic.get_topic_name()
    zero = TP(changelog, 0)
    # the bulk read (streams.worker.restore) brought partition 0 up to offset 9: a=A3, b=B1
    table._apply_records(zero, [SimpleNamespace(offset=8, key=b"a", value=b"A3"),
                                SimpleNamespace(offset=9, key=b"b", value=b"B1")])
    assert dict(table.data.data) == {b"a": b"A3", b"b": b"B1"} and table.data.persisted_offset(zero) == 9
    # then Faust's recovery applies what it had queued (older) and a record written since (newer)
    table.apply_changelog_batch([_changelog_event(changelog, 0, 6, b"a", b"A1"),
                                 _changelog_event(changelog, 0, 7, b"b", None),
                                 _changelog_event(changelog, 0, 10, b"c", b"C1"),
                                 _changelog_event(changelog, 0, 11, b"a", None)])
    assert dict(table.data.data) == {b"b": b"B1", b"c": b"C1"} and table.data.persisted_offset(zero) == 11
    assert table.key_partitions == {b"b": 0, b"c": 0}
