"""Outputs.add: a record whose key leaves no room goes without the key, at the key's partition."""

from __future__ import annotations

from streams.wire.keys import verdict_partition
from streams.worker.outputs import Outputs
from tests.worker.test_table_writes import _Producer


class _Recording(Outputs):
    """Records what add() queues (topic, partition, key, value size) instead of building batches."""

    queued: list[tuple[str, int, bytes | None, int]]

    def add_to(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        self.queued.append((topic, partition, key, len(value or b"")))


def test_a_key_that_leaves_no_room_is_left_out_and_the_partition_kept():
    out = _Recording(_Producer(), {"verdicts": 4})
    out.queued = []
    huge = b"k" * 999_000
    out.add("verdicts", huge, b"v" * 2_000)  # 1,001,000 bytes with the key
    out.add("verdicts", huge, b"v" * 1_000)  # 1,000,000: fits
    out.add("verdicts", b"r1", b"v" * 2_000)
    assert out.queued == [("verdicts", verdict_partition(huge, 4), None, 2_000),
                          ("verdicts", verdict_partition(huge, 4), huge, 1_000),
                          ("verdicts", verdict_partition(b"r1", 4), b"r1", 2_000)]
