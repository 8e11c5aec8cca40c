"""Importers: recorded agent sessions -> loopwatch stream events.

One module per recording format, each exposing ``discover(path) -> Iterator[Path]`` (which
files under a directory are sessions of that format), ``read(path, on_error) -> Iterator[dict]``
(the events of one file, in order) and ``looks_like(first_json_value) -> bool``.

    >>> from streams.importers import import_paths
    >>> for event in import_paths("openclaw", ["~/.openclaw/agents"]):  # doctest: +SKIP
    ...     print(event["type"], event.get("tool_name"))

Event shapes are documented in :mod:`streams.importers.events`; how each format maps onto
them, and which fields mean what, in each format's module docstring.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streams.wire.codecs import json_loads
from . import claude_code, codex, openclaw, openclaw_export, openclaw_sqlite, swe_agent
from .compressed import open_binary, plain_name
from .events import ErrorHandler, FileNotRead, SessionFormatError

__all__ = ["FORMATS", "Format", "SessionFormatError", "FileNotRead", "ConfigFile", "import_paths", "iter_files", "detect_format", "AUTO",
           "SessionFile", "NotASession", "session_files", "read_files", "stdin_file"]


@dataclass(frozen=True, slots=True)
class Format:
    """A recording format: how to find its files and how to read one."""

    name: str
    discover: Callable[[Path], Iterator[Path]]
    read: Callable[[Path, ErrorHandler | None], Iterator[dict[str, Any]]]
    looks_like: Callable[[Any], bool]


def _openclaw_discover(root: Path) -> Iterator[Path]:
    """OpenClaw's JSONL transcripts (up to 2026.7.x) and agent databases (2026.9.x) under ``root``."""
    if root.is_dir():
        yield from (p for p in openclaw.discover(root) if openclaw_sqlite.owning_database(p) is None)
        yield from openclaw_sqlite.discover(root)
    else:
        yield from openclaw.discover(root)


def _openclaw_read(path: Path, on_error: ErrorHandler | None = None) -> Iterator[dict[str, Any]]:
    """One OpenClaw session file: an agent database (by its SQLite header) or a JSONL transcript."""
    path = Path(path)
    if plain_name(path.name).endswith(".sqlite") or openclaw_sqlite.is_database(path):
        reader = openclaw_sqlite.read
    elif openclaw.SIDECAR_SUFFIX not in path.name and openclaw_export.looks_like(_first_value(path)):
        reader = openclaw_export.read  # an export-trajectory bundle's events.jsonl
    else:
        reader = openclaw.read
    yield from reader(path, on_error)


def _first_value(path: Path) -> Any:
    """The first JSON value of a JSON Lines file (``None`` when it has none or cannot be read)."""
    try:
        with open_binary(path) as fh:
            first_line = next((ln for ln in fh if ln.strip()), b"")
        return json_loads(first_line.decode("utf-8"))
    except (OSError, ValueError):  # UnicodeDecodeError, JSONDecodeError, CompressedDataError
        return None


FORMATS: dict[str, Format] = {
    "openclaw": Format("openclaw", _openclaw_discover, _openclaw_read, openclaw.looks_like),
    "claude-code": Format("claude-code", claude_code.discover, claude_code.read, claude_code.looks_like),
    "codex": Format("codex", codex.discover, codex.read, codex.looks_like),
    "swe-agent": Format("swe-agent", swe_agent.discover, swe_agent.read, swe_agent.looks_like),
}


def _format(fmt: str) -> Format:
    try:
        return FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}") from None


def iter_files(fmt: str, paths: Iterable[str | Path]) -> Iterator[Path]:
    """The session files of format ``fmt`` named by ``paths`` (files or directories, recursively).

    Each file is yielded once, in the order given (directories in sorted order). ``-`` is standard
    input, read as one file (:func:`stdin_file`).

    Raises:
        ValueError: unknown format.
        FileNotFoundError: a path that does not exist.
    """
    spec = _format(fmt)
    seen: set[Path] = set()
    for raw in paths:
        root = stdin_file() if str(raw) == "-" else Path(raw).expanduser()
        if not root.exists():
            raise FileNotFoundError(f"no such file or directory: {raw}")
        for found in spec.discover(root):
            key = found.resolve()
            if key not in seen:
                seen.add(key)
                yield found


def stdin_file() -> Path:
    """Standard input copied to ``<temporary folder>/stdin.jsonl`` (removed at exit): the importers read a
    file more than once (format sniffing, side files), which a pipe cannot give."""
    import atexit
    import shutil
    import sys
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="loopwatch-stdin-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "stdin.jsonl"
    with path.open("wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out)
    return path


def import_paths(
    fmt: str, paths: Iterable[str | Path], on_error: ErrorHandler | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the events of every ``fmt`` session under ``paths``, file after file.

    Args:
        fmt: a key of :data:`FORMATS`, or ``auto`` (each file's format sniffed: a mixed fleet,
            :mod:`streams.importers.inputs`).
        paths: files or directories (searched recursively).
        on_error: called with each :class:`SessionFormatError` (a malformed line: not
            UTF-8, not JSON, not a record of the format; a file that cannot be read at
            all, or no further; with ``auto``, a file of no known format); the importer then
            skips that line or file and goes on. Without it the first such error is raised.

    Raises:
        ValueError: unknown format. FileNotFoundError: a missing path.
        SessionFormatError: malformed input, when ``on_error`` is ``None``.
    """
    yield from read_files(session_files(fmt, paths), on_error)


def detect_format(path: str | Path) -> str | None:
    """The session format of a file from its first bytes (:func:`streams.importers.sniff.sniff`), or ``None``
    (a folder, a loopwatch event file, anything else)."""
    p = Path(path)
    if p.is_dir():
        return None
    found = sniff(p, SQLITE_FORMAT).format
    return found if found in FORMATS else None


# after FORMATS, iter_files and stdin_file, which they use
from .inputs import AUTO, SQLITE_FORMAT, ConfigFile, NotASession, SessionFile, read_files, session_files  # noqa: E402
from .sniff import sniff  # noqa: E402
