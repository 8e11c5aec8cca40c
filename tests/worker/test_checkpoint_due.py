"""Which partitions a checkpoint covers: busy ones at once, quiet ones once their events have waited long enough."""

import time
from types import SimpleNamespace

from aiokafka import TopicPartition

from streams.worker.checkpoint import Checkpoints
from streams.worker.settings import WorkerSettings
from streams.worker.states import States


class _Host(Checkpoints):
    """The worker's bookkeeping for checkpoints, without Kafka."""

    def __init__(self, **settings) -> None:
        self.settings = WorkerSettings(**settings)
        self.states = States({}, lambda state: b"")
        self._init_checkpoints()


def _batch(*parts):
    """``(topic, partition, first offset, count)`` -> the reader's batch shape."""
    return [(TopicPartition(topic, partition),
             [SimpleNamespace(offset=first + i) for i in range(count)]) for topic, partition, first, count in parts]


def test_a_partition_is_due_after_enough_events_or_once_its_first_event_waited_long_enough():
    host = _Host(checkpoint_partition_events=10, checkpoint_partition_interval_s=5.0)
    host._note_handled(_batch(("in", 0, 0, 10), ("in", 1, 0, 3), ("rekey", 1, 0, 2)), {b"a": 0, b"b": 1})
    assert host._due() == {0}  # 10 events; partition 1 has 5 (input and rekey together), only just now
    host._pending[1][1] -= 5.0  # its first event has waited the partition interval
    assert host._due() == {0, 1}


def test_a_snapshot_of_some_partitions_takes_theirs_and_every_send_and_leaves_the_others_pending():
    host = _Host(checkpoint_partition_events=10)
    host._note_handled(_batch(("in", 0, 0, 12), ("in", 1, 40, 2)), {b"a": 0, b"b": 1})
    host._expire_key(b"old", 1)
    host._outputs.extend(["send-0", "send-1"])
    outputs, handled, expired = host._snapshot({0})
    assert outputs == ["send-0", "send-1"]  # waiting for more acknowledgements than needed is safe
    assert {(tp.topic, tp.partition): offset for tp, offset in handled.items()} == {("in", 0): 11}
    assert expired == {}
    assert host.states._unencoded == {b"a": 0}  # the keys of partition 0 only, to encode
    assert host._dirty == {b"b": 1} and host._expired == {b"old": 1}
    assert [(tp.partition, offset) for tp, offset in host._handled.items()] == [(1, 41)]
    assert host._since_snapshot == 2 and list(host._pending) == [1]
    outputs, handled, expired = host._snapshot()  # every partition (a rebalance, a stop, checkpoint_max_events)
    assert outputs == [] and expired == {b"old": 1} and host.states._unencoded == {b"b": 1}
    assert not (host._dirty or host._handled or host._expired or host._pending) and host._since_snapshot == 0


def test_an_expired_key_makes_its_partition_pending_from_then_on():
    host = _Host(checkpoint_partition_interval_s=1.0)
    host._expire_key(b"old", 3)
    assert host._due() == set()
    count, since = host._pending[3]
    assert count == 0 and since <= time.monotonic()
    host._pending[3][1] -= 1.0
    assert host._due() == {3}
