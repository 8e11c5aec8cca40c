"""A command that cannot reach Kafka says so in one line of its own, without aiokafka's ERROR line per bootstrap
address before it (streams.wire.logs.quiet_kafka_client_logs, installed by the command group)."""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError

from streams.wire.logs import BootstrapFailures, cannot_reach, quiet_kafka_client_logs

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as sock:  # bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _loopwatch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from streams.cli import main; main()", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [["tail"], ["produce", "examples/events.jsonl"], ["fleet", "list"],
                                     ["worker", "--metrics-port", "0"]])
def test_a_command_without_a_broker_prints_one_line_with_the_reason(command):
    port = _closed_port()
    done = _loopwatch(*command, "--bootstrap", f"127.0.0.1:{port}")
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("loopwatch worker: ")]
    assert lines == [f"Error: cannot reach Kafka at 127.0.0.1:{port}: [Errno 111] Connect call failed "
                     f"('127.0.0.1', {port})"]


def test_two_addresses_that_refuse_are_both_named():
    first, second = _closed_port(), _closed_port()
    done = _loopwatch("tail", "--bootstrap", f"127.0.0.1:{first},127.0.0.1:{second}")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: cannot reach Kafka at 127.0.0.1:{first},127.0.0.1:"
                                                   f"{second}: "), lines
    for port in (first, second):
        assert f"127.0.0.1:{port}: [Errno 111] Connect call failed ('127.0.0.1', {port})" in lines[0]


def test_the_filter_holds_back_only_the_bootstrap_line_and_other_errors_keep_their_own_text():
    held = BootstrapFailures()
    record = logging.LogRecord("aiokafka", logging.ERROR, "client.py", 216, 'Unable connect to "%s:%s": %s',
                               ("k1", 9092, OSError("refused")), None)
    node = logging.LogRecord("aiokafka", logging.ERROR, "client.py", 435, "Unable connect to node with id %s: %s",
                             (1, OSError("refused")), None)
    assert held.filter(record) is False and held.filter(node) is True
    assert held.reasons == {"k1:9092": "refused"}
    quiet_kafka_client_logs()  # the module's own holder is empty: the exception's text, its type named once
    assert cannot_reach("k1:9092", KafkaConnectionError("Unable to bootstrap from [k1]")) == \
        "cannot reach Kafka at k1:9092: KafkaConnectionError: Unable to bootstrap from [k1]"
    assert cannot_reach("k1:9092", TimeoutError("slow")) == "cannot reach Kafka at k1:9092: TimeoutError: slow"


def test_the_client_in_a_command_says_why_kafka_is_unreachable_in_the_reason_aiokafka_gave():
    # the gateway's client: aiokafka's own line is held back, so its reason goes into the client's warning
    from streams.runners.client import LoopwatchClient

    quiet_kafka_client_logs()
    port = _closed_port()

    async def unreachable() -> str | None:
        client = LoopwatchClient(f"127.0.0.1:{port}", start_timeout=1.0)
        await client.start()
        try:
            return client._connection.unreachable
        finally:
            await client.stop()

    reason = asyncio.run(unreachable())
    assert reason is not None and reason.startswith("[Errno 111]"), reason
