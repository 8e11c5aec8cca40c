"""How the offline commands report input they cannot use: records skipped as bad, sessions not found."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Iterable, NoReturn

import click

from ..importers import FORMATS

__all__ = ["SkipReport", "exit_without_events"]

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
    """

    def __init__(self, command: str, label: str = "skipped: ") -> None:
        self.command = command
        self.label = label
        self.count = 0
        self._closed = False

    def __call__(self, path: str, position: int | None, reason: str) -> None:
        self.count += 1
        if self.count <= _LISTED:
            where = path if position is None else f"{path}:{position}"
            click.echo(f"loopwatch {self.command}: {where}: {self.label}{reason}", err=True)

    def close(self) -> None:
        """Print how many records were not listed (once; nothing when all were)."""
        if not self._closed and self.count > _LISTED:
            click.echo(f"loopwatch {self.command}: {self.count - _LISTED} more skipped record(s) not listed",
                       err=True)
        self._closed = True

    def __enter__(self) -> SkipReport:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
