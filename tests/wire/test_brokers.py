"""Bootstrap addresses are checked before any connection (streams.wire.brokers), by every command and the client."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from streams.wire.brokers import bootstrap_servers
from streams.commands import loopwatch
from streams.runners.client import LoopwatchClient


@pytest.mark.parametrize("given, servers", [
    ("127.0.0.1:9092", "127.0.0.1:9092"),
    (" k1:9092 , k2:9093 ", "k1:9092,k2:9093"),
    ("kafka://k1:9092;kafka://k2:9093", "k1:9092,k2:9093"),
    ("[::1]:9092", "[::1]:9092"),
])
def test_host_port_lists(given, servers):
    assert bootstrap_servers(given) == servers


@pytest.mark.parametrize("given, says", [
    ("127.0.0.1", "'127.0.0.1' has no port: give host:port (e.g. 127.0.0.1:9092)"),
    ("k1:9092,k2", "'k2' has no port: give host:port (e.g. k2:9092)"),
    ("::1", "'::1' has no port: give host:port (e.g. [::1]:9092)"),
    ("127.0.0.1:", "'127.0.0.1:': the port must be a number from 1 to 65535"),
    ("127.0.0.1:abc", "'127.0.0.1:abc': the port must be a number from 1 to 65535"),
    ("127.0.0.1:0", "'127.0.0.1:0': the port must be a number from 1 to 65535"),
    ("127.0.0.1:65536", "'127.0.0.1:65536': the port must be a number from 1 to 65535"),
    (" , ", "a broker address is needed, e.g. 127.0.0.1:9092"),
])
def test_bad_addresses_are_named(given, says):
    with pytest.raises(ValueError) as raised:
        bootstrap_servers(given)
    assert str(raised.value) == says


@pytest.mark.parametrize("command", [["produce", "examples/events.jsonl"], ["tail"], ["demo", "--once"]])
def test_commands_refuse_a_bootstrap_without_port_before_connecting(command):
    result = CliRunner().invoke(loopwatch, [*command, "--bootstrap", "127.0.0.1"])
    assert result.exit_code == 2
    assert "Invalid value for '--bootstrap'" in result.output and "'127.0.0.1' has no port" in result.output


def test_the_client_checks_its_address_and_timeouts():
    with pytest.raises(ValueError, match="'localhost' has no port"):
        LoopwatchClient("localhost")
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds, got 0"):
        LoopwatchClient("localhost:9092", timeout=0)
    assert LoopwatchClient("kafka://localhost:9092").bootstrap == "localhost:9092"


@pytest.mark.parametrize("command", [["gateway"], ["produce"], ["tail"], ["fleet", "list"], ["fleet", "clear"],
                                     ["demo"]])
def test_every_command_that_talks_to_kafka_takes_the_same_broker(monkeypatch, command):
    """One order for all (streams.wire.brokers.default_bootstrap): --bootstrap, LOOPWATCH_BOOTSTRAP,
    127.0.0.1:$KAFKA_PORT, 127.0.0.1:9092; the worker's settings too."""
    import click

    from streams.worker.settings import WorkerSettings

    cmd: click.Command = loopwatch
    for name in command:  # the sub-commands are loaded when asked for
        cmd = cmd.get_command(click.Context(cmd), name)  # type: ignore[attr-defined]
    param = next(p for p in cmd.params if p.name == "bootstrap")

    def taken(*args: str) -> str:
        ctx = click.Context(cmd)
        parser = cmd.make_parser(ctx)
        opts, _, _ = parser.parse_args(list(args))
        return param.handle_parse_result(ctx, opts, [])[0]

    monkeypatch.delenv("LOOPWATCH_BOOTSTRAP", raising=False)
    monkeypatch.delenv("LOOPWATCH_BROKER", raising=False)
    monkeypatch.delenv("KAFKA_PORT", raising=False)
    assert taken() == "127.0.0.1:9092" and WorkerSettings().broker == "kafka://127.0.0.1:9092"
    monkeypatch.setenv("KAFKA_PORT", "9192")
    assert taken() == "127.0.0.1:9192" and WorkerSettings().broker == "kafka://127.0.0.1:9192"
    monkeypatch.setenv("KAFKA_PORT", "not a port")
    assert taken() == "127.0.0.1:9092"
    monkeypatch.setenv("KAFKA_PORT", "9192")
    monkeypatch.setenv("LOOPWATCH_BOOTSTRAP", "k1:9093")
    assert taken() == "k1:9093" and WorkerSettings().broker == "kafka://k1:9093"
    assert taken("--bootstrap", "k2:9094") == "k2:9094" and WorkerSettings(broker="k2:9094").broker == "kafka://k2:9094"
    monkeypatch.setenv("LOOPWATCH_BOOTSTRAP", "")  # empty: unset
    assert taken() == "127.0.0.1:9192" and WorkerSettings().broker == "kafka://127.0.0.1:9192"
    shown = " ".join(CliRunner().invoke(loopwatch, [*command, "--help"]).output.split())
    assert "LOOPWATCH_BOOTSTRAP; default: (127.0.0.1:$KAFKA_PORT when KAFKA_PORT is exported, else 127.0.0.1:9092)" \
        in shown
