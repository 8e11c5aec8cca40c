"""`loopwatch demo` without a broker: it stamps events as `loopwatch produce` does, and its
no-broker hint names the port. aiokafka's producer and consumer are replaced by fakes: the
"worker" answers every event sent with a verdict carrying the event's event_id.
(tests/commands/test_demo.py runs the real thing.)
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import aiokafka
import msgpack
import pytest
from click.testing import CliRunner

from streams.commands import loopwatch
from streams.commands.demo import broker as demo_broker, common as demo_common, session as demo_session

EVENTS = [  # one with event_id and an old ts, one with neither, one more without event_id
    {"event_id": "ex-1", "ts": 1764460800250, "type": "tool_call", "run_id": "run-1", "session_id": "s",
     "tool_call_id": "c1", "tool_name": "read", "args": {"path": "/a"}},
    {"type": "tool_call", "run_id": "run-1", "session_id": "s", "tool_call_id": "c2", "tool_name": "read",
     "args": {"path": "/b"}},
    {"ts": 1764460800750, "type": "tool_call", "run_id": "run-2", "session_id": "s", "tool_call_id": "c3",
     "tool_name": "exec", "args": {"command": "ls"}},
]


class FakeBroker:
    """What the fakes share: the records sent, and the verdicts the 'worker' made of them."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, dict]] = []
        self.verdicts: list[SimpleNamespace] = []

    def producer(self, **_kwargs) -> "FakeProducer":
        return FakeProducer(self)

    def consumer(self, *_topics, **_kwargs) -> "FakeConsumer":
        return FakeConsumer(self)


class FakeProducer:
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def flush(self) -> None: ...

    async def send(self, topic: str, value: bytes, key: bytes | None = None) -> asyncio.Future:
        event = msgpack.unpackb(value)
        offset = len(self.broker.sent)
        self.broker.sent.append((topic, key, event))
        verdict = {"type": event["type"], "event_id": event.get("event_id"), "run_id": event["run_id"],
                   "tool_name": event.get("tool_name"), "verdict": "allow",
                   "source": {"topic": topic, "partition": 0, "offset": offset}}
        self.broker.verdicts.append(SimpleNamespace(topic="verdicts", value=json.dumps(verdict).encode(),
                                                    timestamp=time.time() * 1000,
                                                    partition=0, offset=offset))
        future = asyncio.get_running_loop().create_future()
        future.set_result(SimpleNamespace(partition=0, offset=offset))
        return future


class FakeConsumer:
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.read = 0

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def getmany(self, timeout_ms: int = 0) -> dict:
        await asyncio.sleep(0.01)
        batch, self.read = self.broker.verdicts[self.read:], len(self.broker.verdicts)
        return {("verdicts", 0): batch} if batch else {}


@pytest.fixture
def broker(monkeypatch) -> FakeBroker:
    fake = FakeBroker()
    monkeypatch.setattr(aiokafka, "AIOKafkaProducer", fake.producer)
    monkeypatch.setattr(aiokafka, "AIOKafkaConsumer", fake.consumer)
    return fake


@pytest.fixture
def events_file(tmp_path) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    return path


def _demo_session(events_file: Path, timeout: float = 5.0) -> int:
    topics = {name: f"t.{name}" for name in ("events", "verdicts", "loop-events", "dead-letters")}
    return asyncio.run(demo_session.run_session("127.0.0.1:1", topics, str(events_file), None, timeout, True, None, 0))


def test_demo_stamps_ts_and_event_id_and_gets_every_verdict_of_id_less_events(broker, events_file, capsys):
    before = int(time.time() * 1000)
    assert _demo_session(events_file) == 0  # was: 1 after the timeout, "1 verdict(s) did not arrive"
    after = int(time.time() * 1000)
    sent = [event for _, _, event in broker.sent]
    assert len(sent) == 3
    assert all(before <= event["ts"] <= after for event in sent)  # the send time, also over an old ts
    assert sent[0]["event_id"] == "ex-1"  # kept
    assert re.fullmatch(r"[0-9a-f]{32}", sent[1]["event_id"]) and re.fullmatch(r"[0-9a-f]{32}", sent[2]["event_id"])
    assert sent[1]["event_id"] != sent[2]["event_id"]
    assert [{k: v for k, v in e.items() if k not in ("ts", "event_id")} for e in sent] == \
        [{k: v for k, v in e.items() if k not in ("ts", "event_id")} for e in EVENTS]
    err = capsys.readouterr().err
    assert "3 event(s) produced" in err and "3 verdict(s) received" in err


