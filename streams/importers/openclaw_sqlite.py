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

Archived sessions are read too (where 2026.9.6 keeps them, from its ``session-accessor`` and
``session-cold-storage`` code):

* deleted or reset sessions: ``session_transcript_archives`` (``session_id``, ``session_key``,
  ``reason`` ``deleted``/``reset``, ``archive_name``, ``encoding`` ``identity``/``zstd``,
  ``archive_blob``: the transcript as JSON Lines, one entry a line in ``seq`` order). OpenClaw also
  publishes each as a file ``agents/<agentId>/sessions/<sessionId>.jsonl.<reason>.<time>.<generation>``
  (``.zst`` when compressed), and deletes the row only once that file is gone, so the row is read
  and the file is left to it (:func:`owning_database`). They come first, oldest first, each with
  ``source.archive`` = its name; their event ids are ``<session>@<archive name>:<line>:<n>``.
* sessions moved to cold storage (still in ``session_windows``, their rows out of
  ``transcript_events``): ``session_transcript_cold_archives`` names a Zstandard-compressed JSON
  Lines archive, in the row (``storage`` ``sqlite``) or in
  ``agents/<agentId>/sessions/cold/<sha256>.jsonl.zst`` (``storage`` ``file``); its ``{"kind":
  "event", "row": {"seq", "event_json"}}`` records are the session's rows (``source.cold_archive``
  = its name). One that is missing or does not match its SHA-256 is reported for the database and
  the rows left in it are read.

A compressed copy of a database (``openclaw-agent.sqlite.gz``) is decompressed to a temporary file
first (SQLite opens files only).
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams.wire.codecs import json_loads
from .compressed import CompressedDataError, local_copy, open_binary
from .events import ErrorHandler, EventIds, FileNotRead, SessionFormatError, discover_files, report
from .openclaw import emit_events, live_entries
from .openclaw_runs import message_runs

__all__ = ["DATABASE_NAME", "discover", "read", "is_database", "owning_database"]

DATABASE_NAME = "openclaw-agent.sqlite"
SQLITE_MAGIC = b"SQLite format 3\x00"
# the largest entry OpenClaw stores compressed (its CHECK constraint on event_utf8_bytes)
MAX_ENTRY_BYTES = 4 * 1024 * 1024
# an archive OpenClaw writes is at most 256 MiB (its encoder's limit; a cold archive 64 MiB)
MAX_ARCHIVE_BYTES = 256 * 1024 * 1024
ARCHIVES = "session_transcript_archives"
COLD_ARCHIVES = "session_transcript_cold_archives"
_COLD_NAME = re.compile(r"[0-9a-f]{64}\.jsonl\.zst")


def is_database(path: Path) -> bool:
    """Whether ``path`` starts with SQLite's file header, also gzip- or Zstandard-compressed (cheap: reads
    at most a few KB)."""
    try:
        with open_binary(path) as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except (OSError, ValueError):  # CompressedDataError is a ValueError
        return False


def discover(root: Path) -> Iterator[Path]:
    """``openclaw-agent.sqlite`` files under ``root`` (recursively, sorted; compressed copies too), or
    ``root`` itself."""
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


class _NotAgentDatabase(sqlite3.DatabaseError):
    """A readable SQLite database without OpenClaw's session tables (another program's)."""


@dataclass(slots=True)
class _Session:
    """One session to read: its ids, its transcript rows ``[(seq, event_json, event_zstd, size)]`` in
    ``seq`` order (or, for an archive, ``archive``: its name, reason, encoding and bytes), and where its
    rows came from beyond ``transcript_events`` (``cold``: a cold archive's name)."""

    session_id: str | None
    session_key: str | None
    rows: list[tuple[int, Any, Any, Any]] = field(default_factory=list)
    archive: tuple[str, str, str, bytes] | None = None
    cold: dict[str, Any] | None = None


