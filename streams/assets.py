"""Files loopwatch ships beside its code, found in a checkout or in an installed wheel.

``loopwatch demo`` needs the example fleet (``examples/events.jsonl``), its
OpenClaw config (``examples/openclaw.json``) and, to start a broker, the
broker script (``deploy/kafka/``: ``kafka.sh`` and the files it reads). In a
checkout (also an editable install) they are read where they are; a wheel
carries copies under ``streams/bundled/`` (setup.py's ``build_py`` puts them
there, by :data:`BUNDLED`). Scratch files (the demo's worker logs, the broker's
data) go under :func:`work_dir`.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["BUNDLED", "asset", "checkout", "work_dir"]

BUNDLED = (
    "examples/events.jsonl",
    "examples/openclaw.json",
    "deploy/kafka/kafka.sh",
    "deploy/kafka/pom.xml",
    "deploy/kafka/server.properties",
    "deploy/kafka/log4j.properties",
    "deploy/kafka/wait_ready.py",
)
"""The shipped files, by their path in the source tree (setup.py copies each into the wheel)."""

_HERE = Path(__file__).resolve().parent


def checkout() -> Path | None:
    """The source tree this code runs from (it has pyproject.toml and deploy/kafka/kafka.sh), else None."""
    root = _HERE.parent
    if (root / "pyproject.toml").is_file() and (root / "deploy" / "kafka" / "kafka.sh").is_file():
        return root
    return None


def asset(relative: str) -> Path:
    """The shipped file ``relative`` (one of :data:`BUNDLED`, e.g. ``examples/events.jsonl``).

    Raises:
        FileNotFoundError: neither the checkout nor the installed package has it.
    """
    root = checkout()
    candidates = ([root / relative] if root is not None else []) + [_HERE / "bundled" / relative]
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(f"{relative} is not shipped with this install of loopwatch (looked in "
                            f"{', '.join(str(p) for p in candidates)})")


def work_dir() -> Path:
    """Where scratch files go: ``$LOOPWATCH_WORK`` if set, else ``.work`` in the checkout, else
    ``$XDG_CACHE_HOME/loopwatch`` (``~/.cache/loopwatch``) for an installed wheel."""
    if os.environ.get("LOOPWATCH_WORK"):
        return Path(os.environ["LOOPWATCH_WORK"])
    root = checkout()
    if root is not None:
        return root / ".work"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "loopwatch"
