"""Which files to read, each with its format, and reading them one after the other.

A mixed fleet (``--format auto``): every file under the paths given is sniffed
(:func:`streams.importers.sniff.sniff`, content only, at most the first MiB) and read by its
format's importer; files of no known format are listed with the reason, not read. With an
explicit format every file the format's ``discover`` finds is read as that format.

Files left out whole (no known format, a configuration file, a file that cannot be opened) are
reported as :class:`~streams.importers.events.FileNotRead`: nothing of a session is lost with them.

Reading is per file: an importer that stops on a file (an ``OSError``, a damaged database, an
importer's own failure on input it did not foresee) costs the rest of that file only. The
events it gave before are kept, the failure is reported as a
:class:`~streams.importers.events.SessionFormatError` for the file (``line`` None), and the
next file is read.

Every event of a recorded session gets ``runner``: the format that read it (``openclaw``,
``claude-code``, ``codex``, ``swe-agent``), which reports group by. Events of loopwatch event
files are passed on as they are (with ``source`` ``{path, line}`` when they had none); a
``runner`` field they carry is kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streams.wire.codecs import read_event_file
from . import FORMATS, iter_files, stdin_file
from .compressed import CompressedDataError, local_copy
from .events import ErrorHandler, FileNotRead, SessionFormatError, report
from .openclaw_sqlite import owning_database
from .sniff import EVENTS, main_file_present, sniff

__all__ = ["AUTO", "SessionFile", "NotASession", "ConfigFile", "session_files", "read_files", "SQLITE_FORMAT"]

AUTO = "auto"
"""The ``--format`` that sniffs every file (a mixed fleet)."""
SQLITE_FORMAT = "openclaw"
"""The format whose importer reads SQLite databases: OpenClaw 2026.9.x's agent store
(:mod:`streams.importers.openclaw_sqlite`)."""


class NotASession(FileNotRead):
    """A file ``--format auto`` did not read: no known format, or it cannot be read (``line`` None)."""


class ConfigFile(NotASession):
    """A file ``--format auto`` left out as a runner's or loopwatch's configuration file."""


@dataclass(frozen=True, slots=True)
class SessionFile:
    """A file to read: ``format`` a key of :data:`~streams.importers.FORMATS` or ``events``; None with
    ``reason`` for a file of no known format."""

    path: Path
    format: str | None
    reason: str | None = None
    config: bool = False


def session_files(fmt: str, paths: Iterable[str | Path],
                  missing: Callable[[str], None] | None = None) -> list[SessionFile]:
    """The files ``paths`` name (files, or directories searched recursively), each with its format.

    ``fmt`` :data:`AUTO`: each file's format is sniffed; a directory is walked in sorted order
    (a path without its suffix first, so a Claude Code main log comes before its sub-agents' side
    files), leaving out names starting with ``.`` and companion files whose main file is there
    (:func:`~streams.importers.sniff.companion_of`; a configuration file is listed, ``config`` set, and
    read as a :class:`ConfigFile`); a session file named alone comes with its
    companions (a Claude Code main log with its sub-agents' side files). Another ``fmt``: the files
    :func:`~streams.importers.iter_files` finds. ``-`` is standard input, read as one file.

    ``missing``: called with each path that does not exist, which is then left out (a fleet's folders:
    one runner may not be installed); without it a missing path raises.

    Raises:
        ValueError: unknown format. FileNotFoundError: a path that does not exist (without ``missing``;
        with it, when no path exists).
    """
    paths = [str(p) for p in paths]
    if missing is not None:
        absent = [p for p in paths if p != "-" and not Path(p).expanduser().exists()]
        if absent and len(absent) == len(paths):
            raise FileNotFoundError(f"no such file or directory: {', '.join(absent)}")
        for path in absent:
            missing(path)
        paths = [p for p in paths if p not in absent]
    if fmt != AUTO:
        return [SessionFile(path, fmt) for path in iter_files(fmt, paths)]
    out: list[SessionFile] = []
    seen: set[tuple[int, int]] = set()

    def add(found: SessionFile) -> None:
        try:
            info = found.path.stat()  # one system call, where resolve() takes one per path component
        except OSError:
            out.append(found)  # it will say why it cannot be read
            return
        key = (info.st_dev, info.st_ino)
        if key not in seen:
            seen.add(key)
            out.append(found)

    for raw in paths:
        root = stdin_file() if str(raw) == "-" else Path(raw).expanduser()
        if not root.exists():
            raise FileNotFoundError(f"no such file or directory: {raw}")
        if not root.is_dir():
            sniffed = sniff(root, SQLITE_FORMAT)
            if sniffed.format in FORMATS:
                for path in FORMATS[sniffed.format].discover(root):
                    add(SessionFile(path, sniffed.format))
            else:
                add(SessionFile(root, sniffed.format, sniffed.reason, sniffed.config))
            continue
        for path in sorted(_walk(root), key=_order):
            if owning_database(path) is not None:
                continue  # an archived OpenClaw session its database holds (read with it)
            sniffed = sniff(path, SQLITE_FORMAT)
            if sniffed.format is None and sniffed.companion is not None and main_file_present(sniffed.companion):
                continue  # read with its main file
            add(SessionFile(path, sniffed.format, sniffed.reason, sniffed.config))
    return out


def _walk(root: Path) -> Iterator[Path]:
    """Files under ``root``, not following links to directories, without hidden names."""
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if not name.startswith("."):
                path = Path(folder, name)
                if path.is_file():
                    yield path


def _order(path: Path) -> str:
    return str(path.with_suffix(""))


def read_files(files: Iterable[SessionFile], on_error: ErrorHandler | None = None) -> Iterator[dict[str, Any]]:
    """Yield the events of every file, file after file (module docstring).

    Args:
        files: from :func:`session_files`.
        on_error: called with each :class:`SessionFormatError` (a bad line or record; a file that
            stopped being readable; a :class:`NotASession` for a file of no known format); without
            it the first is raised.
    """
    for item in files:
        if item.format is None:
            kind = ConfigFile if item.config else NotASession
            report(kind(item.path, None, item.reason or "no known format"), on_error)
        else:
            yield from _read_one(item, on_error)


def _read_one(item: SessionFile, on_error: ErrorHandler | None) -> Iterator[dict[str, Any]]:
    runner = None if item.format == EVENTS else item.format
    read = _read_events if item.format == EVENTS else FORMATS[item.format].read
    started = False
    try:
        for event in read(item.path, on_error):
            if runner is not None:
                event["runner"] = runner
            started = True
            yield event
    except SessionFormatError as exc:
        report(exc, on_error)
    except OSError as exc:  # cannot be opened: left out; stopped part way: the rest is lost
        kind = SessionFormatError if started else FileNotRead
        report(kind(item.path, None, f"cannot read: {exc.strerror or exc}"), on_error)
    except CompressedDataError as exc:
        report(SessionFormatError(item.path, None, f"cannot read further: {exc}"), on_error)
    except Exception as exc:  # an importer failing on input it did not foresee costs this file only
        report(SessionFormatError(item.path, None, f"read as {item.format} up to here, then the importer failed "
                                                   f"({type(exc).__name__}: {exc})"), on_error)


def _read_events(path: Path, on_error: ErrorHandler | None) -> Iterator[dict[str, Any]]:
    """The events of a loopwatch event file (JSON Lines or msgpack, or either compressed), with ``source``
    where they had none."""
    with local_copy(path) as plain:
        for record in read_event_file(plain):
            if record.event is None:
                report(SessionFormatError(path, record.position, record.error or "unreadable"), on_error)
                continue
            event = record.event
            if "source" not in event:
                event = {**event, "source": {"path": str(path), "line": record.position}}
            yield event
