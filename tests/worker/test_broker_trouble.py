"""Which failures start an outage (ridden out) and which crash the worker (streams/worker/outage.py)."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import (KafkaConnectionError, KafkaTimeoutError, MessageSizeTooLargeError,
                             NotCoordinatorError, ProducerFenced, RequestTimedOutError)

from streams.worker.outage import is_broker_trouble


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


@pytest.mark.parametrize(("exc", "trouble"), [
    (KafkaConnectionError("Connection at 127.0.0.1:9092 closed"), True),
    (KafkaTimeoutError(), True),
    (asyncio.TimeoutError(), True),
    (RequestTimedOutError(), True),
    (NotCoordinatorError(), True),
    (ProducerFenced(), False),  # another worker owns the partition: a lost partition, not an outage
    (MessageSizeTooLargeError(), False),
    (AssertionError("something else"), False),
    (ValueError("a bug"), False),
])
def test_what_counts_as_broker_trouble(exc, trouble):
    assert is_broker_trouble(exc) is trouble
