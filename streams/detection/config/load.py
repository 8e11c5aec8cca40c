"""Reading an ``openclaw.json`` (JSON5) from a file: :func:`load_config`, the one place the
detection package reads a file (docs/detection-rules.md §2).
"""

from __future__ import annotations

from pathlib import Path

import json5

from .openclaw import OpenClawConfig
from .schema import ConfigError, validate
from .settings import VALIDATE_BY_DEFAULT

__all__ = ["load_config"]

def load_config(path: str | Path | None, *, strict: bool = VALIDATE_BY_DEFAULT,
                profile: str | None = None) -> OpenClawConfig:
    """Read an ``openclaw.json`` (JSON5) and return its loop-detection config.

    Arguments:
        path: the file; None gives OpenClaw's defaults (detection disabled).
        strict: validate as OpenClaw does at load time (docs/detection-rules.md §2.1).
        profile: the default profile instead of the file's ``options.profile`` (a command's ``--profile``);
            validation follows it.
    Raises:
        ConfigError: the file is not UTF-8 JSON5, not an object, or fails validation.
        OSError: the file cannot be read.
    """
    if path is None:
        return OpenClawConfig({}, profile=profile)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([("(file)", f"not UTF-8 text: {exc.reason} at byte {exc.start}")], str(path)) from None
    try:
        raw = json5.loads(text)
    except (ValueError, RecursionError) as exc:
        reason = str(exc).replace("<string>:", "line ")  # json5 names no file; ConfigError does
        raise ConfigError([("(file)", f"not valid JSON5: {reason}")], str(path)) from None
    if not isinstance(raw, dict):
        raise ConfigError([("(file)", "the top level must be an object")], str(path))
    if strict:
        validate(raw, str(path), profile)
    return OpenClawConfig(raw, profile=profile)
