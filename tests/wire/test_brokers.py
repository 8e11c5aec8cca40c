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
