"""What every step of ``loopwatch demo`` uses: the files it runs on, shipped with loopwatch
(``kafka.sh``, the example events and OpenClaw config; from a checkout or the wheel), how it names a
path, and its progress lines on stderr.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from streams.assets import asset, checkout

__all__ = ["ROOT", "KAFKA_SH", "DEFAULT_EVENTS", "DEFAULT_CONFIG", "shown", "say"]


def shipped(relative: str) -> Path:
    """A file shipped with loopwatch (checkout or wheel); its plain path when this install lacks it."""
    try:
        return asset(relative)
    except FileNotFoundError:
        return Path(relative)


ROOT = checkout() or Path(__file__).resolve().parents[3]
KAFKA_SH = shipped("deploy/kafka/kafka.sh")
DEFAULT_EVENTS = shipped("examples/events.jsonl")
DEFAULT_CONFIG = shipped("examples/openclaw.json")


def shown(path: Path) -> str:
    """``path`` as the user would type it here: relative below the current folder, else absolute."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def say(message: str) -> None:
    """A progress line on stderr, ``demo: <message>``."""
    try:
        click.echo(f"demo: {message}", err=True)
    except OSError:  # stderr closed (piped into `head`, terminal gone): cleanup must still run
        pass
