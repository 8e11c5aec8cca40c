"""Outcomes as OpenClaw 2026.9.6 records them (docs/detection-rules.md §11.4.3): outcome kinds, the
untrusted-content marker normaliser, the masked identity of a terminal exec failure.

Built on the 2026.7 fingerprints of :mod:`~streams.detection.fingerprint`, whose rules it changes where the
spec says; pure, on decoded JSON values.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from .canonical import UNDEFINED, digest, js_number, normalizing_digest
from .fingerprint import (JS_WHITESPACE, PROFILE_EXEC, PROFILE_PROCESS_LOG, PROFILE_PROCESS_POLL, PROFILE_SEND,
                          PROFILE_WRITE, OutcomeProfile, content_text, error_text, exec_fingerprint, is_number,
                          process_fingerprint, strip_volatile, unknown_tool_name)

__all__ = ["KIND_VETO", "KIND_TERMINAL_EXEC_FAILURE", "OUTCOME_KINDS", "Outcome", "outcome_2026_9",
           "normalize_untrusted_markers", "mask_volatile", "MARKER_NEEDLE"]

KIND_VETO = 1  # outcomeKind "tool-loop-veto" (docs/detection-rules.md §11.1)
KIND_TERMINAL_EXEC_FAILURE = 2  # outcomeKind "terminal-exec-failure" (§4.3 rule 5)
OUTCOME_KINDS = {KIND_VETO: "tool-loop-veto", KIND_TERMINAL_EXEC_FAILURE: "terminal-exec-failure"}


class Outcome(NamedTuple):
    """A recorded outcome under 2026.9.6 (docs/detection-rules.md §11.4.3): hashes are None when absent, ``kind`` 0 = none."""

    result_hash: str | None
    unknown_tool: str | None
    kind: int
    no_progress: bool
    failure_hash: str | None


_MARKER_OPEN = "<<<EXTERNAL_UNTRUSTED_CONTENT id="
_MARKER = re.compile(
    r'<<<EXTERNAL_UNTRUSTED_CONTENT id=(\\*)"([0-9a-f]{16})\1">>>'
    r'((?:(?!<<<EXTERNAL_UNTRUSTED_CONTENT|<<<END_EXTERNAL_UNTRUSTED_CONTENT).)*?)'
    r'<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\1"\2\1">>>',
    re.DOTALL,
)
_QUOTED_RUN = re.compile(r'(\\*)"')  # k backslashes and a quote; a bare quote is k = 0
_ZERO_ID = "0" * 16


def _marker_rewrite(match: re.Match[str]) -> str:
    escape, body = match.group(1), match.group(3)
    step = len(escape) + 1
    if step & (step - 1):  # n + 1 is not a power of two
        return match.group(0)
    if any((len(run) + 1) % step for run in _QUOTED_RUN.findall(body)):
        return match.group(0)
    return (f'<<<EXTERNAL_UNTRUSTED_CONTENT id={escape}"{_ZERO_ID}{escape}">>>{body}'
            f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id={escape}"{_ZERO_ID}{escape}">>>')


def normalize_untrusted_markers(text: str) -> str:
    """docs/detection-rules.md §11.4.3: the untrusted-content marker normaliser.

    Each well-formed marker pair (16 lower-case hex digits, the same id and the
    same escaping E of n backslashes at all four places, no other marker inside)
    gets both ids ``0000000000000000`` when n + 1 is a power of two and every
    ``"`` in its body, with the k backslashes before it (k = 0 for a bare quote),
    has n + 1 dividing k + 1: the body is escaped as deep as the marker. Other
    pairs are left as they are. Matches do not overlap.
    """
    if _MARKER_OPEN not in text:
        return text
    return _MARKER.sub(_marker_rewrite, text)


# An outcome digest under 2026.9.6, ``(value, prefix="") -> str``: every string and key through
# normalize_untrusted_markers, which changes only strings holding the marker's opening.
MARKER_NEEDLE = _MARKER_OPEN.encode()  # every string the normaliser changes holds it (canonical.normalizing_digest)
_digest_2026_9 = normalizing_digest(normalize_untrusted_markers, MARKER_NEEDLE)


# docs/detection-rules.md §11.4.3 rule 5: what varies between runs of one failing command, masked to "#" in this order.
# Each pattern comes with a cheap test that must pass for it to match at all (regex scans of long outputs are
# what costs here): every pattern needs a digit, the first two a ":", the word patterns their word.
_JS_SPACE = "[" + re.escape(JS_WHITESPACE) + "]"
# JavaScript's /iu: letters match by simple case folding (s also matches U+017F, k U+212A), and \b's word
# characters are [A-Za-z0-9_] plus those two. Spelled out so Python's own folding (i/U+0130...) plays no part.
_FOLDS = {"s": "sS\u017f", "k": "kK\u212a"}
_WORD = "[A-Za-z0-9_\u017f\u212a]"
_START, _END = f"(?<!{_WORD})(?={_WORD})", f"(?<={_WORD})(?!{_WORD})"  # \b before a word / after it


def _iu(words: str) -> str:
    """``words`` (ASCII letters and ``|?``) as /iu would match them."""
    return "".join(f"[{_FOLDS.get(ch, ch + ch.upper())}]" if ch.isalpha() else ch for ch in words)


_VOLATILE = tuple((re.compile(pattern), needs) for pattern, needs in (
    (r"[0-9]{4}-[0-9]{2}-[0-9]{2}[tT ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:[zZ]|[+-][0-9]{2}:[0-9]{2})?",
     ":"),  # date-time
    (r"[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?", ":"),  # clock time (no word boundary)
    (f"{_START}(?:{_iu('attempt|retry')}){_END}(?:{_JS_SPACE}|[#:=])*[0-9]+", ("attempt", "retry")),  # counters
    (f"(?<!{_WORD})[0-9]+(?:\\.[0-9]+)?{_JS_SPACE}?(?:{_iu('ns|us|ms|seconds?|minutes?|hours?|s')}){_END}",
     None),  # durations
    (f"{_START}(?:{_iu('pid|ppid')}){_END}(?:{_JS_SPACE}|[#:=])*[0-9]+", ("pid",)),  # process ids
))
_DIGITS = "0123456789"


def mask_volatile(output: str) -> str:
    """docs/detection-rules.md §11.4.3 rule 5: ``output`` with timestamps, clock times, attempt counters, durations and pids
    replaced by ``#``."""
    if not any(digit in output for digit in _DIGITS):
        return output
    lowered = None
    for pattern, needs in _VOLATILE:
        if type(needs) is str:
            if needs not in output:
                continue
        elif needs is not None:
            if lowered is None:
                lowered = output.lower()  # ASCII letters fold as the patterns' (?i) does; others do not matter
            if not any(word in lowered for word in needs):
                continue
        output = pattern.sub("#", output)
    return output


