"""Tool-name normalisation, args hashes, outcome hashes and unknown-tool names.

These are the fingerprints every detector compares (docs/detection-rules.md §3 step 1, §4.2-§4.4).
All functions are pure and take decoded JSON values. How 2026.9.6 records outcomes (kinds, the
marker normaliser, masked failure identities): :mod:`~streams.detection.outcomes_2026_9`.
"""

from __future__ import annotations

import re
from typing import Any

from .canonical import UNDEFINED, digest, js_number, stable_stringify

__all__ = [
    "normalize_tool_name",
    "js_trim",
    "js_lower",
    "args_hash",
    "OutcomeProfile",
    "outcome_profile",
    "outcome_hash",
    "error_text",
    "unknown_tool_name",
    "JS_WHITESPACE",
    "content_text",
    "exec_fingerprint",
    "process_fingerprint",
    "strip_volatile",
    "is_number",
    "PROFILED_TOOLS",
    "TOOL_NAMES",
]

# JavaScript String#trim removes WhiteSpace and LineTerminator code points.
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_TOOL_ALIASES = {"bash": "exec", "apply-patch": "apply_patch"}
# 2026.7.35 looks aliases up in a plain object literal, so a lower-cased name that is a property of
# Object.prototype resolves to that property: ``constructor`` to the function ``Object`` and
# ``__proto__`` to ``Object.prototype``. Every later use (args-hash prefix, messages, warning keys)
# is that value's string form (docs/detection-rules.md §3 step 1).
_TOOL_ALIASES_2026_7 = {**_TOOL_ALIASES, "constructor": "function Object() { [native code] }",
                        "__proto__": "[object Object]"}
# docs/detection-rules.md §11.3.1 step 1: one alias more, and the lookup is a Map (``constructor`` stays a plain name, as here)
_TOOL_ALIASES_2026_9 = {**_TOOL_ALIASES, "cron": "automations"}


def js_trim(text: str) -> str:
    """JavaScript ``String#trim`` (Python's ``strip`` trims a different set)."""
    return text.strip(JS_WHITESPACE)


# Lower-case mappings that Node's ICU (Unicode 15.1/16, Node 20 and 24 alike) has and Python 3.11's
# Unicode 14 tables lack: (first, last, offset) runs of code points whose lower case is cp + offset.
_JS_EXTRA_LOWER = {
    cp: cp + offset
    for first, last, offset in ((0x1C89, 0x1C89, 1), (0xA7CB, 0xA7CB, -42343), (0xA7CC, 0xA7CC, 1),
                                (0xA7CE, 0xA7CE, 1), (0xA7D2, 0xA7D2, 1), (0xA7D4, 0xA7D4, 1),
                                (0xA7DA, 0xA7DA, 1), (0xA7DC, 0xA7DC, -42561), (0x10D50, 0x10D65, 32),
                                (0x16EA0, 0x16EB8, 27))
    for cp in range(first, last + 1)
}


def js_lower(text: str) -> str:
    """JavaScript ``String#toLowerCase`` as Node's ICU does it (docs/detection-rules.md §3 step 1): Python's
    ``lower`` (full mappings, final sigma) plus the mappings of characters newer than Python's tables."""
    lowered = text.lower()
    return lowered if lowered.isascii() else lowered.translate(_JS_EXTRA_LOWER)


_TOOL_NAME_CACHE: dict[str, str] = {}
_TOOL_NAME_CACHE_2026_9: dict[str, str] = {}
TOOL_NAMES = (_TOOL_NAME_CACHE, _TOOL_NAME_CACHE_2026_9)
"""What :func:`normalize_tool_name` answered, by raw name (str), under 2026.7 and 2026.9.6: a hit is its
answer (a caller may look a name up here first; the function fills them)."""
_TOOL_NAME_CACHE_SIZE = 4096  # distinct raw tool names remembered (per profile)


def normalize_tool_name(name: Any, is_2026_9: bool = False) -> str:
    """docs/detection-rules.md §3 step 1: trim, lower-case, map ``bash``/``apply-patch`` aliases
    (2026.9.6, ``is_2026_9``: ``cron`` -> ``automations`` too).

    An absent or empty name is ``tool`` (before trimming, so a blank name
    normalises to the empty string).
    """
    cache = _TOOL_NAME_CACHE_2026_9 if is_2026_9 else _TOOL_NAME_CACHE
    if type(name) is str:
        cached = cache.get(name)
        if cached is not None:
            return cached
    if name is None or name is UNDEFINED or name == "":
        return "tool"
    raw = name if isinstance(name, str) else stable_stringify(name)
    normalized = js_lower(js_trim(raw))
    normalized = (_TOOL_ALIASES_2026_9 if is_2026_9 else _TOOL_ALIASES_2026_7).get(normalized, normalized)
    if type(name) is str:
        if len(cache) >= _TOOL_NAME_CACHE_SIZE:
            cache.clear()
        cache[name] = normalized
    return normalized


