"""The OpenClaw plugin (openclaw-plugin/) against the real broker, a worker and ``loopwatch gateway``.

``openclaw-plugin/scripts/simulate-loop.js`` registers the plugin with an OpenClaw-shaped API and
calls its hook handlers with OpenClaw's documented payloads (docs/plugins/hooks.md "Tool call
policy", docs/plugins/hooks/tool-policy.md "Tool call observation", src/plugins/hook-types.ts in
openclaw/openclaw; cited in the script and in openclaw-plugin/test/openclaw-payloads.js). It prints
what each hook returned to OpenClaw; this test checks those against OpenClaw's contract: nothing
(no decision) on allow and warn, ``{"block": true, "blockReason": <OpenClaw's message>}`` on a
block, and on an abort every later call of the run blocked with the guard's message.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import urllib.request
from pathlib import Path

import pytest

from streams.detection import Engine, OpenClawConfig
from streams.detection.run_end import run_ended_message
from tests.worker_harness import ROOT, running_worker, worker_settings
from tests.private_broker import free_port as _free_port

pytestmark = [pytest.mark.kafka]

NODE = shutil.which("node")
SIMULATE = ROOT / "openclaw-plugin" / "scripts" / "simulate-loop.js"
LOOPWATCH = Path(sys.executable).with_name("loopwatch")
TOKEN = "plugin-test-token"

# warn on the 11th identical call (count 10), block on the 13th (identical outcomes 12 times);
# post-compaction guard at its default window of 3
CONFIG = OpenClawConfig({"tools": {"loopDetection": {
    "enabled": True, "warningThreshold": 10, "criticalThreshold": 12, "globalCircuitBreakerThreshold": 14}}})

WARNING = ("WARNING: You have called read 10 times with identical arguments. If this is not making progress, "
           "stop retrying and report the task as failed.")
BLOCK = ("CRITICAL: Called read with identical arguments and identical outcomes 12 times. "
         "Session execution blocked to prevent runaway loops.")
ABORT = ("CRITICAL: tool exec repeated 3 times with identical arguments and identical results within 3 attempts "
         "after auto-compaction. The compaction did not break the loop. Aborting to prevent runaway resource use.")




async def _healthy(url: str, gateway: asyncio.subprocess.Process, timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        if gateway.returncode is not None:
            raise AssertionError(f"loopwatch gateway exited with {gateway.returncode}")
        try:
            status = await asyncio.to_thread(lambda: urllib.request.urlopen(f"{url}/healthz", timeout=15).status)
            if status == 200:
                return
        except OSError:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"loopwatch gateway not healthy at {url} in {timeout} s")
        await asyncio.sleep(0.2)


@pytest.mark.skipif(NODE is None, reason="node is not installed (the OpenClaw plugin runs on Node)")
@pytest.mark.timeout(180)
def test_openclaw_hooks_get_allow_warn_block_and_abort_through_the_gateway(kafka_bootstrap, tmp_path):
    async def run() -> list[dict]:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2)
        async with running_worker(settings, Engine(CONFIG)):
            port = _free_port()
            gateway = await asyncio.create_subprocess_exec(
                str(LOOPWATCH), "gateway", "--bootstrap", kafka_bootstrap, "--port", str(port),
                "--events-topic", settings.input_topics[0], "--verdicts-topic", settings.verdicts_topic,
                "--key-by", "session", "--timeout", "10",
                env={**os.environ, "LOOPWATCH_GATEWAY_TOKEN": TOKEN},
                stdout=asyncio.subprocess.DEVNULL, stderr=(tmp_path / "gateway.log").open("wb"))
            try:
                url = f"http://127.0.0.1:{port}"
                await _healthy(url, gateway)
                node = await asyncio.create_subprocess_exec(
                    NODE, str(SIMULATE), "--gateway", url, "--token", TOKEN, "--calls", "13", "--json",
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                out, err = await asyncio.wait_for(node.communicate(), 60)
                assert node.returncode == 0, err.decode()
                return [json.loads(line) for line in out.decode().splitlines()]
            finally:
                gateway.terminate()
                await gateway.wait()

    steps = asyncio.run(run())
    before = {(s["run"].rsplit("-", 1)[1], s["n"]): s for s in steps if s["hook"] == "before_tool_call"}

    # the repeated read: allow x10, warn (logged, no decision) at 11, allow at 12 (deduplicated), block at 13
    for n in range(1, 13):
        assert before[("repeat", n)]["returned"] is None, n
    assert before[("repeat", 11)]["logged"] == [f"warn: loopwatch: {WARNING}"]
    assert all(not before[("repeat", n)]["logged"] for n in range(1, 13) if n != 11)
    assert before[("repeat", 13)]["returned"] == {"block": True, "blockReason": BLOCK}
    assert not any(s["hook"] == "after_tool_call" and s["run"].endswith("repeat") and s["n"] == 13 for s in steps)

    # the loop across a compaction: the 3rd identical outcome after it aborts the run ...
    after = {s["n"]: s for s in steps if s["hook"] == "after_tool_call" and s["run"].endswith("compaction")}
    assert [after[n]["logged"] for n in (1, 2, 3)] == [[], [], []]
    assert after[4]["logged"] == [f"error: loopwatch: {ABORT}"]
    # ... and OpenClaw gets the block object for the run's next call: the run has ended, in the guard's words
    assert before[("compaction", 5)]["returned"] == {
        "block": True, "blockReason": run_ended_message("compaction_loop_persisted", ABORT)}
    assert [before[("compaction", n)]["returned"] for n in (1, 2, 3, 4)] == [None] * 4
