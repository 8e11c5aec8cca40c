"""The changelog topics a worker creates let Kafka's cleaner act on a running system.

With the broker's defaults (segment.bytes 1 GiB, segment.ms 7 days) the active
segment, which neither compaction nor retention ever touches, held all a
worker wrote for days, and a restore re-read that history. Both the state table's
changelog and the fleet view's (one record per signature, tombstoned once its
windows expired) roll a segment every 10 minutes and compact early.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from streams.worker.table import MemoryStore
from tests.worker_harness import running_worker, worker_settings

pytestmark = [pytest.mark.kafka]


async def _configs(bootstrap: str, topics: list[str]) -> dict[str, dict[str, str]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
    finally:
        await admin.close()
    found = {}
    for response in responses:
        for _, _, _, name, entries in response.resources:
            found[name] = {entry[0]: entry[1] for entry in entries}
    return found


def test_state_and_fleet_changelogs_are_created_with_segments_the_cleaner_can_act_on(kafka_bootstrap, tmp_path):
    settings = worker_settings(kafka_bootstrap, tmp_path)  # the fleet view is on by default

    async def run() -> tuple[dict, list, list]:
        async with running_worker(settings) as worker:
            states = worker.table.changelog_topic.get_topic_name()
            windows = worker.fleet.table.changelog_topic.get_topic_name()
            stores = [type(worker.table.data), type(worker.fleet.table.data)]
            return await _configs(kafka_bootstrap, [states, windows]), [states, windows], stores

    configs, (states, windows), stores = asyncio.run(run())
    assert {k: configs[states][k] for k in ("cleanup.policy", "segment.ms", "segment.bytes",
                                            "min.cleanable.dirty.ratio", "delete.retention.ms")} == {
        "cleanup.policy": "compact", "segment.ms": "600000", "segment.bytes": str(64 * 1024 * 1024),
        "min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "3600000"}
    # the fleet view's: one record per signature (its live windows), tombstones for those without
    assert {k: configs[windows][k] for k in ("cleanup.policy", "segment.ms", "min.cleanable.dirty.ratio")} == {
        "cleanup.policy": "compact", "segment.ms": "600000", "min.cleanable.dirty.ratio": "0.1"}
    assert stores == [MemoryStore, MemoryStore]  # persisted offsets and standbys for both tables