def args_hash(tool: str, args: Any) -> str:
    """docs/detection-rules.md §4.2: ``<normalised tool>:<digest of the canonical args>``."""
    return digest(args, tool + ":")


# ----------------------------------------------------------------- outcome rules

_MESSAGE_SEND_ACTIONS = frozenset(
    {"send", "broadcast", "reply", "thread-reply", "sendWithEffect", "sendAttachment",
     "upload-file", "sticker", "poll"}
)
_VOLATILE_SEND_KEYS = frozenset(
    {"messageId", "message_id", "messageIds", "platformMessageId", "platformMessageIds",
     "fileId", "file_id", "fileKey", "pollId", "poll_id", "receipt", "runId",
     "idempotencyKey", "ts", "timestamp", "sentAt", "deliveredAt", "createdAt"}
)

# How a call's outcome is hashed depends on the call (tool and args), not only on
# the result; these constants are computed when the call is seen so a deferred
# result (``tool_result``) can be hashed without keeping the args.
PROFILE_PLAIN = 0
PROFILE_EXEC = 1
PROFILE_PROCESS_POLL = 2
PROFILE_PROCESS_LOG = 3
PROFILE_SEND = 4
PROFILE_WRITE = 5  # 2026.9.6 only: ``write``'s unchanged rule (docs/detection-rules.md §11.4.3 rule 6)

OutcomeProfile = int

# docs/detection-rules.md §11.4.3 rule 7: these always count as outbound sends too
_SEND_TOOLS_2026_9 = frozenset({"sessions_send", "conversations_send", "conversations_turn"})


PROFILED_TOOLS = frozenset({"exec", "write", "process", "sessions_send", "message", *_SEND_TOOLS_2026_9})
"""The tools whose outcome rule may be another than :data:`PROFILE_PLAIN` (under either profile), the
configured channel send tools aside: :func:`outcome_profile` of any other tool is :data:`PROFILE_PLAIN`."""


def outcome_profile(tool: str, args: Any, channel_send_tools: frozenset[str], is_2026_9: bool = False) -> OutcomeProfile:
    """Which outcome rule of docs/detection-rules.md §4.3 (rules 5-8) applies to a call of ``tool`` with ``args``
    (``is_2026_9``: with the sends and the ``write`` rule of the docs/detection-rules.md §11.4.3)."""
    if tool == "exec":
        return PROFILE_EXEC
    if is_2026_9:
        if tool == "write":
            return PROFILE_WRITE
        if tool in _SEND_TOOLS_2026_9:
            return PROFILE_SEND
    is_object = isinstance(args, dict)
    if tool == "process" and is_object:
        action = args.get("action")
        if action == "poll":
            return PROFILE_PROCESS_POLL
        if action == "log":
            return PROFILE_PROCESS_LOG
    if tool == "sessions_send":
        return PROFILE_SEND
    if tool == "message" and is_object:
        action = args.get("action")
        if type(action) is str and action in _MESSAGE_SEND_ACTIONS:  # a list or object action is no send (nor unhashable)
            return PROFILE_SEND
    if tool in channel_send_tools and is_object:
        action, to = args.get("action"), args.get("to")
        if isinstance(action, str) and js_trim(action) == "sendMessage" and isinstance(to, str) and to:
            return PROFILE_SEND
    return PROFILE_PLAIN


def error_text(error: Any) -> str:
    """The text that stands for a thrown value (docs/detection-rules.md §4.3 rule 1).

    In the event schema a string is a thrown ``Error`` with that message (an
    empty message falls back to the name ``Error``); any other value is a thrown
    non-Error value: numbers and booleans as their decimal text, the rest as
    their canonical serialisation.
    """
    if isinstance(error, str):
        return error if error else "Error"
    if isinstance(error, bool):
        return "true" if error else "false"
    if isinstance(error, (int, float)):
        try:
            return js_number(error)
        except ValueError:
            return stable_stringify(error).strip('"')
    return stable_stringify(error)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def content_text(result: dict) -> str:
    content = result.get("content")
    if type(content) is list and len(content) == 1:  # the usual one text block: no list, no join
        block = content[0]
        if type(block) is dict:
            text = block.get("text")
            if type(text) is str and type(block.get("type")) is str:
                return text.strip(JS_WHITESPACE)
    if not isinstance(content, list):
        return ""
    texts = [
        block["text"]
        for block in content
        if isinstance(block, dict) and isinstance(block.get("type"), str) and isinstance(block.get("text"), str)
    ]
    return js_trim("\n".join(texts))


