"""The shared conformance files beside the repository (``../shared/conformance`` or ``$LOOPWATCH_CONFORMANCE``).

They are not part of the project; tests that read them skip when they are absent (a fresh clone in CI).
Both lines are also exercised without them by the project's own scenarios, ``tests/fixtures/vectors-2026.7-own.jsonl``
and ``tests/fixtures/vectors-2026.9-own.jsonl``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from streams.offline.conformance import load_scenarios

SHARED_CONFORMANCE = Path(os.environ.get("LOOPWATCH_CONFORMANCE")
                          or Path(__file__).resolve().parents[2] / "shared" / "conformance")
FILES_2026_9 = ("vectors-2026.9.jsonl", "vectors-2026.9-shared.jsonl")
OWN_2026_9 = Path(__file__).resolve().parent / "fixtures" / "vectors-2026.9-own.jsonl"
OWN_2026_7 = Path(__file__).resolve().parent / "fixtures" / "vectors-2026.7-own.jsonl"


def shared_path(name: str) -> Path:
    return SHARED_CONFORMANCE / name


def shared_scenarios(name: str) -> list[dict[str, Any]]:
    """The scenarios of a shared file, or [] when it is absent."""
    path = shared_path(name)
    return list(load_scenarios(path)) if path.is_file() else []


def skip_without(name: str) -> pytest.MarkDecorator:
    path = shared_path(name)
    return pytest.mark.skipif(not path.is_file(), reason=f"no shared conformance file at {path}")
