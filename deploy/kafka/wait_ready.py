"""Block until a Kafka broker can really serve loopwatch: metadata, group + transaction
coordinators, and a produce/consume round trip on a probe topic.

usage: python wait_ready.py [BOOTSTRAP=127.0.0.1:9092] [TIMEOUT_S=60]   exit 0 ready, 1 not ready

Why more than "the port is open": on a fresh KRaft node the port opens before the internal
topics exist. FindCoordinator makes the broker create __consumer_offsets (group) and
__transaction_state (transactions); doing it here means the first test does not pay for it,
and a broker whose single-node RF settings are wrong fails here, not in some random test.

The probe topic has a fresh name per call (two probes of one broker never share it) and is
deleted again at the end, ready or not, so a long-lived broker does not collect probe topics.
"""

import asyncio
import logging
import sys
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

PROBE_PREFIX = "loopwatch.probe."  # + random hex; auto-created with num.partitions (1)
GROUP, TXN = 0, 1  # FindCoordinator key types

logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # retries are expected noise


async def check(bootstrap: str, topic: str, tried: list[str]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await admin.start()
        await admin.list_topics()
        await admin.find_coordinator("loopwatch-probe", GROUP)
        await admin.find_coordinator("loopwatch-probe", TXN)
    finally:
        await admin.close()

    payload = f"probe-{time.time_ns()}".encode()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=5000)
    await producer.start()
    try:
        tried.append(topic)  # from here on the broker may have auto-created it
        meta = await producer.send_and_wait(topic, payload)
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, meta.partition)
        consumer.assign([tp])
        consumer.seek(tp, meta.offset)
        msg = await asyncio.wait_for(consumer.getone(), 10)
        if msg.value != payload:
            raise RuntimeError(f"probe read back {msg.value!r}, wrote {payload!r}")
    finally:
        await consumer.stop()


async def delete_topic(bootstrap: str, topic: str) -> bool:
    """Delete ``topic`` if it exists; True if it was deleted. Errors propagate."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await admin.start()
        if topic not in await admin.list_topics():
            return False
        await admin.delete_topics([topic], timeout_ms=5000)
        return True
    finally:
        await admin.close()


async def wait_ready(bootstrap: str, timeout: float, topic: str | None = None) -> float:
    topic = topic or PROBE_PREFIX + uuid.uuid4().hex[:12]
    t0 = time.monotonic()
    last: BaseException | None = None
    tried: list[str] = []
    try:
        while time.monotonic() - t0 < timeout:
            try:
                await asyncio.wait_for(check(bootstrap, topic, tried), max(1.0, timeout - (time.monotonic() - t0)))
                return time.monotonic() - t0
            except Exception as exc:  # refused, CoordinatorNotAvailable, leader not yet elected, ...
                last = exc
            await asyncio.sleep(0.5)
        raise TimeoutError(f"Kafka at {bootstrap} not ready after {timeout:.0f}s: {last!r}")
    finally:
        if tried:
            try:  # best effort: cleaning up never changes the verdict
                await asyncio.wait_for(delete_topic(bootstrap, topic), 10)
            except Exception:
                pass


def main() -> int:
    bootstrap = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092"
    timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    try:
        took = asyncio.run(wait_ready(bootstrap, timeout))
    except TimeoutError as exc:
        print(f"wait_ready: {exc}", file=sys.stderr)
        return 1
    print(f"wait_ready: Kafka at {bootstrap} ready (coordinators + round trip, {took:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