def strip_volatile(value: Any) -> Any:
    if isinstance(value, list):
        return [strip_volatile(item) for item in value]
    if not isinstance(value, dict):
        return value
    drop_id = (
        isinstance(value.get("id"), str)
        and isinstance(value.get("text"), str)
        and (
            isinstance(value.get("direction"), str)
            or isinstance(value.get("senderId"), str)
            or isinstance(value.get("accountId"), str)
            or isinstance(value.get("conversation"), dict)
        )
    )
    # OpenClaw copies the kept keys by assignment, and assigning "__proto__" sets the copy's prototype
    # instead of a key: that key never reaches the hash (docs/detection-rules.md §4.3 rule 7)
    return {
        key: strip_volatile(item)
        for key, item in value.items()
        if key not in _VOLATILE_SEND_KEYS and not (drop_id and key == "id") and key != "__proto__"
    }


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def exec_fingerprint(details: dict, text: str) -> Any:
    status = details.get("status")
    if status == "running":
        tail = details.get("tail")
        return {"status": status, "tail": tail if isinstance(tail, str) else ""}
    if status in ("completed", "failed"):
        exit_code = details.get("exitCode")
        aggregated = details.get("aggregated")
        output = js_trim(aggregated) if isinstance(aggregated, str) and js_trim(aggregated) else text
        return {
            "status": status,
            "exitCode": exit_code if is_number(exit_code) else None,
            "timedOut": details.get("timedOut") is True,
            "output": output,
        }
    if status in ("approval-pending", "approval-unavailable"):
        command, warning = details.get("command"), details.get("warningText")
        return {
            "status": status,
            "reason": _str_or_none(details.get("reason")),
            "host": _str_or_none(details.get("host")),
            "command": command if isinstance(command, str) else "",
            "warningText": warning if isinstance(warning, str) else "",
        }
    return None


def process_fingerprint(action: str, details: dict, text: str) -> dict:
    get = details.get
    if action == "poll":
        fields = ("exitCode", "exitSignal", "aggregated")
    else:
        fields = ("totalLines", "totalChars", "truncated", "exitCode", "exitSignal")
    fingerprint = {name: get(name) for name in fields}
    fingerprint["action"] = action
    fingerprint["status"] = get("status", UNDEFINED)
    fingerprint["text"] = text
    return fingerprint


def outcome_hash(profile: OutcomeProfile, result: Any, error: Any) -> str | None:
    """The outcome (result) hash of docs/detection-rules.md §4.3, or None when nothing is recorded.

    Arguments:
        profile: :func:`outcome_profile` of the call.
        result: the returned value; ``None`` means the tool returned nothing.
        error: ``None``, or the thrown value (see :func:`error_text`).
    Returns:
        ``error:<hex>`` for a thrown value, ``<hex>`` for a result, or None for
        no result and for the detector's own veto (``tool-loop`` block).
    """
    if error is not None:
        return digest(error_text(error), "error:")
    if result is None or result is UNDEFINED:
        return None
    if not isinstance(result, dict):
        return digest(result)
    details = result.get("details")
    if not isinstance(details, dict):
        details = {}
    if details.get("status") == "blocked" and details.get("deniedReason") == "tool-loop":
        return None
    text = content_text(result)
    if profile == PROFILE_EXEC:
        fingerprint = exec_fingerprint(details, text)
        if fingerprint is not None:
            return digest(fingerprint)
    elif profile == PROFILE_PROCESS_POLL:
        return digest(process_fingerprint("poll", details, text))
    elif profile == PROFILE_PROCESS_LOG:
        return digest(process_fingerprint("log", details, text))
    elif profile == PROFILE_SEND:
        return digest(strip_volatile(details))
    return digest({"details": details, "text": text})


# JavaScript's /i (without /u) folds case for ASCII only here, so the literal
# words use ASCII-only folding and the name class lists both cases explicitly.
# Whitespace is JavaScript's \s, the set its trim removes (docs/detection-rules.md §4.4): unlike
# Python's \s it holds U+FEFF and not U+001C-U+001F or U+0085.
_JS_S = "[" + JS_WHITESPACE.replace("\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a",
                                     "\u2000-\u200a") + "]"
_UNKNOWN_TOOL_PATTERNS = (
    re.compile(r"(?ai:unknown tool)[:" + _JS_S[1:-1] + r"]+['\"]?([A-Za-z0-9_.-]+)['\"]?"),
    re.compile(r"(?ai:tool)" + _JS_S + r"+['\"]?([A-Za-z0-9_.-]+)['\"]?" + _JS_S + r"+(?ai:not found|is not available)"),
)


def unknown_tool_name(error: Any) -> str | None:
    """docs/detection-rules.md §4.4: the missing tool's lower-cased name named by a thrown error, or None."""
    if error is None:
        return None
    text = js_trim(error_text(error))
    if not text:
        return None
    for pattern in _UNKNOWN_TOOL_PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(1).lower()
    return None
