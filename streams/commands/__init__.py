"""The ``loopwatch`` command line: one click command per module of this package, and the group here.

Each sub-command lives in its own module (``replay.py``, ``worker.py``, ...) and is registered in
:data:`_COMMANDS`, so ``loopwatch --help`` lists them all while importing only the one that runs
(the worker pulls in Faust, the replay does not). The executable is :mod:`streams.cli`.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import sys

import click

__all__ = ["loopwatch"]

# command name -> "module:attribute" of a click.Command
_COMMANDS: dict[str, str] = {
    "conformance": "streams.commands.conformance:conformance",
    "replay": "streams.commands.replay:replay",
    "import": "streams.commands.import_:import_",
    "report": "streams.commands.report:report",
    "worker": "streams.commands.worker:worker",
    "produce": "streams.commands.produce:produce",
    "tail": "streams.commands.tail:tail",
    "demo": "streams.commands.demo:demo",
    "gateway": "streams.commands.gateway:gateway",
    "hook": "streams.commands.hook:hook",
    "fleet": "streams.commands.fleet:fleet",
}


class _LazyGroup(click.Group):
    """A click group that imports a sub-command's module only when it is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in _COMMANDS if self._spec_available(name))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        spec = _COMMANDS.get(name)
        if spec is None:
            return None
        module_name, attr = spec.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None
            raise
        return getattr(module, attr)

    @staticmethod
    def _spec_available(name: str) -> bool:
        module_name = _COMMANDS[name].split(":")[0]
        return importlib.util.find_spec(module_name) is not None


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="loopwatch")
def loopwatch() -> None:
    """loopwatch: OpenClaw-exact tool-call loop detection for a fleet of agents.

    Agent runners publish tool-call, tool-result and compaction events to Kafka;
    the worker answers each with a verdict (allow, warn, block, abort) that is
    the one OpenClaw's tools.loopDetection would give. The same engine runs
    offline: `loopwatch replay` needs no broker.
    """
    # Text output may quote ids or tool names holding a lone surrogate (JSON input can carry one):
    # printed escaped, not a UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    # A broker that does not answer: the command's one "cannot reach Kafka" line, not aiokafka's ERROR line per
    # bootstrap address before it; aiokafka's other repeated lines rate-limited, as in the worker.
    from streams.wire.logs import quiet_kafka_client_logs

    quiet_kafka_client_logs()
