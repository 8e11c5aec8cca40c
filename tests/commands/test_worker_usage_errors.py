"""``loopwatch worker`` refuses a bad setting in the flag's own words: no pydantic ``Value error,`` prefix."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from streams.commands import loopwatch

_BOOTSTRAP = "--bootstrap (LOOPWATCH_BROKER, else LOOPWATCH_BOOTSTRAP)"


@pytest.mark.parametrize("args, env, says", [
    (["--bootstrap", "127.0.0.1"], {},
     f"{_BOOTSTRAP}: '127.0.0.1' has no port: give host:port (e.g. 127.0.0.1:9092)"),
    (["--bootstrap", "http://k1:9092"], {},
     f"{_BOOTSTRAP}: 'http://k1:9092': a broker URL is kafka://host:port (or just host:port)"),
    ([], {"LOOPWATCH_BROKER": "k1:0"}, f"{_BOOTSTRAP}: 'k1:0': the port must be a number from 1 to 65535"),
    (["--store", "redis://"], {}, '--store (LOOPWATCH_STORE): the store is memory:// or rocksdb:// (got "redis://")'),
])
def test_a_bad_setting_is_said_as_our_own_message(args, env, says):
    result = CliRunner().invoke(loopwatch, ["worker", *args], env=env)
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == f"Error: {says}"
    assert "Value error" not in result.output
