"""The client's outbox on its own, with a scripted producer: order kept through retried sends, the bounds,
an error that cannot pass given to the caller, a stop giving up what is held."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, MessageSizeTooLargeError

from streams.runners import outbox as outbox_module
from streams.runners.outbox import Outbox, OutboxFullError


class _Producer:
    """send() records the value and answers with a delivery the test settles (or the next scripted failure)."""

    def __init__(self, send_errors: list[Exception] | None = None) -> None:
        self.sent: list[bytes] = []
        self.deliveries: list[tuple[bytes, asyncio.Future]] = []
        self.send_errors = list(send_errors or [])

    async def send(self, topic, value=None, key=None):
        if self.send_errors:
            raise self.send_errors.pop(0)
        self.sent.append(value)
        delivery = asyncio.get_running_loop().create_future()
        self.deliveries.append((value, delivery))
        return delivery


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch):
    monkeypatch.setattr(outbox_module, "RETRY_FIRST_S", 0.0)
    monkeypatch.setattr(outbox_module, "RETRY_MOST_S", 0.0)


def _outbox(producer, max_events=10, max_bytes=10_000, prepared=None) -> Outbox:
    async def prepare(key: bytes) -> None:
        if prepared is not None:
            prepared.append(key)
    return Outbox("events", max_events, max_bytes, lambda: producer, prepare)


def test_events_go_out_in_order_and_one_that_fails_retriably_is_sent_again_before_later_ones():
    async def main():
        producer = _Producer(send_errors=[KafkaTimeoutError()])  # the first send: the batch could not be added
        prepared: list[bytes] = []
        box = _outbox(producer, prepared=prepared)
        pump = asyncio.ensure_future(box.run())
        entries = [box.put(b"k", f"e{i}".encode()) for i in range(3)]
        await _settle()
        assert producer.sent == [b"e0", b"e1", b"e2"]  # e0 failed once, went again first
        # Kafka expires e1's batch (a producer without idempotence): e1 is sent again, after which e2 is acked.
        producer.deliveries[0][1].set_result(None)
        producer.deliveries[1][1].set_exception(KafkaTimeoutError("expired"))
        producer.deliveries[2][1].set_result(None)
        await _settle()
        assert producer.sent == [b"e0", b"e1", b"e2", b"e1"]
        assert (len(box), entries[0].acked.done(), entries[1].acked.done(), entries[2].acked.done()) == \
            (1, True, False, True)
        producer.deliveries[3][1].set_result(None)
        await _settle()
        assert len(box) == 0 and box.bytes == 0 and entries[1].acked.result() is None
        assert await box.flushed(0.1) == 0 and box.retries == 2 and prepared[:3] == [b"k"] * 3
        pump.cancel()
    asyncio.run(main())


def test_a_full_outbox_refuses_by_events_and_by_bytes_and_takes_again_once_kafka_acknowledges():
    async def main():
        producer = _Producer()
        box = _outbox(producer, max_events=2, max_bytes=100)
        pump = asyncio.ensure_future(box.run())
        box.put(b"k", b"a" * 10)
        box.put(b"k", b"b" * 10)
        with pytest.raises(OutboxFullError, match=r"^loopwatch outbox full: 2 events \(22 bytes\) wait for Kafka"):
            box.put(b"k", b"c")
        await _settle()
        producer.deliveries[0][1].set_result(None)
        await _settle()
        with pytest.raises(OutboxFullError, match="the bound is 2 events / 100 bytes"):
            box.put(b"k", b"d" * 90)  # 11 + 91 bytes > 100
        box.put(b"k", b"e" * 10)
        assert len(box) == 2
        pump.cancel()
    asyncio.run(main())


def test_an_error_that_cannot_pass_is_the_callers_and_the_event_is_not_kept():
    async def main():
        producer = _Producer(send_errors=[MessageSizeTooLargeError()])
        box = _outbox(producer)
        pump = asyncio.ensure_future(box.run())
        big, later = box.put(b"k", b"x"), box.put(b"k", b"y")
        await _settle()
        with pytest.raises(MessageSizeTooLargeError):
            big.acked.result()
        assert producer.sent == [b"y"] and len(box) == 1 and later.handed.done()
        pump.cancel()
    asyncio.run(main())


def test_while_not_connected_events_wait_and_a_stop_gives_them_up():
    async def main():
        box = Outbox("events", 10, 10_000, lambda: None, lambda key: asyncio.sleep(0))
        pump = asyncio.ensure_future(box.run())
        entries = [box.put(b"k", b"v") for _ in range(3)]
        await asyncio.sleep(0.05)
        assert len(box) == 3 and not any(e.handed.done() for e in entries)
        assert await box.flushed(0.05) == 3
        assert box.abandon(KafkaConnectionError("stopped")) == 3
        assert len(box) == 0 and all(isinstance(e.acked.exception(), KafkaConnectionError) for e in entries)
        pump.cancel()
    asyncio.run(main())
