"""Which failures start an outage (ridden out) and which crash the worker (streams/worker/outage.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import (KafkaConnectionError, KafkaError, KafkaTimeoutError, MessageSizeTooLargeError,
                             NotCoordinatorError, ProducerFenced, RequestTimedOutError)

from streams.worker.outage import is_broker_trouble, quiet_sender_failures


async def _coordinator_lookup_without_metadata() -> BaseException:
    """What aiokafka raises when a coordinator is looked up while the metadata names no broker, as a
    broker resuming from a hang answers for a moment (a transactional producer started then crashed
    every worker of a group)."""
    client = AIOKafkaClient(bootstrap_servers="127.0.0.1:9")  # never bootstrapped: no broker known
    try:
        await client.coordinator_lookup(0, "any-group")
    except BaseException as exc:  # noqa: BLE001  (what aiokafka raises is the point)
        return exc
    finally:
        await client.close()
    raise AssertionError("the lookup succeeded without any broker")


def test_aiokafkas_no_broker_in_metadata_assertion_is_broker_trouble():
    exc = asyncio.run(_coordinator_lookup_without_metadata())
    assert type(exc) is AssertionError and is_broker_trouble(exc)


def _wrapped(cause: BaseException) -> KafkaError:
    """``cause`` wrapped as aiokafka's transactional sender wraps what it met (a plain KafkaError from it)."""
    try:
        try:
            raise cause
        except BaseException as exc:
            raise KafkaError("Unexpected error during batch delivery") from exc
    except KafkaError as wrapped:
        return wrapped


async def _transactional_sender_losing_its_coordinator(lookup_error: BaseException | None = None) -> BaseException:
    """What every batch of a transactional producer fails with when the connection of its transaction
    coordinator lookup closes (the broker going down mid-request): aiokafka's own sender, in a transaction
    with a partition to add, its lookup answered by a closed connection. A broker restart under a
    checkpoint crashed the worker there. ``lookup_error``: what the lookup raises instead."""
    producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:9", transactional_id="lw-test-writer")

    async def closed(*args: object, **kwargs: object) -> None:
        raise lookup_error or KafkaConnectionError("Connection at 127.0.0.1:9 closed")

    producer.client.coordinator_lookup = closed
    transaction = producer._txn_manager
    transaction.set_pid_and_epoch(1000, 0)  # as after InitProducerId
    transaction.begin_transaction()
    transaction.maybe_add_partition_to_txn(TopicPartition("lw-test", 0))  # a first record: AddPartitionsToTxn
    sender = producer._sender
    try:
        await sender.start()
        await asyncio.wait_for(asyncio.wait([sender.sender_task]), 10)
        failed = sender.sender_task.exception()  # aiokafka fails every batch it holds with this one
        assert transaction.wait_for_transaction_end().exception() is failed  # and the transaction's commit
        return failed
    finally:
        await producer.stop()


def test_a_transactional_senders_lost_coordinator_connection_is_broker_trouble():
    exc = asyncio.run(_transactional_sender_losing_its_coordinator())
    assert type(exc) is KafkaError and "Unexpected error during batch delivery" in str(exc)
    assert isinstance(exc.__cause__.__cause__, KafkaConnectionError)  # what it wraps, wrapped once more
    assert is_broker_trouble(exc)


@pytest.mark.parametrize(("lookup_error", "line"), [
    (None, ("WARNING", "Unexpected error in sender routine: KafkaConnectionError('Connection at 127.0.0.1:9 "
                       "closed'), the broker's trouble (ridden out as an outage)", False)),
    (ValueError("a bug"), ("ERROR", "Unexpected error in sender routine", True)),  # a bug keeps its traceback
])
def test_the_senders_traceback_of_the_brokers_trouble_is_one_warning_line(caplog, logs_of, monkeypatch, lookup_error,
                                                                         line):
    sender_log = logging.getLogger("aiokafka.producer.sender")
    # without the rate limit a worker or client of an earlier test installed (it would hold the line back)
    monkeypatch.setattr(sender_log, "filters", [f for f in sender_log.filters if type(f).__name__ == "SenderFailureLine"])
    quiet_sender_failures()
    quiet_sender_failures()  # once per process
    logs_of("aiokafka.producer.sender", logging.WARNING)
    asyncio.run(_transactional_sender_losing_its_coordinator(lookup_error))
    said = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records
            if r.name == "aiokafka.producer.sender" and r.getMessage().startswith("Unexpected error")]
    assert said == [line]
    assert len([f for f in sender_log.filters if type(f).__name__ == "SenderFailureLine"]) == 1


@pytest.mark.parametrize(("exc", "trouble"), [
    (KafkaConnectionError("Connection at 127.0.0.1:9092 closed"), True),
    (KafkaTimeoutError(), True),
    (asyncio.TimeoutError(), True),
    (RequestTimedOutError(), True),
    (NotCoordinatorError(), True),
    (ProducerFenced(), False),  # another worker owns the partition: a lost partition, not an outage
    (MessageSizeTooLargeError(), False),
    (AssertionError("something else"), False),
    (_wrapped(ProducerFenced()), False),  # a fence however wrapped
    (_wrapped(ValueError("a bug")), False),
    (_wrapped(KafkaConnectionError("Connection at 127.0.0.1:9092 closed")), True),
    (ValueError("a bug"), False),
])
def test_what_counts_as_broker_trouble(exc, trouble):
    assert is_broker_trouble(exc) is trouble
