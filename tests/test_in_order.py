"""streams.consumer.InOrder: records of a partition are delivered only in order, from the sought position."""

from collections import namedtuple

from streams.consumer import InOrder

Record = namedtuple("Record", "offset")
TP = ("events", 0)


def run(first: int, last: int) -> list[Record]:
    return [Record(offset) for offset in range(first, last + 1)]


def offsets(records: list[Record]) -> list[int]:
    return [record.offset for record in records]


def test_nothing_before_the_seek_of_the_generation():
    order = InOrder()
    assert order.take(TP, run(0, 3), generation=1) == ([], None)
    order.reset({TP: 0}, generation=1)
    assert order.take(TP, run(0, 3), generation=2) == ([], None)  # a newer generation: not sought yet
    assert order.take(("events", 1), run(0, 3), generation=1) == ([], None)  # a partition with no position


def test_contiguous_runs_are_delivered_and_move_the_position():
    order = InOrder()
    order.reset({TP: 10}, generation=1)
    delivered, back = order.take(TP, run(10, 12), generation=1)
    assert (offsets(delivered), back) == ([10, 11, 12], None)
    delivered, back = order.take(TP, run(13, 13), generation=1)
    assert (offsets(delivered), back, order.positions[TP]) == ([13], None, 14)


def test_records_below_the_position_are_dropped():
    order = InOrder()
    order.reset({TP: 10}, generation=1)
    delivered, back = order.take(TP, run(7, 11), generation=1)
    assert (offsets(delivered), back) == ([10, 11], None)
    assert order.take(TP, run(5, 11), generation=1) == ([], None)


def test_records_beyond_the_position_mean_seek_back_then_a_repeat_is_a_real_gap():
    order = InOrder()
    order.reset({TP: 10}, generation=1)
    assert order.take(TP, run(15, 20), generation=1) == ([], 10)  # fetched before the seek: seek back
    delivered, back = order.take(TP, run(10, 12), generation=1)  # what came after seeking back
    assert (offsets(delivered), back) == ([10, 11, 12], None)
    assert order.take(TP, run(14, 16), generation=1) == ([], 13)
    delivered, back = order.take(TP, run(14, 16), generation=1)  # 13 again missing: the log's own gap
    assert (offsets(delivered), back, order.positions[TP]) == ([14, 15, 16], None, 17)
    assert order.take(TP, run(19, 19), generation=1) == ([], 17)  # a new gap is checked again


def test_a_reset_forgets_positions_and_gaps():
    order = InOrder()
    order.reset({TP: 10}, generation=1)
    assert order.take(TP, run(12, 12), generation=1) == ([], 10)
    order.reset({TP: 12}, generation=2)
    delivered, back = order.take(TP, run(12, 12), generation=2)
    assert (offsets(delivered), back) == ([12], None)
    assert order.take(TP, run(13, 13), generation=1) == ([], None)
