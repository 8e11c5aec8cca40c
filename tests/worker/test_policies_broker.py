"""A loopwatch policy through the real broker: the worker escalates a block that never ends.

The worker reads the policy from its config file (``policies`` beside ``tools``), publishes the
policy's abort as the verdict, names the rule in the verdict's ``decided_by`` field, and publishes a
loop event with the policy's own detector; every verdict equals the offline replay's.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import msgpack
import pytest

from streams.detection import Engine, load_config
from streams.offline.replay import Replayer
from streams.wire.codecs import read_event_file
from tests.worker_harness import consume_all, encode, produce, running_worker, whole_topic, worker_settings

pytestmark = [pytest.mark.kafka]

EVENTS = Path(__file__).resolve().parents[2] / "examples" / "policies" / "blocked-forever.jsonl"
CONFIG = {"tools": {"loopDetection": {"enabled": True}}, "policies": {"escalation": {"consecutiveBlocks": 3}}}


@pytest.mark.timeout(120)
def test_worker_applies_the_escalation_policy_from_its_config_file(kafka_bootstrap, tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps(CONFIG))
    settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2, config=config)
    events = [r.event for r in read_event_file(EVENTS)]
    replayer = Replayer(Engine(load_config(config)), key_by="run")
    want = [replayer.apply(e)["verdict"] for e in events]
    assert want[20:] == ["block", "block"] + ["abort"] * 8

    async def run() -> list[dict]:
        async with running_worker(settings):
            await produce(kafka_bootstrap, settings.input_topics[0], [(b"run-stuck", encode(e)) for e in events])
            verdicts = await consume_all(kafka_bootstrap, settings.verdicts_topic, len(events), timeout=60)
        return [msgpack.unpackb(r.value) for r in verdicts]

    verdicts = asyncio.run(run())
    assert [v["event_id"] for v in verdicts] == [e["event_id"] for e in events]
    assert [v["verdict"] for v in verdicts] == want
    assert verdicts[22]["policy"]["name"] == "escalation" and verdicts[22]["decision"] == "block"
    loop_events = [msgpack.unpackb(r.value) for r in
                   asyncio.run(whole_topic(kafka_bootstrap, settings.loop_events_topic, settings.partitions))]
    # the escalation ends the run at the 23rd call; every later call is refused: the run had ended
    firsts = [(e["kind"], e["action"], e["rule"], e["event_id"]) for e in loop_events
              if e["detector"] == "escalation"]
    assert firsts == [("escalation", "abort", "escalation", "blk-023")] + \
        [("run_end", "abort", None, f"blk-{i:03d}") for i in range(24, 31)]
    assert verdicts[22]["decided_by"]["kind"] == "escalation"
    assert [v["decided_by"]["kind"] for v in verdicts[23:]] == ["run_end"] * 7
