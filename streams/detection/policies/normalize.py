"""``normalizeResults``: mask what varies between identical outcomes before they are hashed.

A result wrapped with a fresh nonce, a failure message with a timestamp or a duration: every
outcome hashes differently, so OpenClaw's no-progress rules never see a repeat and nothing ever
blocks. The patterns are applied to every string inside a result (the text OpenClaw hashes,
docs/detection-rules.md §4.3) and to a thrown error's message, in a copy of the event; the engine then hashes the
masked outcome. Arguments are never touched (docs/detection-rules.md §4.2 hashes them verbatim, and so do we).
"""

from __future__ import annotations

from typing import Any, Mapping

from .config import Normalization

__all__ = ["normalize_event"]

_MAX_DEPTH = 64  # deeper values are left as they are (the engine rejects absurd nesting anyway)


def _mask(value: Any, norm: Normalization, depth: int = 0) -> Any:
    if isinstance(value, str):
        for pattern, replacement in norm.patterns:
            value = pattern.sub(replacement, value)
        return value
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {key: _mask(item, norm, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_mask(item, norm, depth + 1) for item in value]
    return value


def normalize_event(event: Mapping[str, Any], norm: Normalization) -> Mapping[str, Any]:
    """``event`` with its ``result`` and ``error`` masked; the same object when it has neither."""
    result, error = event.get("result"), event.get("error")
    if result is None and error is None:
        return event
    out = dict(event)
    if result is not None:
        out["result"] = _mask(result, norm)
    if error is not None:
        out["error"] = _mask(error, norm)
    return out
