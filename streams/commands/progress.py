"""A progress bar on stderr over the files an offline command reads (tqdm, which the project depends on)."""

from __future__ import annotations

import sys
from typing import Any

import click

__all__ = ["progress_option", "file_progress", "MIN_FILES"]

MIN_FILES = 100
"""Without --progress, a bar is shown on a terminal from this many files on (a long import)."""


def progress_option(func):
    """``--progress/--no-progress`` (parameter ``progress``: True, False, or None = on a terminal, for long inputs)."""
    return click.option(
        "--progress/--no-progress", "progress", default=None,
        help=f"A progress bar over the files read, on stderr (default: when stderr is a terminal and there are "
             f"{MIN_FILES} files or more).",
    )(func)


def file_progress(total: int, progress: bool | None, desc: str) -> Any:
    """A tqdm bar counting ``total`` files (``update(1)`` per file; a context manager), disabled unless
    ``progress`` is True, or None with stderr a terminal and ``total`` at least :data:`MIN_FILES`."""
    from tqdm import tqdm

    show = progress if progress is not None else (total >= MIN_FILES and sys.stderr.isatty())
    return tqdm(total=total, unit="file", desc=desc, disable=not show, file=sys.stderr, mininterval=0.5,
                dynamic_ncols=True)
