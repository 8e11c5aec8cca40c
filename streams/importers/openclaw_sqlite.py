"""OpenClaw 2026.9.x session store (``agents/<agentId>/agent/openclaw-agent.sqlite``) -> stream events.

From 2026.9 OpenClaw keeps an agent's sessions in one SQLite database under its state directory
(``$OPENCLAW_STATE_DIR``, default ``~/.openclaw``) instead of JSONL transcripts. The tables read:

* ``schema_meta``: ``agent_id`` of the agent the database belongs to (row ``role = 'agent'``);
* ``session_windows``: one row per session: ``session_id``, ``session_key``;
* ``transcript_events``: the session's transcript, one pi-coding-agent entry per row in ``seq``
  order, exactly the lines a 2026.7 ``<sessionId>.jsonl`` transcript holds (``seq`` 0 is the
  ``session`` header): ``event_json`` as text, or ``event_zstd`` (Zstandard-compressed UTF-8 JSON
  of ``event_utf8_bytes`` bytes) for larger entries.

Each session's entries are mapped exactly as a JSONL transcript's (:mod:`streams.importers.openclaw`:
calls, outcomes, compactions, re-written branches), so a session gives the same events whichever
way it was stored; ``source`` is ``{"path": <database>, "line": seq + 1, "session": <session id>}``
(the line the entry would have in the session's JSONL transcript). Ids, as the OpenClaw plugin
sends them live: ``session_id`` from ``session_windows``, ``session_key`` its ``session_key``,
``agent_id`` from ``schema_meta`` (else the ``agents/<agentId>/agent`` path segment), and
``run_id`` the ``__openclaw.runId`` 2026.9.x writes on every message of a run (the ``runId`` of
the plugin hooks' context). An entry without one (a compaction, a custom entry) belongs to the
run of the next message that has one (a compaction retries the prompt of the run that follows
it), else of the last one before it; a session with no run ids at all is cut into runs as a
transcript without a sidecar is.

Read-only and without disturbing a running OpenClaw: the database is opened through a
``file:...?mode=ro`` URI with ``PRAGMA query_only``, so nothing is written (no journal, no
checkpoint); in WAL mode readers never block OpenClaw's writer. Only when a read-only open fails
(a WAL database in a directory this user cannot write, with no ``-shm`` file) is it opened
``immutable=1``, which reads the main file only (changes still in the WAL are not seen).

Errors: a file that is not an OpenClaw agent database, or a damaged one, is reported as a
:class:`~streams.importers.events.SessionFormatError` for the whole file; a row that cannot be
decoded (bad JSON, bad Zstandard frame, not an object) as an error at its line, and skipped.
Archived transcripts (``session_transcript_archives``, sessions deleted or reset) are not read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streams.wire.codecs import json_loads
from .events import ErrorHandler, EventIds, SessionFormatError, discover_files, report
from .openclaw import emit_events, live_entries
from .openclaw_runs import message_runs

__all__ = ["DATABASE_NAME", "discover", "read", "is_database"]

DATABASE_NAME = "openclaw-agent.sqlite"
SQLITE_MAGIC = b"SQLite format 3\x00"
# the largest entry OpenClaw stores compressed (its CHECK constraint on event_utf8_bytes)
MAX_ENTRY_BYTES = 4 * 1024 * 1024


def is_database(path: Path) -> bool:
    """Whether ``path`` starts with SQLite's file header (cheap: reads 16 bytes)."""
    try:
        with path.open("rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def discover(root: Path) -> Iterator[Path]:
    """``openclaw-agent.sqlite`` files under ``root`` (recursively, sorted), or ``root`` itself."""
    yield from discover_files(root, DATABASE_NAME)


def _connect(path: Path) -> sqlite3.Connection:
    """Read-only (see the module docstring); text comes back as bytes, decoded where it is used, so
    a damaged string costs its row, not the file."""
    uri = path.resolve().as_uri()
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True)
        conn.text_factory = bytes
        conn.execute("PRAGMA query_only = ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the file: fails here if it cannot
        return conn
    except sqlite3.OperationalError as exc:
        if "unable to open" not in str(exc):
            raise
    conn = sqlite3.connect(f"{uri}?immutable=1", uri=True)
    conn.text_factory = bytes
    conn.execute("PRAGMA query_only = ON")
    return conn


def _text(value: object) -> str | None:
    """A TEXT column read as bytes -> str (undecodable bytes kept as surrogate escapes); other values -> None."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value if isinstance(value, str) else None


def read(path: Path, on_error: ErrorHandler | None = None) -> Iterator[dict[str, Any]]:
    """Yield the stream events of every session in one OpenClaw agent database (module docstring)."""
    path = Path(path)
    try:
        sessions, agent_id, rows_of = _load(path)
    except (sqlite3.DatabaseError, UnicodeDecodeError, MemoryError) as exc:  # a damaged schema can fail to decode
        report(SessionFormatError(path, None, f"not a readable OpenClaw agent database: {exc}"), on_error)
        return
    if agent_id is None:
        agent_id = _agent_from_path(path)
    for session_id, session_key in sessions:
        if not session_id:
            report(SessionFormatError(path, None, "a session without a session id: skipped"), on_error)
            continue
        entries = list(_entries(path, session_id, rows_of(session_id), on_error))
        if entries and entries[0][1].get("type") == "session":
            entries = entries[1:]
        base: dict[str, Any] = {"session_id": session_id}
        if session_key:
            base["session_key"] = session_key
        if agent_id:
            base["agent_id"] = agent_id
        live = live_entries(entries)
        for event in emit_events(path, live, message_runs(session_id, live), base, EventIds(session_id)):
            event["source"]["session"] = session_id
            yield event


def _load(path: Path) -> tuple[list[tuple[str, str | None]], str | None, Any]:
    """The sessions, the agent id and a reader of one session's rows; the rows are read here too,
    so the database is closed before any event is yielded (a long import holds no read transaction)."""
    if not is_database(path):
        raise sqlite3.DatabaseError("file is not a database")
    conn = _connect(path)
    try:
        tables = {_text(name) for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = {"session_windows", "transcript_events"} - tables
        if missing:
            raise sqlite3.DatabaseError(f"no {', '.join(sorted(missing))} table (not an OpenClaw 2026.9 agent database)")
        agent_id = None
        if "schema_meta" in tables:
            row = conn.execute("SELECT agent_id FROM schema_meta WHERE role = 'agent' AND agent_id IS NOT NULL "
                               "ORDER BY meta_key LIMIT 1").fetchone()
            agent_id = _text(row[0]) if row else None
        sessions = [(_text(sid), _text(key)) for sid, key in conn.execute(
            "SELECT session_id, session_key FROM session_windows ORDER BY coalesce(started_at, created_at), session_id")]
        rows: dict[str | None, list[tuple[int, Any, Any, Any]]] = {sid: [] for sid, _ in sessions}
        for sid, seq, text, blob, size in conn.execute(
                "SELECT session_id, seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events "
                "ORDER BY session_id, seq"):
            if isinstance(seq, int):
                rows.setdefault(_text(sid), []).append((seq, text, blob, size))
    finally:
        conn.close()
    return sessions, agent_id, lambda sid: rows.get(sid, [])


def _entries(path: Path, session_id: str, rows: list[tuple[int, Any, Any, Any]],
             on_error: ErrorHandler | None) -> Iterator[tuple[int, dict[str, Any]]]:
    for seq, text, blob, size in rows:
        line = seq + 1
        try:
            if text is None:
                text = _decompress(blob, size)
            elif isinstance(text, bytes):
                text = text.decode("utf-8")
            entry = json_loads(text)
        except (ValueError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError, zstd errors are ValueErrors
            report(SessionFormatError(path, line, f"session {session_id}: entry {seq} unreadable: {exc}"), on_error)
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            report(SessionFormatError(path, line, f"session {session_id}: entry {seq} is not a transcript entry"), on_error)
            continue
        if entry["type"] == "message" and not isinstance(entry.get("message"), dict):
            report(SessionFormatError(path, line, f"session {session_id}: message entry without a message object"), on_error)
            continue
        yield line, entry


def _decompress(blob: Any, size: Any) -> str:
    import zstandard  # only needed for the entries OpenClaw compressed

    if not isinstance(blob, bytes) or not isinstance(size, int) or not 0 < size <= MAX_ENTRY_BYTES:
        raise ValueError("no event_json and no usable event_zstd")
    try:
        data = zstandard.ZstdDecompressor().decompress(blob, max_output_size=size)
    except zstandard.ZstdError as exc:
        raise ValueError(f"bad Zstandard frame ({exc})") from None
    if len(data) != size:
        raise ValueError(f"decompressed to {len(data)} bytes, expected {size}")
    return data.decode("utf-8")


def _agent_from_path(path: Path) -> str | None:
    parts = path.resolve().parts
    if len(parts) >= 4 and parts[-2] == "agent" and parts[-4] == "agents":
        return parts[-3]
    return None

