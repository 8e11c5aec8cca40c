"""Command-line checks shared by the benchmark scripts: a bad option or config is an error message, not a traceback."""

from __future__ import annotations

import argparse
from typing import Callable

from streams.commands.replay import load_config_or_exit
from streams.detection import OpenClawConfig


def positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    """An argparse ``type`` accepting ``kind`` (int or float) values above 0."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    return parse


def config(path: str | None) -> OpenClawConfig:
    """The config at ``path`` (strictly validated; an invalid or unreadable file exits 2 with the reasons,
    as the CLI's commands do), or detection on with OpenClaw's defaults."""
    if not path:
        return OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}})
    return load_config_or_exit(path)
