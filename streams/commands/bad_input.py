"""How the offline commands report input they cannot use: records skipped as bad, sessions not found."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Iterable, NoReturn

import click

from ..importers import FORMATS

__all__ = ["SkipReport", "LeftOut", "exit_without_events", "session_paths"]


class LeftOut(str):
    """The reason a whole file was left out without losing session data (a
    :class:`~streams.importers.FileNotRead`: no known format, a configuration file, cannot be opened,
    a path that does not exist): :class:`SkipReport` lists it and does not count it as skipped."""


def session_paths(command: str, fmt: str, paths: Iterable[str], report: "SkipReport") -> list:
    """The :class:`~streams.importers.SessionFile` list of ``paths`` read as ``fmt`` (a session format or
    ``auto``); a path that does not exist is listed on ``report`` (left out) when another one does, and
    when none does the command says so in one line and exits with status 2.

    Raises click.UsageError for an unknown format, or ``-`` where a command reads files only."""
    from ..importers import session_files

    try:
        return session_files(fmt, paths, missing=lambda path: report(path, None, LeftOut("no such file or directory")))
    except FileNotFoundError as exc:
        click.echo(f"loopwatch {command}: {exc}", err=True)
        sys.exit(2)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None

_LISTED = 10  # skipped records reported one by one; a binary file would give one line per byte


def exit_without_events(command: str, fmt: str, files: int, paths: Iterable[str]) -> NoReturn:
    """Say why reading recorded sessions as ``fmt`` gave no event, on stderr, and exit with status 1:
    what import, replay and report do then.

    The line is ``loopwatch <command>: no <fmt> session files found in <paths>: is --format right?
    (the others: ...)`` when ``files`` is 0, else ``loopwatch <command>: no events in <files> file(s)
    read as <fmt>: ...``. ``paths`` are the files and folders searched. With ``fmt`` ``auto`` (each
    file's format sniffed) there is no other format to suggest: ``no session or event files of a known
    format found in <paths>`` / ``no events in <files> file(s)``.
    """
    if fmt == "auto":
        found = (f"no events in {files} file(s)" if files else
                 f"no session or event files of a known format found in {', '.join(str(p) for p in paths)}")
        click.echo(f"loopwatch {command}: {found}", err=True)
        sys.exit(1)
    others = ", ".join(f for f in sorted(FORMATS) if f != fmt)
    if files:
        found = f"no events in {files} file(s) read as {fmt}"
    else:
        found = f"no {fmt} session files found in {', '.join(str(p) for p in paths)}"
    click.echo(f"loopwatch {command}: {found}: is --format right? (the others: {others})", err=True)
    sys.exit(1)


class SkipReport:
    """Reports skipped records on stderr: the first 10 one by one, then one line counting the rest.

    Calling it with ``(path, position, reason)`` reports one record as
    ``loopwatch <command>: <path>:<position>: <label><reason>`` (``<path>:
    ...`` when ``position`` is None: a problem of the whole file) while fewer
    than 10 were; ``count`` is how many were reported in all. ``label`` is
    ``skipped: `` by default; import gives ``""``, as its reasons are the
    importers' own errors and its summary counts them as errors.
    :meth:`close`, or leaving a ``with`` block, prints ``loopwatch
    <command>: N more skipped record(s) not listed`` when some were not.
    A :class:`LeftOut` reason (a whole file left out, no session data lost)
    is listed as ``<path>: left out: <reason>`` (the first 10, then a count)
    and counted in ``left_out``, not ``count``.
    """

    def __init__(self, command: str, label: str = "skipped: ") -> None:
        self.command = command
        self.label = label
        self.count = 0
        self.left_out = 0
        self._closed = False

    def __call__(self, path: str, position: int | None, reason: str) -> None:
        where = path if position is None else f"{path}:{position}"
        if isinstance(reason, LeftOut):  # a whole file, no session data lost: listed, not counted as skipped
            self.left_out += 1
            if self.left_out <= _LISTED:
                click.echo(f"loopwatch {self.command}: {where}: left out: {reason}", err=True)
            return
        self.count += 1
        if self.count <= _LISTED:
            click.echo(f"loopwatch {self.command}: {where}: {self.label}{reason}", err=True)

    def close(self) -> None:
        """Print how many records and files were not listed (once; nothing when all were)."""
        if not self._closed and self.count > _LISTED:
            click.echo(f"loopwatch {self.command}: {self.count - _LISTED} more skipped record(s) not listed",
                       err=True)
        if not self._closed and self.left_out > _LISTED:
            click.echo(f"loopwatch {self.command}: {self.left_out - _LISTED} more file(s) left out not listed",
                       err=True)
        self._closed = True

    def __enter__(self) -> SkipReport:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
