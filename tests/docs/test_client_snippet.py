"""The Python client's snippet in docs/runners/python-client.md, run as printed against a worker on the real broker.

The worker runs with examples/openclaw.json (OpenClaw's defaults, detectors on) on the client's default topics;
the snippet repeats one read: the 11th is warned, the 21st and 22nd are blocked, with OpenClaw's messages.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streams.detection import load_config, Engine
from tests.docs.test_code_blocks import BLOCKS
from tests.worker_harness import running_worker, worker_settings

pytestmark = [pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]


async def default_topics(bootstrap: str, partitions: int = 2) -> int:
    """Create the client's default topics (or keep them, on a broker that has them); their partition count."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        for name in ("loopwatch.events", "loopwatch.verdicts"):
            try:
                await admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=10_000)
            except TopicAlreadyExistsError:
                pass
        for _ in range(50):  # a topic just created may be described before its partitions are
            described = await admin.describe_topics(["loopwatch.events", "loopwatch.verdicts"])
            counts = {len(topic["partitions"]) for topic in described}
            if 0 not in counts:
                break
            await asyncio.sleep(0.1)
    finally:
        await admin.close()
    assert len(counts) == 1, f"loopwatch.events and loopwatch.verdicts differ in partitions on {bootstrap}"
    return counts.pop()


@pytest.mark.timeout(180)
def test_the_python_client_snippet_runs_as_printed(kafka_bootstrap, tmp_path):
    [snippet] = [body for where, language, _, body in BLOCKS
                 if where.startswith("docs/runners/python-client.md") and language == "python"]
    script = tmp_path / "snippet.py"
    script.write_text(snippet)

    async def main() -> subprocess.CompletedProcess:
        partitions = await default_topics(kafka_bootstrap)
        settings = worker_settings(kafka_bootstrap, tmp_path, input_topics=["loopwatch.events"],
                                   verdicts_topic="loopwatch.verdicts", partitions=partitions)
        async with running_worker(settings, Engine(load_config(str(ROOT / "examples" / "openclaw.json")))):
            return await asyncio.to_thread(
                subprocess.run, [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                env={**os.environ, "LOOPWATCH_BOOTSTRAP": kafka_bootstrap})

    result = asyncio.run(main())
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 22
    assert [line.split()[1] for line in lines] == ["allow"] * 10 + ["warn"] + ["allow"] * 9 + ["block"] * 2
    assert lines[10].startswith("10 warn WARNING: You have called read 10 times with identical arguments.")
    assert lines[20].startswith("20 block CRITICAL: Called read with identical arguments and identical outcomes 20")
