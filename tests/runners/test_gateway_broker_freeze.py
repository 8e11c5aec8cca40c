"""The gateway under load while the broker hangs (its JVM stopped with SIGSTOP) for longer than aiokafka's
request timeout (40 s: where the producer used to expire the records it held, and the events were lost).

On a broker of the module's own (tests/private_broker.py), with no worker: this is about the events, not the
verdicts (every answer is the gateway's ``on_timeout`` one). Senders post tool calls through the gateway before,
during and after the hang. Checked:

* during the hang every request is answered within the gateway's timeout (a slack for a loaded machine): 200
  with ``timed_out`` while the outbox takes the event, 503 with the outbox-full reason once it holds its bound;
* ``/readyz`` is 503 during the hang;
* after the broker resumes, every event answered 200 is in the events topic exactly once (nothing lost, nothing
  doubled: the producer is idempotent), and none answered 503 is there.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import aiohttp
import pytest

from streams.runners.gateway import GatewayConfig, serve
from streams.wire.codecs import decode_event
from tests.private_broker import free_port, running_broker
from tests.runners.gateway_support import call
from tests.runners.test_client_outage import _whole_topic
from tests.worker_harness import create_topics, worker_settings

pytestmark = pytest.mark.kafka

FREEZE_S = 45.0   # > aiokafka's request_timeout_ms (40 s)
TIMEOUT_S = 1.0   # the gateway's verdict wait
OUTBOX = 300      # events the gateway keeps for Kafka
SENDERS = 8
SLACK_S = 3.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from running_broker(tmp_path_factory.mktemp("kafka"))


@pytest.mark.timeout(300)
def test_accepted_events_reach_kafka_after_a_broker_hang_and_beyond_the_outbox_503(broker, tmp_path):
    settings = worker_settings(broker.bootstrap, tmp_path)
    topic = settings.input_topics[0]
    port = free_port()
    answers: list[tuple[str, int, dict, float, str]] = []  # (tool_call_id, status, body, seconds, phase)
    phase = "before"

    async def sender(http: aiohttp.ClientSession, n: int, stop: asyncio.Event) -> None:
        i = 0
        while not stop.is_set():
            event = call(f"frz{n}", i)
            started = time.monotonic()
            at = phase
            async with http.post(f"http://127.0.0.1:{port}/v1/events", json=event) as response:
                body = await response.json()
            answers.append((event["tool_call_id"], response.status, body, time.monotonic() - started, at))
            i += 1
            await asyncio.sleep(0.05)

    async def flow() -> tuple[int, int]:
        nonlocal phase
        await create_topics(broker.bootstrap, [topic, settings.verdicts_topic], settings.partitions)
        stop_gateway, listening = asyncio.Event(), asyncio.Event()
        config = GatewayConfig(timeout=TIMEOUT_S)
        gateway = asyncio.ensure_future(serve(
            broker.bootstrap, config, port=port, ready=lambda url: listening.set(), stop=stop_gateway,
            client_options={"events_topic": topic, "verdicts_topic": settings.verdicts_topic,
                            "outbox_events": OUTBOX, "stop_timeout": 60.0}))
        await asyncio.wait_for(listening.wait(), 60)
        stop_senders = asyncio.Event()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            senders = [asyncio.ensure_future(sender(http, n, stop_senders)) for n in range(SENDERS)]
            await asyncio.sleep(3)
            broker.freeze()
            try:
                phase = "frozen"
                await asyncio.sleep(FREEZE_S / 2)
                async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                    ready_frozen = response.status
                await asyncio.sleep(FREEZE_S / 2)
            finally:
                broker.thaw()
            phase = "after"
            await asyncio.sleep(5)
            stop_senders.set()
            await asyncio.gather(*senders)
        stop_gateway.set()
        await asyncio.wait_for(gateway, 120)  # the drain waits for the outbox to empty (stop_timeout 60 s)
        return ready_frozen, settings.partitions

    ready_frozen, partitions = asyncio.run(flow())
    events = [decode_event(v) for v in asyncio.run(_whole_topic(broker.bootstrap, topic, partitions))]
    in_kafka = Counter(e["tool_call_id"] for e in events if e["type"] == "tool_call")  # not /readyz's probes
    taken = [a for a in answers if a[1] == 200]
    refused = [a for a in answers if a[1] == 503]
    frozen = [a for a in answers if a[4] == "frozen"]
    print(f"\n{len(answers)} requests: {len(taken)} taken (200), {len(refused)} refused (503), {len(frozen)} during "
          f"the {FREEZE_S:g} s hang; events in Kafka: {sum(in_kafka.values())}")
    assert {status for _, status, _, _, _ in answers} <= {200, 503}
    assert len(refused) > 0 and len(taken) > OUTBOX  # the hang filled the outbox
    for _, _, body, _, _ in refused:
        assert body["error"].startswith("loopwatch outbox full: ") and "the event is not taken" in body["error"]
    # Answered in time during the hang (a request waits at most the timeout; a full outbox answers at once).
    assert max(seconds for _, _, _, seconds, _ in frozen) <= TIMEOUT_S + SLACK_S
    assert ready_frozen == 503
    # Nothing taken is lost, nothing is doubled, nothing refused was sent.
    assert [cid for cid, *_ in taken if in_kafka[cid] != 1] == []
    assert [cid for cid, *_ in refused if in_kafka[cid]] == []
    assert sum(in_kafka.values()) == len(taken)