def test_demo_stamps_events_exactly_as_produce_does(broker, events_file):
    assert _demo_session(events_file) == 0
    demo_sent = list(broker.sent)
    broker.sent.clear()
    result = CliRunner().invoke(loopwatch, ["produce", "--bootstrap", "127.0.0.1:1", "--topic", "t.events",
                                       "-q", str(events_file)])
    assert result.exit_code == 0, result.output
    assert len(broker.sent) == len(demo_sent) == 3

    def shape(event: dict) -> dict:  # ts and filled-in ids differ by nature; which fields, and the rest, do not
        return {k: ("<ts>" if k == "ts" else "<new id>" if k == "event_id" and v != "ex-1" else v)
                for k, v in event.items()}

    assert [(t, k, shape(e)) for t, k, e in demo_sent] == [(t, k, shape(e)) for t, k, e in broker.sent]


def test_demo_files_a_verdict_without_event_id_under_its_source_record(broker, events_file, monkeypatch):
    # an event whose event_id is present but null is not filled in (as in produce); its verdict
    # still counts once, not under one shared "None" key
    events_file.write_text("".join(json.dumps({**e, "event_id": None}) + "\n" for e in EVENTS))
    assert _demo_session(events_file) == 0
    assert [event["event_id"] for _, _, event in broker.sent] == [None, None, None]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_no_broker_hint_starts_kafka_sh_on_the_requested_port(tmp_path):
    port = _closed_port()
    result = CliRunner().invoke(loopwatch, ["demo", "--bootstrap", f"127.0.0.1:{port}", "--metrics-port", "0",
                                       "--app-id", f"test-no-broker-{port}"])
    assert result.exit_code == 1
    assert (f"Error: no Kafka broker at 127.0.0.1:{port}; start one (KAFKA_PORT={port} "
            "deploy/kafka/kafka.sh start) or pass --bootstrap") in result.output
    assert not (demo_common.ROOT / ".work" / "demo" / f"test-no-broker-{port}").exists()


def test_no_broker_hint_for_a_remote_address_does_not_pretend_kafka_sh_serves_it():
    hint = demo_broker.no_broker_hint("kafka.example.com:9092")
    assert hint == ("no Kafka broker at kafka.example.com:9092; check the address, or start a local one "
                    "(KAFKA_PORT=9092 deploy/kafka/kafka.sh start) and pass "
                    "--bootstrap 127.0.0.1:9092")
    # kafka.sh's default controller port is KAFKA_PORT + 1: named only where there is no such port
    assert demo_broker.kafka_sh_start(65534) == "KAFKA_PORT=65534 deploy/kafka/kafka.sh start"
    assert demo_broker.kafka_sh_start(65535) == \
        "KAFKA_PORT=65535 KAFKA_CONTROLLER_PORT=65534 deploy/kafka/kafka.sh start"


def test_demo_runs_kafka_sh_for_the_bootstrap_port_whatever_kafka_port_is_exported(tmp_path, monkeypatch):
    script = tmp_path / "kafka.sh"
    script.write_text(f'#!/bin/sh\necho "$1 $KAFKA_PORT" >> {tmp_path / "calls"}\n')
    script.chmod(0o755)
    monkeypatch.setattr(demo_broker, "KAFKA_SH", script)
    monkeypatch.setenv("KAFKA_PORT", "9192")
    demo_broker.stop_broker("127.0.0.1:9092")
    assert demo_broker.kafka_sh("start", 9092).returncode == 0
    assert (tmp_path / "calls").read_text() == "stop 9092\nstart 9092\n"


def test_demo_starts_its_broker_on_an_exported_kafka_port(tmp_path, monkeypatch):
    """``KAFKA_PORT=N make run``: the demo's default broker is 127.0.0.1:N, started there by kafka.sh."""
    port = _closed_port()
    script = tmp_path / "kafka.sh"
    script.write_text(f'#!/bin/sh\necho "$1 $KAFKA_PORT" >> {tmp_path / "calls"}\nexit 3\n')  # a start that fails
    script.chmod(0o755)
    monkeypatch.setattr(demo_broker, "KAFKA_SH", script)
    monkeypatch.delenv("LOOPWATCH_BOOTSTRAP", raising=False)
    monkeypatch.setenv("KAFKA_PORT", str(port))
    result = CliRunner().invoke(loopwatch, ["demo", "--metrics-port", "0", "--app-id", f"test-kafka-port-{port}"])
    assert result.exit_code == 1
    assert f"no broker at 127.0.0.1:{port}: starting one" in result.output
    assert (tmp_path / "calls").read_text() == f"start {port}\n"
    shown = " ".join(CliRunner().invoke(loopwatch, ["demo", "--help"]).output.split())
    assert "default: (127.0.0.1:$KAFKA_PORT when KAFKA_PORT is exported, else 127.0.0.1:9092)" in shown
