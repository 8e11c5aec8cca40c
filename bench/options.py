"""Command-line checks shared by the benchmark scripts: a bad option is a usage error, not a traceback."""

from __future__ import annotations

import argparse
from typing import Callable

from streams.detection import ConfigError, OpenClawConfig, load_config


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


def config(parser: argparse.ArgumentParser, path: str | None) -> OpenClawConfig:
    """The config at ``path`` (strictly validated), or detection on with defaults; errors exit 2 via ``parser``."""
    if not path:
        return OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}})
    try:
        return load_config(path)
    except (ConfigError, OSError) as exc:
        parser.error(f"--config {path}: {exc}")
