"""How the offline commands report input they cannot use: records skipped as bad, sessions not found."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Iterable, NoReturn

import click

from ..importers import FORMATS

__all__ = ["SkipReport", "LISTED", "location", "no_events", "exit_without_events"]

LISTED = 10  # skipped records reported one by one; a binary file would give one line per byte


def no_events(fmt: str, files: int, paths: Iterable[str]) -> str:
    """Why reading recorded sessions as ``fmt`` gave no event, with a hint: ``no <fmt> session files
    found in <paths>: is --format right? (the others: ...)`` when ``files`` is 0, else ``no events in
    <files> file(s) read as <fmt>: ...``. ``paths`` are the files and folders searched."""
    others = ", ".join(f for f in sorted(FORMATS) if f != fmt)
    if files:
        found = f"no events in {files} file(s) read as {fmt}"
    else:
        found = f"no {fmt} session files found in {', '.join(str(p) for p in paths)}"
    return f"{found}: is --format right? (the others: {others})"


def exit_without_events(command: str, fmt: str, files: int, paths: Iterable[str]) -> NoReturn:
    """Print ``loopwatch <command>: ``:func:`no_events` on stderr and exit with status 1: what import,
    replay and report do when recorded sessions read as ``fmt`` gave no event."""
    click.echo(f"loopwatch {command}: {no_events(fmt, files, paths)}", err=True)
    sys.exit(1)


def location(path: str, position: int | None) -> str:
    """``path:position``, or ``path`` alone when ``position`` is None (a problem of the whole file)."""
    return path if position is None else f"{path}:{position}"


class SkipReport:
    """Reports skipped records on stderr: the first ``listed`` one by one, then one line counting the rest.

    Calling it with ``(path, position, reason)`` reports one record as
    ``loopwatch <command>: <path>:<position>: <label><reason>`` (``<path>:
    ...`` when ``position`` is None) while fewer than ``listed`` were;
    ``count`` is how many were reported in all. :meth:`close`, or leaving a
    ``with`` block, prints ``loopwatch <command>: N more skipped record(s)
    not listed`` when some were not.
    """

    def __init__(self, command: str, listed: int = LISTED, label: str = "skipped: ") -> None:
        self.command = command
        self.listed = listed
        self.label = label
        self.count = 0
        self._closed = False

    def __call__(self, path: str, position: int | None, reason: str) -> None:
        self.count += 1
        if self.count <= self.listed:
            click.echo(f"loopwatch {self.command}: {location(path, position)}: {self.label}{reason}", err=True)

    def close(self) -> None:
        """Print how many records were not listed (once; nothing when all were)."""
        if not self._closed and self.count > self.listed:
            click.echo(f"loopwatch {self.command}: {self.count - self.listed} more skipped record(s) not listed",
                       err=True)
        self._closed = True

    def __enter__(self) -> SkipReport:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
