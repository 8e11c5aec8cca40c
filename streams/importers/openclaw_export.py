"""``openclaw sessions export-trajectory`` bundles (OpenClaw 2026.9.x) -> stream events.

A bundle is a directory ``.openclaw/trajectory-exports/openclaw-trajectory-<id>-<time>/``; its
``events.jsonl`` holds one trajectory record per line (``traceSchema: "openclaw-trajectory"``),
from two sources: ``runtime`` (the run's own trace: ``tool.call``, ``tool.result``, ...) and
``transcript`` (the session's transcript entries, each with ``entryId``, ``parentEntryId``, ``ts``
and the entry in ``data``). The transcript records are turned back into transcript entries
(``user.message``, ``assistant.message``, ``tool.result`` -> ``message`` entries with
``data.message``; ``session.custom`` -> ``custom``; ``session.compaction`` -> ``compaction``)
and mapped as a transcript is (:mod:`streams.importers.openclaw`), with the run ids OpenClaw
writes on each message (:func:`~streams.importers.openclaw_runs.message_runs`); ``session_id`` and
``session_key`` come from the records, ``agent_id`` from the session key (``agent:<id>:...``).
``source`` is ``{"path": <events.jsonl>, "line": <its line>}``.

The bundle is written for sharing: OpenClaw replaces local paths in it with placeholders
(``$OPENCLAW_STATE_DIR``, ``$WORKSPACE_DIR``). Results that contain such paths therefore hash
differently than they did live (identical results still hash identically, so loops are still
found); for a backtest that must equal the live verdicts, import the session store itself
(:mod:`streams.importers.openclaw_sqlite`). ``session-branch.json`` of the bundle is not read (it
is cut short on long sessions).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .events import ErrorHandler, EventIds, SessionFormatError, read_jsonl, report
from .openclaw import emit_events, live_entries
from .openclaw_runs import message_runs

__all__ = ["TRACE_SCHEMA", "looks_like", "read"]

TRACE_SCHEMA = "openclaw-trajectory"
_MESSAGES = frozenset({"user.message", "assistant.message", "tool.result"})


def looks_like(first: Any) -> bool:
    """Whether a file's first JSON line is a trajectory record (an export bundle's ``events.jsonl``)."""
    return isinstance(first, dict) and first.get("traceSchema") == TRACE_SCHEMA


def _entry(record: dict[str, Any]) -> dict[str, Any] | None:
    kind, data = record.get("type"), record.get("data")
    if not isinstance(data, dict):
        return None
    head = {"id": record.get("entryId"), "parentId": record.get("parentEntryId"), "timestamp": record.get("ts")}
    if kind in _MESSAGES and isinstance(data.get("message"), dict):
        return {"type": "message", **head, "message": data["message"]}
    if kind == "session.custom":
        return {"type": "custom", **head, "customType": data.get("customType"), "data": data.get("data")}
    if kind == "session.compaction":
        return {**data, "type": "compaction", **head}
    return None


def read(path: Path, on_error: ErrorHandler | None = None) -> Iterator[dict[str, Any]]:
    """Yield the stream events of one bundle's ``events.jsonl`` (see the module docstring)."""
    path = Path(path)
    entries: list[tuple[int, dict[str, Any]]] = []
    session_id: str | None = None
    session_key: str | None = None
    for line, record in read_jsonl(path, on_error):
        if record.get("traceSchema") != TRACE_SCHEMA:
            report(SessionFormatError(path, line, "not an OpenClaw trajectory record"), on_error)
            continue
        if record.get("source") != "transcript":
            continue
        session_id = session_id or (record.get("sessionId") if isinstance(record.get("sessionId"), str) else None)
        session_key = session_key or (record.get("sessionKey") if isinstance(record.get("sessionKey"), str) else None)
        entry = _entry(record)
        if entry is not None:
            entries.append((line, entry))
    if session_id is None:
        if entries or path.stat().st_size:
            report(SessionFormatError(path, None, "no transcript records with a session id"), on_error)
        return
    base: dict[str, Any] = {"session_id": session_id}
    if session_key:
        base["session_key"] = session_key
        parts = session_key.split(":")
        if len(parts) >= 3 and parts[0] == "agent" and parts[1]:
            base["agent_id"] = parts[1]
    live = live_entries(entries)
    yield from emit_events(path, live, message_runs(session_id, live), base, EventIds(session_id))
