"""streams.client without a broker: argument checks, partitioner, Verdict accessors."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.partitioner import murmur2

from streams.client import ClientClosedError, LoopwatchClient, Verdict, verdict_partition


@pytest.mark.parametrize("kwargs, match", [
    ({"on_timeout": "deny"}, "fail-open"),
    ({"codec": "avro"}, "codec"),
    ({"key_by": "agent"}, "key_by"),
], ids=["on_timeout", "codec", "key_by"])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LoopwatchClient("127.0.0.1:9092", **kwargs)


@pytest.mark.parametrize("key", [b"run-1", b"", b"agent:main:s0001", "ü-run".encode()], ids=["plain", "empty", "session", "utf8"])
@pytest.mark.parametrize("partitions", [1, 4, 7])
def test_verdict_partition_is_kafkas_murmur2(key, partitions):
    assert verdict_partition(key, partitions) == (murmur2(key) & 0x7FFFFFFF) % partitions


def test_publish_before_start_and_bad_events():
    client = LoopwatchClient("127.0.0.1:9092")

    async def run() -> None:
        with pytest.raises(ClientClosedError, match="not started"):
            await client.publish({"type": "tool_call", "run_id": "r"})
        client._started = True  # argument checks come before any I/O
        with pytest.raises(ValueError, match="takes a tool_call"):
            await client.check({"type": "tool_result", "run_id": "r"})
        with pytest.raises(ValueError, match="takes a tool_result or compaction_retry"):
            await client.report_result({"type": "tool_call", "run_id": "r"})
        with pytest.raises(ValueError, match="event type must be one of"):
            await client.publish({"type": "nope", "run_id": "r"})
        with pytest.raises(ValueError, match="no run id, session key or session id"):
            await client.check({"type": "tool_call", "tool_name": "read"})

    asyncio.run(run())


@pytest.mark.parametrize("verdict, record, allowed, message", [
    ("allow", {"detection": {"stuck": False}}, True, None),
    ("warn", {"detection": {"stuck": True, "detector": "generic_repeat", "message": "WARNING: x"}}, True, "WARNING: x"),
    ("block", {"block_reason": "CRITICAL: y", "detection": {"stuck": True}}, False, "CRITICAL: y"),
    ("abort", {"guard": {"abort": True, "message": "CRITICAL: z"}}, False, "CRITICAL: z"),
    ("ignore", {}, True, None),
    ("block", None, False, None),
], ids=["allow", "warn", "block", "abort", "ignore", "timed-out-block"])
def test_verdict_accessors(verdict, record, allowed, message):
    v = Verdict("e1", verdict, record, timed_out=record is None)
    assert v.allowed is allowed
    assert v.message == message
    assert (v.detection is not None) == bool(record and (record.get("detection") or {}).get("stuck"))
