"""deploy/kafka/kafka.sh with real brokers on two free port pairs (never the test broker's).

`kafka.sh with` on port B starts B's own broker while A runs, and stops only B; the readiness
probe (wait_ready.py) leaves no probe topic behind. Own KAFKA_WORK, the jars linked from
<repo>/.work/kafka/libs (kafka.sh fetches them there if missing). About 20 s on 2 cores (two broker
starts: a few minutes on a loaded machine, within kafka.sh's own start timeout, which the test keeps).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.test_kafka_sh import _alive, _free_ports, _open, _wait_gone
from tests.private_broker import KAFKA_SH_BOUND_S

pytestmark = [pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]
KAFKA_SH = ROOT / "deploy" / "kafka" / "kafka.sh"
LIST_TOPICS = """
import asyncio, sys
from aiokafka.admin import AIOKafkaAdminClient
async def main():
    admin = AIOKafkaAdminClient(bootstrap_servers=sys.argv[1])
    await admin.start()
    try:
        print("topics:", " ".join(sorted(await admin.list_topics())))
    finally:
        await admin.close()
asyncio.run(main())
"""


def _topics(port: int) -> list[str]:
    out = subprocess.run([sys.executable, "-c", LIST_TOPICS, f"127.0.0.1:{port}"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    return out.split()[1:]


@pytest.mark.timeout(2 * KAFKA_SH_BOUND_S + 60)
def test_with_on_another_port_starts_and_stops_its_own_broker(tmp_path):
    port_a, cport_a, port_b, cport_b = _free_ports(4)
    work = tmp_path / "work"
    work.mkdir()
    (work / "libs").symlink_to(ROOT / ".work" / "kafka" / "libs")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "LOOPWATCH_KAFKA"))}
    # KAFKA_PYTHON: the readiness probe runs with this interpreter, not <checkout>/.venv (which may not exist)
    base.update(KAFKA_WORK=str(work), KAFKA_HEAP_OPTS="-Xms128m -Xmx512m", KAFKA_PYTHON=sys.executable)

    def run(action: str, port: int, cport: int, *cmd: str) -> subprocess.CompletedProcess:
        env = {**base, "KAFKA_PORT": str(port), "KAFKA_CONTROLLER_PORT": str(cport)}
        return subprocess.run([str(KAFKA_SH), action, *cmd], env=env, capture_output=True, text=True,
                              timeout=KAFKA_SH_BOUND_S)

    pid_a = None
    try:
        started = run("start", port_a, cport_a)
        assert started.returncode == 0, started.stdout + started.stderr
        pid_a = int((work / f"port-{port_a}" / "kafka.pid").read_text())
        assert f"wait_ready: Kafka at 127.0.0.1:{port_a} ready" in started.stdout
        assert [t for t in _topics(port_a) if t.startswith("loopwatch.probe")] == []  # the probe cleaned up

        listing = f"{sys.executable} -c '{LIST_TOPICS}' \"$LOOPWATCH_KAFKA_BOOTSTRAP\""
        with_b = run("with", port_b, cport_b, "bash", "-c", listing)
        assert with_b.returncode == 0, with_b.stdout + with_b.stderr
        assert f"ready on 127.0.0.1:{port_b}" in with_b.stdout
        pid_b = int(re.search(r"stopping broker \(pid (\d+)\)", with_b.stdout).group(1))
        assert pid_b != pid_a and _wait_gone(pid_b, 30)
        topics_b = re.search(r"^topics: (.*)$", with_b.stdout, re.M).group(1).split()
        assert "__consumer_offsets" in topics_b and not [t for t in topics_b if t.startswith("loopwatch.probe")]
        assert not _open(port_b)

        status_a = run("status", port_a, cport_a)
        assert status_a.returncode == 0 and f"(pid {pid_a}," in status_a.stdout
        assert _alive(pid_a) and _open(port_a)
    finally:
        stopped = run("stop", port_a, cport_a)
    assert pid_a is None or (f"stopping broker (pid {pid_a})" in stopped.stdout and _wait_gone(pid_a, 30))