def read(path: Path, on_error: ErrorHandler | None = None) -> Iterator[dict[str, Any]]:
    """Yield the stream events of every session in one OpenClaw agent database (module docstring)."""
    path = Path(path)
    try:
        with local_copy(path) as database:
            sessions, agent_id = _load(database)
    except _NotAgentDatabase as exc:
        report(FileNotRead(path, None, f"an SQLite database, not OpenClaw's agent database ({exc})"), on_error)
        return
    except (sqlite3.DatabaseError, UnicodeDecodeError, MemoryError, CompressedDataError) as exc:
        # a damaged schema can fail to decode
        report(SessionFormatError(path, None, f"not a readable OpenClaw agent database: {exc}"), on_error)
        return
    if agent_id is None:
        agent_id = _agent_from_path(path)
    for session in sessions:
        if not session.session_id:
            report(SessionFormatError(path, None, "a session without a session id: skipped"), on_error)
            continue
        if session.archive is not None:
            entries = list(_archive_entries(path, session, on_error))
        else:
            if session.cold is not None:
                session.rows = _with_cold_rows(path, session, on_error)
            entries = list(_entries(path, session.session_id, session.rows, on_error))
        yield from _session_events(path, session, agent_id, entries)


def _session_events(path: Path, session: _Session, agent_id: str | None,
                    entries: list[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    if entries and entries[0][1].get("type") == "session":
        entries = entries[1:]
    session_id = session.session_id
    base: dict[str, Any] = {"session_id": session_id}
    if session.session_key:
        base["session_key"] = session.session_key
    if agent_id:
        base["agent_id"] = agent_id
    live = live_entries(entries)
    where = {"session": session_id}
    if session.archive is not None:
        where["archive"] = session.archive[0]
    elif session.cold is not None:
        where["cold_archive"] = session.cold["name"]
    for event in emit_events(path, live, message_runs(session_id, live), base,
                             EventIds(session_id if session.archive is None else f"{session_id}@{session.archive[0]}")):
        event["source"].update(where)
        yield event


def _load(path: Path) -> tuple[list[_Session], str | None]:
    """The sessions (archived ones first, oldest first; then the live ones by start) and the agent id. Every
    row is read here, so the database is closed before any event is yielded (a long import holds no read
    transaction)."""
    if not is_database(path):
        raise sqlite3.DatabaseError("file is not a database")
    conn = _connect(path)
    try:
        tables = {_text(name) for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = {"session_windows", "transcript_events"} - tables
        if missing:
            raise _NotAgentDatabase(f"no {', '.join(sorted(missing))} table")
        agent_id = None
        if "schema_meta" in tables:
            row = conn.execute("SELECT agent_id FROM schema_meta WHERE role = 'agent' AND agent_id IS NOT NULL "
                               "ORDER BY meta_key LIMIT 1").fetchone()
            agent_id = _text(row[0]) if row else None
        archived: list[_Session] = []
        if ARCHIVES in tables:
            for sid, key, name, reason, encoding, blob in conn.execute(
                    f"SELECT session_id, session_key, archive_name, reason, encoding, archive_blob FROM {ARCHIVES} "
                    "ORDER BY created_at, session_id, generation"):
                archived.append(_Session(_text(sid), _text(key), archive=(
                    _text(name) or "?", _text(reason) or "?", _text(encoding) or "?", blob if isinstance(blob, bytes) else b"")))
        live = [_Session(_text(sid), _text(key)) for sid, key in conn.execute(
            "SELECT session_id, session_key FROM session_windows ORDER BY coalesce(started_at, created_at), session_id")]
        by_id = {s.session_id: s for s in live}
        if COLD_ARCHIVES in tables:
            for sid, name, sha, storage, blob in conn.execute(
                    f"SELECT session_id, archive_name, archive_sha256, storage, archive_blob FROM {COLD_ARCHIVES}"):
                if _text(sid) in by_id:
                    by_id[_text(sid)].cold = {"name": _text(name) or "?", "sha256": _text(sha), "storage": _text(storage),
                                              "blob": blob if isinstance(blob, bytes) else None}
        for sid, seq, text, blob, size in conn.execute(
                "SELECT session_id, seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events "
                "ORDER BY session_id, seq"):
            session = by_id.get(_text(sid))
            if session is None:
                session = by_id[_text(sid)] = _Session(_text(sid), None)
                live.append(session)
            if isinstance(seq, int):
                session.rows.append((seq, text, blob, size))
    finally:
        conn.close()
    return archived + live, agent_id


def _archive_entries(path: Path, session: _Session, on_error: ErrorHandler | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """The entries of a deleted or reset session's archive: its transcript as JSON Lines (``encoding``
    ``identity``, or ``zstd``-compressed), line ``n`` being the entry of ``seq`` ``n - 1``."""
    name, _reason, encoding, blob = session.archive
    try:
        data = _zstd(blob, MAX_ARCHIVE_BYTES) if encoding == "zstd" else blob
    except ValueError as exc:
        report(SessionFormatError(path, None, f"archived session {session.session_id} ({name}) unreadable: {exc}"),
               on_error)
        return
    rows = [(n, line, None, None) for n, line in enumerate(data.split(b"\n")) if line.strip()]
    yield from _entries(path, session.session_id, rows, on_error)


def _with_cold_rows(path: Path, session: _Session, on_error: ErrorHandler | None) -> list[tuple[int, Any, Any, Any]]:
    """A session's rows with those its cold archive holds (OpenClaw moved them out of ``transcript_events``);
    a row still in ``transcript_events`` wins. A cold archive that is missing, damaged or not the one
    recorded is reported, and the rows left in the database are read."""
    cold = session.cold
    try:
        data = cold["blob"]
        if cold["storage"] != "sqlite":
            data = (_artifact_directory(path) / "cold" / cold["name"]).read_bytes()
        import hashlib

        if cold["sha256"] and hashlib.sha256(data).hexdigest() != cold["sha256"]:
            raise ValueError("its SHA-256 is not the one the database recorded")
        records = _zstd(data, MAX_ARCHIVE_BYTES).split(b"\n")
    except (OSError, ValueError, TypeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        report(SessionFormatError(path, None, f"session {session.session_id}: cold archive {cold['name']} "
                                              f"unreadable ({reason}): only the rows left in the database are read"),
               on_error)
        return session.rows
    rows: dict[int, tuple[int, Any, Any, Any]] = {}
    for raw in records:
        try:
            record = json_loads(raw) if raw.strip() else None
        except ValueError:
            record = None
        row = record.get("row") if isinstance(record, dict) and record.get("kind") == "event" else None
        if isinstance(row, dict) and isinstance(row.get("seq"), int) and isinstance(row.get("event_json"), str):
            rows[row["seq"]] = (row["seq"], row["event_json"], None, None)
    rows.update((row[0], row) for row in session.rows)
    return [rows[seq] for seq in sorted(rows)]


def _zstd(data: Any, limit: int) -> bytes:
    """Zstandard-compressed ``data`` (one or more frames) decompressed, at most ``limit`` bytes.

    Raises ValueError: not bytes, a bad frame, or more than ``limit`` bytes."""
    import zstandard

    if not isinstance(data, bytes):
        raise ValueError("no archive bytes")
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        out = reader.read(limit + 1)
    except zstandard.ZstdError as exc:
        raise ValueError(f"bad Zstandard data ({exc})") from None
    if len(out) > limit:
        raise ValueError(f"more than {limit:,} bytes decompressed")
    return out


def _artifact_directory(database: Path) -> Path:
    """Where OpenClaw keeps a database's session files: ``agents/<id>/sessions`` beside ``agents/<id>/agent``."""
    folder = database.parent
    return folder.parent / "sessions" if folder.name == "agent" else folder


def owning_database(path: Path) -> Path | None:
    """The agent database a file under OpenClaw's session folder belongs to, or None: a cold archive
    (``sessions/cold/<sha256>.jsonl.zst``) of a database next to it, or a published copy of a deleted or
    reset session (``sessions/<id>.jsonl.<reason>.<time>.<generation>[.zst]``) that the database holds in
    ``session_transcript_archives`` (a 2026.7 ``.jsonl.reset.<time>`` file it does not hold is a
    transcript of its own). Such files are read with their database, not alone."""
    name = path.name
    if _COLD_NAME.fullmatch(name) and path.parent.name == "cold":
        return _database_for(path.parent.parent)
    if ".jsonl.reset." in name or ".jsonl.deleted." in name:
        database = _database_for(path.parent)
        if database is not None and name in _archive_names(database):
            return database
    return None


def _database_for(sessions_dir: Path) -> Path | None:
    for candidate in (sessions_dir.parent / "agent" / DATABASE_NAME, sessions_dir / DATABASE_NAME):
        if candidate.is_file():
            return candidate
    return None


@functools.lru_cache(maxsize=64)
def _archive_names(database: Path) -> frozenset[str]:
    """The ``archive_name`` of every archived session in ``database`` (empty when it cannot be read)."""
    try:
        conn = _connect(database)
    except sqlite3.Error:
        return frozenset()
    try:
        return frozenset(_text(n) for (n,) in conn.execute(f"SELECT archive_name FROM {ARCHIVES}"))
    except sqlite3.Error:
        return frozenset()
    finally:
        conn.close()


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

