"""Building blocks shared by the importers: the error type, event constructors, JSONL reading.

Every importer yields plain ``dict`` events in the stream schema (docs/detection-rules.md §9, §10):

* ``tool_call``: ``{type, run_id, session_id, [session_key], [agent_id], tool_call_id,
  tool_name, [args], result, error, [outcome_follows], event_id, ts, source}``.
  ``args`` absent means JavaScript ``undefined``; ``result: null`` means the tool returned
  nothing; ``error`` is ``null``, a string (a thrown ``Error`` with that message) or another
  JSON value (a thrown non-Error value).
* ``tool_result``: ``{type, run_id, session_id, [session_key], [agent_id], tool_call_id,
  tool_name, [args], result, error, event_id, ts, source}``; only after a ``tool_call``
  carrying ``outcome_follows: true``, with that call's ``tool_name`` and ``args`` (docs/detection-rules.md §9:
  what OpenClaw's after-tool-call hook has).
* ``compaction_retry``: ``{type, run_id, session_id, [session_key], [agent_id], event_id, ts,
  source}``.

``session_key`` is on every event of a session that has one (so a ``compaction_retry`` arms the
guard its calls see, docs/detection-rules.md §7, and a result finds its session's state, docs/detection-rules.md §8.1).

A call is written with its outcome inline when nothing happens between the call and its
result; it is written as an ``outcome_follows`` call and a later ``tool_result`` when the runner
recorded something else in between (another call of the same batch, another call's
completion, a sub-agent's calls): see :func:`fold_results`.

``ts`` is epoch milliseconds (int); ``source`` is ``{"path": str, "line": int}`` with a
1-based physical line (for a pretty-printed ``.traj`` file, the line is 1 and the step
index is in ``source["step"]``). ``event_id`` is ``<session_id>:<line>:<n>`` (``n`` counts
the events made from that line), so importing a file twice gives identical output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from streams.wire.codecs import json_loads

__all__ = [
    "SessionFormatError",
    "FileNotRead",
    "ErrorHandler",
    "EventIds",
    "read_jsonl",
    "not_utf8",
    "iso_to_ms",
    "text_result",
    "joined_text",
    "structured_result",
    "VOLATILE_KEYS",
    "report",
    "fold_results",
    "number_events",
]


class SessionFormatError(ValueError):
    """A recorded session that cannot be read as the format it claims to be.

    Attributes:
        path: the file.
        line: 1-based line number of the offending line (``None`` for whole-file problems).
        reason: what is wrong, in words.
    """

    def __init__(self, path: str | Path, line: int | None, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


class FileNotRead(SessionFormatError):
    """A file left out whole, and no session data lost with it: not a session this can read (no known
    format, a configuration file, an SQLite database that is not OpenClaw's), or one that cannot be
    opened. ``line`` is None. The commands list these and do not count them as damaged input
    (docs/offline.md, "Exit status"); every other :class:`SessionFormatError` is session data lost."""


# Called with each recoverable format error; when an importer has none it raises instead.
ErrorHandler = Callable[[SessionFormatError], None]


def discover_files(root: Path, pattern: str, key: Callable[[Path], Any] | None = None) -> Iterator[Path]:
    """Files matching ``pattern`` under ``root`` (recursively, sorted by ``key``), or ``root`` itself; a
    ``pattern`` match compressed (``<match>.gz``, ``<match>.zst``) counts too."""
    from .compressed import SUFFIXES

    if root.is_dir():
        found = (p for pat in (pattern, *(pattern + s for s in SUFFIXES)) for p in root.rglob(pat) if p.is_file())
        yield from sorted(found, key=key)
    elif root.is_file():
        yield root


def report(error: SessionFormatError, on_error: ErrorHandler | None) -> None:
    """Hand ``error`` to ``on_error``, or raise it when there is no handler."""
    if on_error is None:
        raise error
    on_error(error)


def not_utf8(exc: UnicodeDecodeError, offset: int | None = None) -> str:
    """``not UTF-8 text: <reason> at byte <offset>``; ``offset`` is the bad byte's in its line
    (0-based), by default ``exc.start`` (when the decoded bytes were the line)."""
    return f"not UTF-8 text: {exc.reason} at byte {exc.start if offset is None else offset}"


def read_jsonl(path: Path, on_error: ErrorHandler | None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, parsed_value)`` for each non-blank line of a JSON Lines file.

    A line that is not UTF-8, not JSON, or not a JSON object, is reported as a
    :class:`SessionFormatError` (raised when ``on_error`` is ``None``) and skipped. A gzip or
    Zstandard file is read decompressed (:mod:`streams.importers.compressed`); its damage ends the
    file, reported for the file (``line`` None), the lines before it kept.
    """
    from .compressed import CompressedDataError, open_binary

    with open_binary(path) as fh:  # bytes, decoded per line: a line that is not UTF-8 costs that line only
        lines = enumerate(fh, 1)
        while True:
            try:
                lineno, raw = next(lines)
            except StopIteration:
                return
            except CompressedDataError as exc:  # what was decompressed before the damage is kept
                report(SessionFormatError(path, None, f"{exc}: the rest of the file is lost"), on_error)
                return
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                report(SessionFormatError(path, lineno, not_utf8(exc)), on_error)
                continue
            if not text.strip():
                continue
            try:
                value = json_loads(text)
            except json.JSONDecodeError as exc:
                report(SessionFormatError(path, lineno, f"not JSON: {exc.msg}"), on_error)
                continue
            if not isinstance(value, dict):
                report(SessionFormatError(path, lineno, "line is not a JSON object"), on_error)
                continue
            yield lineno, value


def iso_to_ms(value: Any) -> int | None:
    """ISO-8601 text (``2026-05-04T06:25:35.641Z``) or epoch ms number -> epoch ms, else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        try:
            return int(round(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000))
        except ValueError:
            return None
    return None


def text_result(text: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """OpenClaw's tool result shape ``{"content": [{"type": "text", "text": ...}], "details": {...}}``."""
    return {"content": [{"type": "text", "text": text}], "details": details if details is not None else {}}


# Timing fields some tools put in their structured result (Claude Code's Grep, WebFetch, WebSearch, Task):
# they change from one identical call to the next, so they would make every outcome look like progress.
VOLATILE_KEYS = frozenset({"durationMs", "durationSeconds", "totalDurationMs", "duration_ms", "duration"})


def structured_result(response: Any) -> dict[str, Any]:
    """A runner's parsed tool result (a hook's ``tool_response``, Claude Code's ``toolUseResult``) in OpenClaw's shape.

    A string is the text the tool returned (``{"content": [{"type": "text", "text": ...}], "details": {}}``);
    a list is content blocks; an object is the tool's structured result, kept in ``details`` without
    its timing fields (:data:`VOLATILE_KEYS`); None (no response) is an empty result. The engine hashes
    ``details`` and the text together (docs/detection-rules.md §4.3 rule 8), so two responses count as the same outcome
    exactly when they are equal but for their timings. The live hooks and the importers both use it,
    so a live run and the backtest of its recording agree on every result hash.
    """
    if isinstance(response, str):
        return text_result(response)
    if isinstance(response, list):
        return {"content": response, "details": {}}
    if isinstance(response, dict):
        return {"content": [], "details": {k: v for k, v in response.items() if k not in VOLATILE_KEYS}}
    if response is None:
        return {"content": [], "details": {}}
    return {"content": [], "details": {"value": response}}


def joined_text(content: Any) -> str:
    """The text of a result ``content``: a string as is, or the ``text`` of its blocks joined by ``\\n``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


class EventIds:
    """Deterministic event ids ``<prefix>:<line>:<n>``, ``n`` counting events per line."""

    __slots__ = ("_prefix", "_counts")

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._counts: dict[int, int] = {}

    def next(self, line: int) -> str:
        n = self._counts.get(line, 0)
        self._counts[line] = n + 1
        return f"{self._prefix}:{line}:{n}"


def fold_results(events: list[dict[str, Any]], apart: set[str] = frozenset()) -> list[dict[str, Any]]:
    """Fold each ``tool_result`` that comes right after its own ``outcome_follows`` call into
    that call (one ``tool_call`` with the outcome inline), except for calls whose id is in
    ``apart``.

    Importers first write every executed call as an ``outcome_follows`` call and its outcome as
    a ``tool_result`` at the result's place in the log; then this keeps the two-event form only
    where it matters: something was recorded between call and result, or the call belongs to a
    batch that the runner checked and recorded as a whole before any result existed (``apart``:
    an inline outcome would be recorded before the batch's next call is checked, docs/detection-rules.md §3 steps
    2-6). Both forms give the engine the same records; the fold keeps the output short.

    Returns a new list; the events themselves are changed in place (the folded call takes the
    result's ``result`` and ``error`` and loses ``outcome_follows``).
    """
    out: list[dict[str, Any]] = []
    for event in events:
        prev = out[-1] if out else None
        if (event["type"] == "tool_result" and prev is not None and prev["type"] == "tool_call"
                and prev.get("outcome_follows") and prev["tool_call_id"] == event["tool_call_id"]
                and prev["tool_call_id"] not in apart):
            del prev["outcome_follows"]
            prev["result"], prev["error"] = event["result"], event["error"]
            continue
        out.append(event)
    return out


def number_events(events: list[dict[str, Any]], ids: EventIds) -> list[dict[str, Any]]:
    """Give each event its ``event_id`` from its ``source`` line, in order (see the module docstring)."""
    for event in events:
        event["event_id"] = ids.next(event["source"]["line"])
    return events
