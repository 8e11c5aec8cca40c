"""Strings from recordings in reports: control and bidi characters shown escaped, long strings cut with their length.

A right-to-left override (U+202E) in a session id reverses what follows it on screen; NUL and ESC in a tool
name reach a terminal raw; a few 1 MiB strings made a 22 MB page. Both renderings show the escapes and cut.
"""

from streams.report import build_report, render_html, render_text
from streams.report.shown import shown

MIB = 1_048_576


def _records() -> list[dict]:
    records = []
    for i in range(6):
        blocked = i == 5
        records.append({
            "type": "tool_call", "session_id": "s\u202eexe.txt", "run_id": "r" + "x" * MIB,
            "tool_name": "exec\x00\x1b[31m", "verdict": "block" if blocked else "allow",
            "decision": "block" if blocked else "allow", "blocked": blocked,
            "detection": ({"stuck": True, "detector": "generic_repeat", "level": "critical", "count": 5,
                           "message": "CRITICAL: \u2066" + "y" * MIB} if blocked else {"stuck": False}),
            "block_reason": "CRITICAL: " + "y" * MIB if blocked else None})
    return records


def test_shown_escapes_invisible_characters_and_cuts_with_the_length():
    assert shown("a\u202eb\x00c\x1bd\u200be\ufefff\ud800") == "a\\u202eb\\x00c\\x1bd\\u200be\\ufefff\\ud800"
    assert shown("tab\tnew\nline") == "tab\\tnew\\nline"
    assert shown("tab\tnew\nline", lines=True) == "tab\tnew\nline"
    assert shown("\U000e0041tag") == "\\U000e0041tag"
    assert shown("z" * 1000, limit=10) == "zzzzzzzzzz… [1,000 characters]"
    assert shown("z" * 10, limit=10) == "z" * 10
    assert shown("ok été 日本 🙂") == "ok été 日本 🙂"  # visible text is left alone


def test_text_report_shows_escapes_and_cuts_megabyte_strings():
    text = render_text(build_report(_records()))
    assert not any(ch in text for ch in "\u202e\u2066\x00\x1b")
    assert "session s\\u202eexe.txt" in text
    assert "exec\\x00\\x1b[31m  generic_repeat critical block  count 5" in text
    assert f"… [{MIB + 1:,} characters]" in text  # the run id
    assert "CRITICAL: \\u2066" + "y" * 100 in text and f"… [{MIB + 11:,} characters]" in text  # the message
    assert len(text) < 10_000


def test_html_report_shows_escapes_and_cuts_megabyte_strings():
    page = render_html(build_report(_records()))
    assert not any(ch in page for ch in "\u202e\u2066\x00\x1b")
    assert 'data-session="s\\u202eexe.txt"' in page
    assert 'data-tool="exec\\x00\\x1b[31m"' in page
    assert f"… [{MIB + 1:,} characters]" in page and f"… [{MIB + 11:,} characters]" in page
    assert len(page) < 100_000  # 4 MiB of strings in, a page of tens of KB out
