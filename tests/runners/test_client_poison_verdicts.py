"""The client's verdict reader meets records of any shape on the verdicts topic: it skips what is not
a verdict of its own and still answers the call that waits (a record it cannot use must not end the
reader task, or every later call would time out)."""

from __future__ import annotations

import asyncio

import msgpack

from streams.runners.client import LoopwatchClient


def test_poison_records_on_the_verdicts_topic_are_skipped_and_the_waiting_call_answered():
    async def run() -> None:
        client = LoopwatchClient("127.0.0.1:9092")
        waiting = asyncio.get_running_loop().create_future()
        client._verdicts.pending["e1"] = waiting
        for value in (bytes.fromhex("8180c0"), b"\xc1", b"[1]", msgpack.packb({"event_id": ["e1"]}),
                      msgpack.packb({"event_id": {"a": 1}}), msgpack.packb({"verdict": "allow"}), None, b""):
            client._verdicts.deliver(value)  # raises nothing
        assert not waiting.done()
        client._verdicts.deliver(msgpack.packb({"event_id": "e1", "verdict": "block"}))
        assert waiting.result() == {"event_id": "e1", "verdict": "block"}

    asyncio.run(run())

