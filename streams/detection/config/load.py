"""Reading an ``openclaw.json`` (JSON5) from a file: :func:`load_config`, the one place the
detection package reads a file (docs/detection-rules.md §2).
"""

from __future__ import annotations

import re
from pathlib import Path

import json5

from .openclaw import OpenClawConfig
from .schema import ConfigError, validate
from .settings import VALIDATE_BY_DEFAULT

__all__ = ["load_config"]

# json5's message for text it cannot parse: "<string>:LINE WHY at column COLUMN"
_JSON5_POSITION = re.compile(r"^<string>:(\d+) (.*) at column (\d+)$", re.S)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)

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
        raise _syntax_error(text, str(exc), str(path)) from None
    if not isinstance(raw, dict):
        raise ConfigError([("(file)", "the top level must be an object")], str(path))
    if strict:
        validate(raw, str(path), profile)
    return OpenClawConfig(raw, profile=profile)


def _syntax_error(text: str, reason: str, path: str) -> ConfigError:
    """The :class:`ConfigError` of a file json5 cannot parse: ``path:line:column: not valid JSON5: why``, or
    for a file with no value at all (empty, blanks or comments only) that it is empty and what to write."""
    if not _COMMENTS.sub("", text).strip():
        return ConfigError([("(file)", "no JSON5 value (the file is empty or only comments): an OpenClaw config is "
                                        "one JSON5 object, such as "
                                        '{ tools: { loopDetection: { enabled: true } } }; {} gives OpenClaw\'s defaults')],
                           path)
    found = _JSON5_POSITION.match(reason)
    if found is None:  # no position (nested too deeply)
        return ConfigError([("(file)", f"not valid JSON5: {reason}")], path)
    line, why, column = found.groups()
    return ConfigError([("not valid JSON5", why)], f"{path}:{line}:{column}")
