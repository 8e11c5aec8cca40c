"""Strings as a report shows them: invisible and direction-changing characters escaped, long strings cut.

Recorded sessions carry whatever tools and models wrote: a right-to-left override (U+202E) that
reverses the text after it, NUL and terminal escape sequences, zero-width characters, lone
surrogates, and strings of megabytes. A report shows each such character as its escape
(``\\x00``, ``\\x1b``, ``\\u202e``), so what is on screen is what was recorded, and keeps the first
``limit`` characters of a long string followed by ``… [1,048,576 characters]``, so a few huge
values cannot make a page of tens of megabytes.
"""

from __future__ import annotations

import re
from html import escape

__all__ = ["shown", "esc", "LIMIT", "MESSAGE_LIMIT"]

LIMIT = 300          # characters of an id, a tool name, a path, ... shown before the cut
MESSAGE_LIMIT = 1000  # of a message (OpenClaw's are a few hundred characters)

# C0 and C1 controls (tab and newline aside: ``lines``), DEL, soft hyphen, Arabic letter mark,
# Mongolian vowel separator, zero-width and bidi marks, embeddings, overrides and isolates (U+200B-U+200F,
# U+202A-U+202E, U+2066-U+2069), line and paragraph separators, invisible operators, BOM, interlinear
# annotation marks, lone surrogates, tag characters.
_INVISIBLE = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"
              "\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f")
_ESCAPED = re.compile(f"[{_INVISIBLE}]")
_ESCAPED_ONE_LINE = re.compile(f"[{_INVISIBLE}\t\n]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    if code == 0x09:
        return "\\t"
    if code == 0x0A:
        return "\\n"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shown(value: object, limit: int | None = LIMIT, lines: bool = False) -> str:
    """``str(value)`` for a report: cut to ``limit`` characters (None: no cut) with the full length noted,
    then every invisible or direction-changing character as its escape.

    Arguments:
        value: anything; ``None`` shows as ``None``.
        limit: characters kept of a longer string, > 0; None keeps all.
        lines: keep tab and newline as they are (a multi-line tooltip); else they are escaped too.
    Returns:
        e.g. ``"rm \\u202etxt.exe"``, ``"aaaa… [1,048,576 characters]"``.
    """
    text = str(value)
    total = len(text)
    if limit is not None and total > limit:
        text = text[:limit]
    text = (_ESCAPED if lines else _ESCAPED_ONE_LINE).sub(_escape, text)
    if limit is not None and total > limit:
        text += f"… [{total:,} characters]"
    return text


def esc(value: object, limit: int | None = LIMIT, lines: bool = False) -> str:
    """``value`` as HTML text or attribute: :func:`shown` (cut, invisible characters escaped), then
    HTML-escaped (quotes too)."""
    return escape(shown(value, limit, lines), quote=True)
