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



def test_other_clients_verdicts_are_skipped_unread_and_ours_delivered_in_either_codec(monkeypatch):
    import json

    from streams.runners import verdict_reader

    decoded: list[bytes] = []
    real = verdict_reader.decode_event
    monkeypatch.setattr(verdict_reader, "decode_event", lambda value: decoded.append(value) or real(value))

    async def run() -> tuple[dict, dict]:
        client = LoopwatchClient("127.0.0.1:9092")
        loop = asyncio.get_running_loop()
        ours, json_ours = loop.create_future(), loop.create_future()
        client._verdicts.pending.update(e1=ours, e2=json_ours)
        others = [msgpack.packb({"event_id": f"other{i}", "verdict": "allow", "detection": {"n": i}})
                  for i in range(50)]
        for value in others:
            client._verdicts.deliver(value)
        assert decoded == []  # another client's verdict costs a look at its first entry only
        late_key_first = msgpack.packb({"verdict": "warn", "event_id": "e1"})  # event_id not first: decoded in full
        client._verdicts.deliver(late_key_first)
        client._verdicts.deliver(json.dumps({"event_id": "e2", "verdict": "block"}).encode())
        return await ours, await json_ours

    ours, json_ours = asyncio.run(run())
    assert ours == {"verdict": "warn", "event_id": "e1"} and json_ours == {"event_id": "e2", "verdict": "block"}
    assert len(decoded) == 2
