"""streams.runners.client against the real broker and an in-process worker.

Checks that the client reads only the verdict partitions of its runs, that
those are where the worker's records land, that verdicts come back per
event (block on a loop, abort on a result after compaction), and the
fail-open / fail-closed timeouts.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaProducer

from streams.runners.client import LoopwatchClient, TopicNotFoundError
from streams.wire.keys import verdict_partition
from streams.wire.codecs import decode_event
from streams.detection import Engine, OpenClawConfig
from tests.worker_harness import consume_all, create_topics, running_worker, whole_topic, worker_settings

pytestmark = [pytest.mark.kafka]

ENABLED = OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}})


def _call(run: str, i: int, **extra) -> dict:
    return {"type": "tool_call", "run_id": run, "session_id": f"s-{run}", "tool_call_id": f"{run}-{i}",
            "tool_name": "read", "args": {"path": "/same"}, **extra}


@pytest.mark.timeout(60)
def test_verdict_partition_is_where_the_default_partitioner_puts_the_key(kafka_bootstrap, unique_topic):
    keys = [f"run-{i}".encode() for i in range(40)]

    async def run() -> list:
        await create_topics(kafka_bootstrap, [unique_topic], 5)
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            return [await (await producer.send(unique_topic, b"x", key=key)) for key in keys]
        finally:
            await producer.stop()

    metadata = asyncio.run(run())
    placed = [m.partition for m in metadata]
    assert placed == [verdict_partition(key, 5) for key in keys]
    assert len(set(placed)) > 1


@pytest.mark.timeout(120)
def test_check_reads_only_its_runs_partitions_and_gets_block_and_abort(kafka_bootstrap, tmp_path):
    async def run() -> None:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=4)
        async with running_worker(settings, Engine(ENABLED)):
            async with LoopwatchClient(kafka_bootstrap, events_topic=settings.input_topics[0],
                                       verdicts_topic=settings.verdicts_topic, timeout=20) as client:
                assert client.verdict_partitions == 4
                assert client.assigned_partitions == frozenset()
                loop_run = f"loop-{uuid.uuid4().hex[:6]}"
                verdicts = [await client.check({**_call(loop_run, i), "result": "same", "error": None})
                            for i in range(21)]
                assert client.assigned_partitions == {verdict_partition(loop_run.encode(), 4)}
                assert [v.verdict for v in verdicts[:10]] == ["allow"] * 10
                assert verdicts[10].verdict == "warn" and verdicts[10].detection["detector"] == "generic_repeat"
                assert verdicts[20].verdict == "block" and not verdicts[20].allowed
                assert verdicts[20].message.startswith("CRITICAL: Called read with identical arguments")
                assert all(not v.timed_out and v.record["run_id"] == loop_run for v in verdicts)
                assert len({v.event_id for v in verdicts}) == 21

                # post-compaction guard: the abort comes on the third identical result
                guard_run = f"guard-{uuid.uuid4().hex[:6]}"
                await client.report_result({"type": "compaction_retry", "run_id": guard_run,
                                            "session_id": f"s-{guard_run}"})
                outcomes = []
                for i in range(3):
                    call = await client.check(_call(guard_run, i, outcome_follows=True))
                    assert call.verdict == "allow"
                    outcomes.append(await client.report_result({
                        "type": "tool_result", "run_id": guard_run, "session_id": f"s-{guard_run}",
                        "tool_call_id": f"{guard_run}-{i}", "result": "same", "error": None}))
                assert [v.verdict for v in outcomes] == ["allow", "allow", "abort"]
                assert "after auto-compaction" in outcomes[2].message
                assert client.assigned_partitions == {verdict_partition(k.encode(), 4) for k in (loop_run, guard_run)}

                # many runs at once: concurrent checks, each gets its own verdict
                runs = [f"par-{i}-{uuid.uuid4().hex[:4]}" for i in range(12)]
                futures = [await client.publish({**_call(r, 0), "result": "x", "error": None}) for r in runs]
                results = await asyncio.gather(*futures)
                assert [v.record["run_id"] for v in results] == runs
                assert all(v.verdict == "allow" and not v.timed_out for v in results)

    asyncio.run(run())


_CLIENT_TIMEOUT_S = 20.0


@pytest.mark.timeout(120)
def test_timeouts_fail_open_or_closed(kafka_bootstrap, unique_topic):
    events, verdicts = f"{unique_topic}.events", f"{unique_topic}.verdicts"

    async def run() -> None:
        await create_topics(kafka_bootstrap, [events, verdicts], 2)  # no worker: no verdict ever comes
        # The client's own timeout is far above the per-call 0.5 s: a latency well under it shows the
        # per-call one applied, with room for a loaded machine's scheduling delays (never under 0.5 s).
        async with LoopwatchClient(kafka_bootstrap, events_topic=events, verdicts_topic=verdicts,
                                   timeout=_CLIENT_TIMEOUT_S) as open_:
            call = await open_.check({**_call("r1", 0), "result": 1, "error": None}, timeout=0.5)
            assert (call.verdict, call.timed_out, call.record) == ("allow", True, None)
            assert 0.5 <= call.latency_s < _CLIENT_TIMEOUT_S / 2
            result = await open_.report_result({"type": "tool_result", "run_id": "r1", "session_id": "s",
                                                "tool_call_id": "c"}, timeout=0.3)
        async with LoopwatchClient(kafka_bootstrap, events_topic=events, verdicts_topic=verdicts,
                                   on_timeout="block", codec="json") as closed:
            blocked = await closed.check({**_call("r2", 0), "result": 1, "error": None}, timeout=0.5)
            aborted = await closed.report_result({"type": "compaction_retry", "run_id": "r2",
                                                  "session_id": "s"}, timeout=0.3)
        assert (result.verdict, result.timed_out) == ("allow", True)
        assert (blocked.verdict, blocked.timed_out, blocked.allowed) == ("block", True, False)
        assert (aborted.verdict, aborted.timed_out) == ("abort", True)
        sent = await consume_all(kafka_bootstrap, events, 4, timeout=60)
        assert [r.key for r in sent] == [b"r1", b"r1", b"r2", b"r2"]
        assert sent[2].value.startswith(b"{")  # json codec

    asyncio.run(run())


@pytest.mark.timeout(30)
def test_start_fails_when_the_verdicts_topic_does_not_exist(kafka_bootstrap, unique_topic, caplog):
    async def run() -> None:
        client = LoopwatchClient(kafka_bootstrap, verdicts_topic=unique_topic, start_timeout=1)
        with pytest.raises(TopicNotFoundError, match="is it running"):
            await client.start()

    caplog.set_level("WARNING")
    asyncio.run(run())
    # the wait is announced when it starts, not only when it ends
    assert [r.getMessage() for r in caplog.records if "waiting up to" in r.getMessage()] == [
        f"loopwatch client: waiting up to 1 s for the verdicts topic {unique_topic!r} on {kafka_bootstrap} "
        "(the worker creates it when it starts)"]


@pytest.mark.timeout(120)
def test_events_kafka_refuses_fail_open_or_closed_at_once_and_invalid_ones_are_not_sent(kafka_bootstrap, tmp_path):
    big = "x" * 1_500_000

    async def run() -> None:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2)
        events_topic = settings.input_topics[0]
        async with running_worker(settings, Engine(ENABLED)):
            async with LoopwatchClient(kafka_bootstrap, events_topic=events_topic,
                                       verdicts_topic=settings.verdicts_topic, timeout=60) as client:
                run_id = f"big-{uuid.uuid4().hex[:6]}"
                # over the producer's max_request_size: the fail-open verdict at once, with the reason
                refused = await client.check({**_call(run_id, 0), "result": big, "error": None})
                assert (refused.verdict, refused.timed_out, refused.record) == ("allow", False, None)
                assert refused.latency_s < 30 and "over the producer's max_request_size of 1,048,576" in refused.error
                assert refused.message.startswith("loopwatch: the event could not be sent (the event is 1,500,")
                assert refused.message.endswith("failing open (on_timeout='allow'): going on without a loop check")
                # the documented flow: the call goes through, its large result is refused, the run goes on
                call = await client.check(_call(run_id, 1, outcome_follows=True))
                assert (call.verdict, call.timed_out, call.error) == ("allow", False, None)
                assert call.record["run_id"] == run_id and call.message is None
                result = await client.report_result({"type": "tool_result", "run_id": run_id,
                                                     "session_id": f"s-{run_id}", "tool_call_id": f"{run_id}-1",
                                                     "result": big, "error": None})
                assert (result.verdict, result.timed_out, result.record) == ("allow", False, None)
                after = await client.check({**_call(run_id, 2), "result": "small", "error": None})
                assert after.verdict == "allow" and after.record["tool_call_id"] == f"{run_id}-2"

                # no session_id: refused before sending, with the worker's reason
                with pytest.raises(ValueError, match=r"would dead-letter it\): an event needs a session_id"):
                    await client.check({"type": "tool_call", "run_id": run_id})

            # over the topic's max.message.bytes (the broker's default 1048588), under the producer's limit
            async with LoopwatchClient(kafka_bootstrap, events_topic=events_topic,
                                       verdicts_topic=settings.verdicts_topic, on_timeout="block", timeout=20,
                                       producer_options={"max_request_size": 3_000_000}) as closed:
                blocked = await closed.check({**_call(run_id, 3), "result": big, "error": None})
                aborted = await closed.report_result({"type": "tool_result", "run_id": run_id,
                                                      "session_id": f"s-{run_id}", "tool_call_id": f"{run_id}-3",
                                                      "result": big, "error": None})
                assert (blocked.verdict, blocked.timed_out, blocked.allowed) == ("block", False, False)
                assert blocked.error.startswith("the broker refused the event as too large (1,500,")
                assert blocked.message.endswith("failing closed (on_timeout='block'): the tool call is blocked")
                assert (aborted.verdict, aborted.timed_out) == ("abort", False)
                assert aborted.message.endswith("failing closed (on_timeout='block'): the run is stopped")

        # only the two small events reached the input topic: nothing to dead-letter, nothing too large
        sent = await whole_topic(kafka_bootstrap, events_topic, settings.partitions)
        assert [decode_event(r.value)["tool_call_id"] for r in sent] == [f"{run_id}-1", f"{run_id}-2"]

    asyncio.run(run())
