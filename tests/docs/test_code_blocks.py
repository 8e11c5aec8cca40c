"""Every code block in docs/ runs as printed, or says why it is not run here.

A fenced block's info string is its language and, for commands and code, one mark:

* ``sh run`` / ``python run``: run by this test, offline, from a copy of the checkout's layout
  (``.venv``, ``examples``, ``tests``, ``README.md`` linked into a temporary folder), each with
  ``bash -euo pipefail`` or the test's Python; it must exit 0;
* ``sh needs-kafka``, ``python needs-kafka``: needs a broker and a worker (the Python client's
  snippet is run against the real broker by tests/docs/test_client_snippet.py);
* ``sh needs-runner``: needs a runner (OpenClaw, Claude Code, Codex) or a gateway beside it;
* ``sh needs-data``: reads the reader's own recorded sessions or config;
* ``sh long``: minutes of work (benchmarks, the demo).

``json``, ``json5`` and ``toml`` blocks must parse (``"..."`` stands for what is left out);
``text`` blocks are output or diagrams and are not run. A block without a language fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import json5
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").rglob("*.md"))
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
NOT_RUN = {"needs-kafka", "needs-runner", "needs-data", "long"}
RUN_LANGUAGES = {"sh", "python"}
DATA_LANGUAGES = {"json", "json5", "toml"}


def blocks() -> list[tuple[str, str, str, str]]:
    """``(where, language, mark, body)`` of every fenced block in docs/."""
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            info = match.group(1).split()
            line = text[:match.start()].count("\n") + 1
            out.append((f"{path.relative_to(ROOT)}:{line}", info[0] if info else "", " ".join(info[1:]),
                        match.group(2)))
    return out


BLOCKS = blocks()
RUNNABLE = [b for b in BLOCKS if b[1] in RUN_LANGUAGES and b[2] == "run"]


def test_every_block_says_what_it_is():
    assert len(BLOCKS) >= 30
    for where, language, mark, _ in BLOCKS:
        assert language, f"{where}: a block needs a language (text for output)"
        if language in RUN_LANGUAGES:
            assert mark == "run" or mark in NOT_RUN, f"{where}: mark it run or one of {sorted(NOT_RUN)}"
        else:
            assert language in DATA_LANGUAGES | {"text"}, f"{where}: unknown language {language!r}"
    assert len(RUNNABLE) >= 2  # replay and conformance at least


@pytest.mark.parametrize("where, language, mark, body", [b for b in BLOCKS if b[1] in DATA_LANGUAGES],
                         ids=[b[0] for b in BLOCKS if b[1] in DATA_LANGUAGES])
def test_data_blocks_parse(where, language, mark, body):
    if language == "json":
        json.loads(body)
    elif language == "json5":
        json5.loads(body)
    else:
        tomllib.loads(body)


def _checkout(tmp_path: Path) -> Path:
    """A folder that looks like the checkout to the docs' commands (relative paths), writable."""
    for name in ("examples", "tests", "README.md", "bench", "deploy"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    bin_dir = Path(sys.executable).parent
    for tool in ("loopwatch", "python"):
        (tmp_path / ".venv" / "bin" / tool).symlink_to(bin_dir / tool)
    return tmp_path


@pytest.mark.parametrize("where, language, mark, body", RUNNABLE, ids=[b[0] for b in RUNNABLE])
def test_runnable_blocks_run_as_printed(where, language, mark, body, tmp_path):
    cwd = _checkout(tmp_path)
    env = {**os.environ, "PATH": f"{cwd / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    if language == "sh":
        command = ["bash", "-euo", "pipefail", "-c", body]
    else:
        command = [sys.executable, "-c", body]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{where}\n{body}\nstdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-2000:]}"
