"""The layering of ``streams/`` holds: import-linter's contracts in pyproject.toml ([tool.importlinter]).

A layer imports only from the layers below it (detection < wire < importers < worker | offline |
runners | report < commands < entry modules), siblings joined by ``|`` not at all from each other,
and the detection engine nothing of Kafka, Faust, the network, processes, threads or asyncio.
``lint-imports`` prints the import chain of a broken contract.
"""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import streams

ROOT = Path(__file__).resolve().parents[1]


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_import_contracts_are_kept(capsys):
    from importlinter.cli import lint_imports

    status = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    assert status == 0, capsys.readouterr().out


def test_every_module_of_the_package_root_is_in_a_layer():
    (layers,) = [c["layers"] for c in _contracts() if c["type"] == "layers"]
    placed = {name.strip() for line in layers for name in line.replace(":", "|").split("|")}
    present = {f"streams.{m.name}" for m in pkgutil.iter_modules(streams.__path__)}
    assert present - placed == set(), "a new package or module at the root of streams/ needs its layer"
    assert placed - present == set(), "a layer names a module that is not there"
