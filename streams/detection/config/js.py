"""How JavaScript reads parsed JSON values, where OpenClaw's config reading depends on it
(docs/detection-rules.md §2.2, §2.3, §11.2.4): numbers as IEEE-754 doubles, truthiness, object key order.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["js_double", "js_increment", "js_truthy", "js_key_order"]

_MAX_SAFE = 2 ** 53  # up to here every integer is exactly a double


def js_double(value: int | float) -> int | float:
    """The IEEE-754 double JavaScript's JSON reader makes of a parsed number (docs/detection-rules.md §2.2).

    Integers beyond 2^53 become the nearest double (``9007199254740993`` ->
    ``9007199254740992``), returned as a Python int when finite so it prints
    as JavaScript prints it; an integer too large for a double is ``inf``.
    Floats (already doubles) and smaller integers are returned unchanged.
    """
    if type(value) is int and not -_MAX_SAFE <= value <= _MAX_SAFE:
        try:
            return int(float(value))
        except OverflowError:  # beyond the largest double: JavaScript's Infinity
            return float("inf") if value > 0 else float("-inf")
    return value


def js_increment(value: int) -> int:
    """``value + 1`` in double arithmetic (docs/detection-rules.md §2.2 steps 2-3: ``2**53 + 1`` stays ``2**53``)."""
    return value + 1 if value < _MAX_SAFE else int(float(value) + 1)


def js_truthy(value: Any) -> bool:
    """JavaScript's truthiness of a parsed JSON/JSON5 value (docs/detection-rules.md §2.3).

    Falsy: ``false``, ``null``, ``0`` (and ``-0``), NaN and ``""``;
    everything else, including ``"false"``, ``[]`` and ``{}``, is truthy.
    """
    if value is None or value is False or value == "":
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == value and value != 0  # NaN != NaN
    return True


def js_key_order(obj: Mapping[str, Any]) -> list[str]:
    """The keys of a parsed JSON object in the order JavaScript enumerates them: array-index keys
    (canonical integers below 2**32 - 1) first, ascending, then the others as inserted."""
    indices = [key for key in obj if isinstance(key, str) and key.isdigit() and key.isascii()
               and (key == "0" or key[0] != "0") and int(key) < 2**32 - 1]
    if not indices:
        return [key for key in obj if isinstance(key, str)]
    index_set = set(indices)
    return sorted(indices, key=int) + [key for key in obj if isinstance(key, str) and key not in index_set]
