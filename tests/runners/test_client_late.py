"""The client under fail-open: the deadline it sends, the results of calls it let run without a verdict
(marked ran_without_verdict, not waited for), and what a verdict of an ended run tells the runner."""

from __future__ import annotations

import asyncio

import pytest

from streams.runners.client import LoopwatchClient, Verdict
from streams.runners.gateway.answers import event_answer
from streams.wire.codecs import decode_event

from .test_client import _sending_client, _started_client

CALL = {"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": "c1", "tool_name": "read",
        "args": {"path": "/a"}, "outcome_follows": True}
RESULT = {"type": "tool_result", "run_id": "r", "session_id": "s", "tool_call_id": "c1", "result": "x",
          "error": None}


def test_a_fail_open_call_carries_its_deadline_and_its_result_is_marked_and_not_waited_for():
    client, producer = _sending_client(clock=lambda: 1_000.0)  # fake wall clock: 1,000 s after the epoch

    async def run() -> tuple[Verdict, Verdict, bool]:
        call = await client.check(CALL, timeout=0.01)  # nobody answers: fail-open
        future = await client.publish(RESULT, timeout=30)
        done_at_once = future.done()  # no second wait: resolved before publish() returned
        return call, await future, done_at_once

    call, result, done_at_once = asyncio.run(run())
    assert (call.verdict, call.timed_out, call.late) == ("allow", True, False)
    assert done_at_once is True
    assert (result.verdict, result.record, result.waited, result.late, result.timed_out) == \
        ("allow", None, False, True, False)
    assert result.message.startswith("loopwatch: this call ran without a verdict")
    [(_, sent_call), (key, sent_result)] = producer.records
    assert decode_event(sent_call)["deadline"] == 1_000_010  # now (ms) + the 0.01 s timeout
    assert decode_event(sent_call)["ts"] == 1_000_000
    sent = decode_event(sent_result)
    assert sent["ran_without_verdict"] is True and key == b"r"
    assert "deadline" not in sent
    assert client._verdicts.pending == {} and not client._late_calls  # forgotten once its result is sent


def test_a_result_after_a_verdict_that_came_is_waited_for_and_unmarked():
    client, producer = _sending_client(clock=lambda: 1_000.0)

    async def run() -> Verdict:
        future = await client.publish(CALL, timeout=5)
        [(_, sent)] = producer.records
        client._verdicts.deliver(_verdict_bytes(decode_event(sent)["event_id"], "allow"))
        await future
        return await client.report_result(RESULT, timeout=0.01)

    result = asyncio.run(run())
    assert result.timed_out is True and result.waited is True  # it waited (no worker: timed out)
    assert "ran_without_verdict" not in decode_event(producer.records[1][1])


def test_fail_closed_sends_no_deadline_and_marks_nothing():
    client, producer = _sending_client(on_timeout="block", clock=lambda: 1_000.0)

    async def run() -> Verdict:
        call = await client.check(CALL, timeout=0.01)
        assert call.verdict == "block"
        return await client.report_result(RESULT, timeout=0.01)

    result = asyncio.run(run())
    assert result.waited is True and result.verdict == "abort"
    assert "deadline" not in decode_event(producer.records[0][1])
    assert "ran_without_verdict" not in decode_event(producer.records[1][1])


def test_a_call_not_sent_at_all_still_marks_its_result():
    client = _started_client(clock=lambda: 1_000.0)
    client._connection.ready = False  # Kafka unreachable: the fail-open verdict at once
    client._connection.unreachable = "connection refused"

    async def run() -> tuple[Verdict, bool, int]:
        call = await client.check(CALL, timeout=5)
        assert call.error is not None and call.verdict == "allow"
        future = await client.publish(RESULT, timeout=5)
        return await future, future.done(), len(client._outbox)

    result, done_at_once, kept = asyncio.run(run())
    assert result.waited is False and result.verdict == "allow"
    assert done_at_once  # no second wait for a producer Kafka is not there to take
    assert kept == 2  # both events kept in order, sent once Kafka answers


def test_a_caller_marked_result_is_not_waited_for_either():
    client, producer = _sending_client()

    async def run() -> Verdict:
        return await client.report_result({**RESULT, "tool_call_id": "c7", "ran_without_verdict": True}, timeout=30)

    assert asyncio.run(run()).waited is False
    assert decode_event(producer.records[0][1])["ran_without_verdict"] is True


def _verdict_bytes(event_id: str, verdict: str) -> bytes:
    from streams.wire.codecs import encode_msgpack

    return encode_msgpack({"event_id": event_id, "verdict": verdict})


ENDED = {"verdict": "abort", "decision": "allow", "run_aborted": True,
         "run_ended": {"by": "compaction_loop_persisted", "reason": "CRITICAL: r",
                       "message": "loopwatch: this run has already ended (compaction_loop_persisted); ..."}}


def test_a_verdict_of_an_ended_run_says_so_to_the_runner_and_the_gateway():
    verdict = Verdict("e1", "abort", ENDED)
    assert verdict.allowed is False
    assert verdict.run_ended == ENDED["run_ended"]
    assert verdict.message == ENDED["run_ended"]["message"]
    assert (verdict.decided_by["kind"], verdict.decided_by["detector"]) == ("run_end", "compaction_loop_persisted")
    answer = event_answer(verdict, "allow")
    assert (answer["decision"], answer["detector"], answer["message"]) == \
        ("abort", "compaction_loop_persisted", ENDED["run_ended"]["message"])


@pytest.mark.parametrize("record, late", [({"verdict": "allow", "late": True}, True), ({"verdict": "allow"}, False)])
def test_the_late_flag_of_a_worker_verdict(record, late):
    assert Verdict("e1", "allow", record).late is late