def _terminal_failure(details: dict, fingerprint: dict, result_hash: str) -> str | None:
    """The failure identity hash of a terminal exec failure (docs/detection-rules.md §11.4.3 rule 5), or None for another outcome.

    ``result_hash`` is the digest of ``fingerprint``: the identity is that same digest when masking changes
    nothing (the exit code is a number here, as in the fingerprint).
    """
    exit_code = details.get("exitCode")
    if not is_number(exit_code) or exit_code == 0 or not math.isfinite(exit_code):
        return None
    if fingerprint["status"] not in ("completed", "failed") or fingerprint["timedOut"]:
        return None
    output = fingerprint["output"]
    if output == "" or (output[:1] == "(" and output == f"(Command exited with code {js_number(exit_code)})"):
        return None
    masked = mask_volatile(output)
    return result_hash if masked == output else _digest_2026_9({**fingerprint, "output": masked})


def outcome_2026_9(profile: OutcomeProfile, result: Any, error: Any) -> Outcome | None:
    """The outcome of docs/detection-rules.md §4.3 as 2026.9.6 records it (docs/detection-rules.md §11.4.3), or None when nothing is recorded.

    Changes against :func:`outcome_hash`: every digest uses the marker normaliser;
    a thrown value and a ``write`` that changed nothing are no-progress; the
    detector's own veto is recorded (kind :data:`KIND_VETO`, no hash); a terminal
    exec failure gets its kind and a failure identity.
    """
    if error is not None:
        return Outcome(_digest_2026_9(error_text(error), "error:"), unknown_tool_name(error), 0, True, None)
    if result is None or result is UNDEFINED:
        return None
    if not isinstance(result, dict):
        return Outcome(_digest_2026_9(result), None, 0, False, None)
    details = result.get("details")
    if not isinstance(details, dict):
        details = {}
    if details.get("status") == "blocked" and details.get("deniedReason") == "tool-loop":
        return Outcome(None, None, KIND_VETO, False, None)
    text = content_text(result)
    if profile == PROFILE_EXEC:
        fingerprint = exec_fingerprint(details, text)
        if fingerprint is not None:
            result_hash = _digest_2026_9(fingerprint)
            failure = _terminal_failure(details, fingerprint, result_hash) if "exitCode" in fingerprint else None
            if failure is not None:
                return Outcome(result_hash, None, KIND_TERMINAL_EXEC_FAILURE, False, failure)
            return Outcome(result_hash, None, 0, False, None)
    elif profile == PROFILE_WRITE and details.get("changed") is False:
        return Outcome(digest({"status": "unchanged"}), None, 0, True, None)
    if profile == PROFILE_PROCESS_POLL:
        value: Any = process_fingerprint("poll", details, text)
    elif profile == PROFILE_PROCESS_LOG:
        value = process_fingerprint("log", details, text)
    elif profile == PROFILE_SEND:
        value = strip_volatile(details)
    else:
        value = {"details": details, "text": text}
    return Outcome(_digest_2026_9(value), None, 0, False, None)
