"""OpenClaw 2026.9.x agent databases (``openclaw-agent.sqlite``) through the ``openclaw`` importer.

Fixtures (tests/fixtures/openclaw/, gzipped; ``VACUUM INTO`` copies of what OpenClaw wrote, nothing
edited) were written by real OpenClaw 2026.9.6 from the npm registry, driven by
tests/e2e/openclaw_model.py repeating ``read {"path": "missing.txt"}``:

* ``live-2026.9.6``: ``openclaw agent --local`` with the loopwatch plugin and a worker under
  the ``openclaw-2026.9.6`` profile, OpenClaw's own detection off (tests/e2e/test_openclaw_e2e.py):
  30 calls, 1-20 ran, 21 recovery block, 22 terminal block, 23-30 refused as the run had ended
  (its live verdicts: tests/importers/test_openclaw_live_sessions.py); ``export-trajectory-2026.9.6``
  is ``openclaw sessions export-trajectory`` of that session;
* ``builtin-loop-2026.9.6``: ``openclaw agent exec`` (no plugin hooks there) with OpenClaw's own
  ``tools.loopDetection.enabled: true``: 22 calls, 21 and 22 vetoed by OpenClaw, which then ended the run.

Damaged databases (fuzz) are built here with the tables the importer reads.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
import zstandard

from streams.detection import Engine, OpenClawConfig
from streams.importers import SessionFormatError, detect_format, import_paths, openclaw_sqlite
from streams.offline.replay import Replayer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openclaw"
PROFILE_96 = OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}, "options": {"profile": "openclaw-2026.9.6"}})


def replay_events(events: list[dict], config: OpenClawConfig) -> list[dict]:
    replayer = Replayer(Engine(config))
    return [replayer.apply(event) for event in events]


def _database(tmp_path: Path, name: str) -> Path:
    target = tmp_path / "state" / "agents" / "main" / "agent" / openclaw_sqlite.DATABASE_NAME
    target.parent.mkdir(parents=True)
    with gzip.open(FIXTURES / f"{name}.sqlite.gz") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def _import(path: Path) -> tuple[list[dict], list[SessionFormatError]]:
    errors: list[SessionFormatError] = []
    return list(import_paths("openclaw", [path], errors.append)), errors


def test_plugin_session_ids_outcomes_and_source_as_the_plugin_sent_them(tmp_path):
    database = _database(tmp_path, "live-2026.9.6")
    assert detect_format(database) == "openclaw"
    events, errors = _import(tmp_path / "state")  # found under the state directory
    assert errors == []  # the Zstandard-compressed entries (OpenClaw's cache-ttl records) decode too
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [c["tool_call_id"] for c in calls] == [f"call_{n}" for n in range(1, 31)]
    session = calls[0]["session_id"]
    assert {(c["session_id"], c["session_key"], c["agent_id"]) for c in calls} == {(session, "agent:main:main", "main")}
    assert len({c["run_id"] for c in calls}) == 1 and calls[0]["run_id"] != session
    assert all(c["tool_name"] == "read" and c["args"] == {"path": "missing.txt"} for c in calls)
    # a thrown error: the message OpenClaw's engine hashed (details.error), not the result's JSON text
    assert {(c["error"], c["result"]) for c in calls[:20]} == {(calls[0]["error"], None)}
    assert calls[0]["error"].startswith("File not found: /tmp/") and calls[0]["error"].endswith("/missing.txt.")
    assert calls[20]["error"].endswith("or continue with a different tool or different arguments.")
    assert calls[21]["error"].endswith("This run is stopping now.")
    assert all(c["error"].startswith("loopwatch: this run has already ended") for c in calls[22:])
    assert calls[0]["source"] == {"path": str(database), "line": 6, "session": session}
    assert len({e["event_id"] for e in events}) == len(events)


def test_the_warning_note_on_a_stored_result_is_not_part_of_its_outcome():
    from streams.importers.openclaw import result_outcome

    note = "[System note: Tool-loop warning after 10 repeated calls. Change your approach or stop if you are not making progress.]"
    stored = {"role": "toolResult", "isError": False, "content": [{"type": "text", "text": "same"}, {"type": "text", "text": note}]}
    assert result_outcome(stored) == {"result": {"content": [{"type": "text", "text": "same"}]}, "error": None}
    other = {**stored, "content": [{"type": "text", "text": "same"}, {"type": "text", "text": "[System note: something else]"}]}
    assert result_outcome(other)["result"]["content"] == other["content"]


def test_plugin_session_replays_to_the_2026_9_6_verdicts_it_got_live(tmp_path):
    _database(tmp_path, "live-2026.9.6")
    events, _ = _import(tmp_path / "state")
    verdicts = {v["tool_call_id"]: v for v in replay_events(events, PROFILE_96) if v["type"] == "tool_call"}
    assert verdicts["call_11"]["verdict"] == "warn"
    assert (verdicts["call_21"]["verdict"], verdicts["call_21"]["tool_loop_recovery"]) == ("block", "recovery")
    assert (verdicts["call_22"]["verdict"], verdicts["call_22"]["tool_loop_recovery"]) == ("abort", "terminal")
    assert all(verdicts[f"call_{n}"]["run_ended"]["by"] == "generic_repeat" for n in range(23, 31))
    hashes = {verdicts[f"call_{n}"]["outcome"]["result_hash"] for n in range(1, 21)}
    assert len(hashes) == 1 and next(iter(hashes)).startswith("error:")


def test_calls_openclaw_itself_vetoed_are_results_loopwatch_never_judged(tmp_path):
    _database(tmp_path, "builtin-loop-2026.9.6")
    events, errors = _import(tmp_path / "state")
    assert errors == []
    calls = [e["tool_call_id"] for e in events if e["type"] == "tool_call"]
    assert calls == [f"call_{n}" for n in range(1, 21)]
    unjudged = [e for e in events if e.get("judged") is False]
    assert [(e["type"], e["tool_call_id"], e["blocked_by"], e["tool_name"], e["args"]) for e in unjudged] == [
        ("tool_result", f"call_{n}", "openclaw:loop-detection", "read", {"path": "missing.txt"}) for n in (21, 22)]
    assert calls and events[0]["run_id"] == events[0]["session_id"], "agent exec runs under the session id"
    verdicts = replay_events(events, PROFILE_96)
    assert [v["verdict"] for v in verdicts if v.get("judged") is False or v["tool_call_id"] in ("call_21", "call_22")] \
        == ["ignore", "ignore"]


def test_opened_read_only_nothing_written(tmp_path):
    database = _database(tmp_path, "live-2026.9.6")
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    listing = sorted(p.name for p in database.parent.iterdir())
    _import(database)
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in database.parent.iterdir()) == listing, "no journal, WAL or shm file created"


def _small_database(path: Path, rows: list[tuple[int, str | None, bytes | None, int | None]]) -> Path:
    """The three tables the importer reads, as 2026.9.6 declares their columns (without its CHECKs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.executescript("""
            CREATE TABLE schema_meta (meta_key TEXT PRIMARY KEY, role TEXT, schema_version INTEGER, agent_id TEXT,
                                      app_version TEXT, created_at INTEGER, updated_at INTEGER);
            CREATE TABLE session_windows (session_id TEXT PRIMARY KEY, session_key TEXT NOT NULL, created_at INTEGER,
                                          started_at INTEGER);
            CREATE TABLE transcript_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_json TEXT,
                                            created_at INTEGER NOT NULL, event_zstd BLOB, event_utf8_bytes INTEGER,
                                            PRIMARY KEY (session_id, seq));
            INSERT INTO schema_meta VALUES ('primary', 'agent', 23, 'ops', '2026.9.6', 0, 0);
            INSERT INTO session_windows VALUES ('s1', 'agent:ops:main', 0, 0);
        """)
        db.executemany("INSERT INTO transcript_events VALUES ('s1', ?, ?, 0, ?, ?)", rows)
    db.close()
    return path


def _entry(call: int, text: str = "ok") -> list[dict]:
    run = {"__openclaw": {"runId": "r1"}}
    return [
        {"type": "message", "id": f"a{call}", "message": {"role": "assistant", "content": [
            {"type": "toolCall", "id": f"c{call}", "name": "exec", "arguments": {"command": "ls"}}], **run}},
        {"type": "message", "id": f"t{call}", "message": {"role": "toolResult", "toolCallId": f"c{call}", "toolName": "exec",
                                                           "content": [{"type": "text", "text": text}], "isError": False, **run}},
    ]


def _rows(entries: list[dict], compress: set[int] = frozenset()) -> list[tuple]:
    rows = [(0, json.dumps({"type": "session", "version": 4, "id": "s1"}), None, None)]
    for seq, entry in enumerate(entries, 1):
        text = json.dumps(entry)
        if seq in compress:
            data = text.encode()
            rows.append((seq, None, zstandard.ZstdCompressor().compress(data), len(data)))
        else:
            rows.append((seq, text, None, None))
    return rows


def test_a_compressed_entry_reads_as_its_json(tmp_path):
    database = _small_database(tmp_path / "agents" / "ops" / "agent" / "openclaw-agent.sqlite",
                               _rows(_entry(1, "x" * 3000) + _entry(2), compress={2}))
    events, errors = _import(database)
    assert errors == []
    assert [(e["tool_call_id"], e["result"]["content"][0]["text"][:3], e["agent_id"], e["run_id"]) for e in events] == [
        ("c1", "xxx", "ops", "r1"), ("c2", "ok", "ops", "r1")]


def test_bad_rows_are_reported_with_their_line_and_the_rest_is_read(tmp_path):
    rows = _rows(_entry(1) + _entry(2) + _entry(3))
    rows[2] = (2, '{"type": "message", "message": {"role": "toolResult"', None, None)  # cut JSON
    rows[3] = (3, None, b"\x28\xb5\x2f\xfd garbage", 40)  # not a Zstandard frame
    rows[4] = (4, "[1, 2]", None, None)  # not an entry
    database = _small_database(tmp_path / "openclaw-agent.sqlite", rows)
    events, errors = _import(database)
    assert [(e.line, e.reason.split(":")[0]) for e in errors] == [(3, "session s1"), (4, "session s1"), (5, "session s1")]
    assert "unreadable" in errors[0].reason and "Zstandard" in errors[1].reason and "not a transcript entry" in errors[2].reason
    assert [e["tool_call_id"] for e in events if e["type"] == "tool_call"] == ["c1", "c3"]
    with pytest.raises(SessionFormatError):
        list(import_paths("openclaw", [database]))  # without a handler the first error raises


@pytest.mark.parametrize("cut", [0, 100, 4096, 20000])
def test_a_truncated_or_foreign_file_is_one_clear_error(tmp_path, cut):
    source = _database(tmp_path, "live-2026.9.6")
    damaged = tmp_path / "damaged" / openclaw_sqlite.DATABASE_NAME
    damaged.parent.mkdir()
    damaged.write_bytes(source.read_bytes()[:cut])
    events, errors = _import(damaged)
    assert events == [] and len(errors) == 1
    assert errors[0].line is None and "not a readable OpenClaw agent database" in errors[0].reason


def test_random_byte_damage_never_raises_anything_but_format_errors(tmp_path):
    source = _database(tmp_path, "live-2026.9.6").read_bytes()
    rng = random.Random(27)
    for trial in range(12):
        data = bytearray(source)
        for _ in range(40):
            data[rng.randrange(100, len(data))] = rng.randrange(256)
        path = tmp_path / f"fuzz{trial}" / openclaw_sqlite.DATABASE_NAME
        path.parent.mkdir()
        path.write_bytes(bytes(data))
        events, errors = _import(path)  # anything else raised fails the test
        assert all(isinstance(e, SessionFormatError) for e in errors)
        assert all(e["type"] in ("tool_call", "tool_result", "compaction_retry") for e in events)


def test_a_database_without_session_tables_is_named_as_such(tmp_path):
    path = tmp_path / "openclaw-agent.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE other (x)")
    db.close()
    _, errors = _import(path)
    assert "no session_windows, transcript_events table" in errors[0].reason


def test_export_trajectory_bundle_gives_the_stores_calls_and_verdicts(tmp_path):
    """``openclaw sessions export-trajectory`` of the same session (its events.jsonl, as OpenClaw wrote it)."""
    _database(tmp_path, "live-2026.9.6")
    bundle = tmp_path / "bundle" / "events.jsonl"
    bundle.parent.mkdir()
    with gzip.open(FIXTURES / "export-trajectory-2026.9.6.events.jsonl.gz") as src, bundle.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    assert detect_format(bundle) == "openclaw"
    stored, _ = _import(tmp_path / "state")
    exported, errors = _import(bundle)
    assert errors == []

    def ids(events):
        return [(e["type"], e["tool_call_id"], e["run_id"], e["session_id"], e["session_key"], e["agent_id"]) for e in events]

    assert ids(exported) == ids(stored)
    # OpenClaw writes the bundle with local paths replaced ($OPENCLAW_STATE_DIR): the same error, another text
    assert exported[0]["error"] == "File not found: $OPENCLAW_STATE_DIR/workspace/missing.txt."

    def decisions(events):
        return [(v["tool_call_id"], v["verdict"], (v.get("detection") or {}).get("count"))
                for v in replay_events(events, PROFILE_96)]

    assert decisions(exported) == decisions(stored)


# `deleted-session-2026.9.6`: two `openclaw agent --local` turns (session keys agent:main:first and agent:main:second,
# 4 calls each), then `openclaw sessions delete agent:main:first` through a running gateway: OpenClaw moved the first
# session into session_transcript_archives and published it as the .zst file beside it (both kept as written).
DELETED = "2ea046cf-7d62-45fd-867d-31ad408ea7d4"
ARCHIVE = f"{DELETED}.jsonl.deleted.2026-12-03T10-33-49.154Z.ae02dffabab9468da84fcc4cebc6ede7.zst"


def _deleted_session_state(tmp_path: Path) -> Path:
    database = _database(tmp_path, "deleted-session-2026.9.6")
    sessions = database.parent.parent / "sessions"
    sessions.mkdir()
    shutil.copy(FIXTURES / ARCHIVE, sessions / ARCHIVE)
    return tmp_path / "state"


def _calls(events: list[dict]) -> list[tuple]:
    return [(e["session_id"], e.get("session_key"), e["tool_call_id"], e["tool_name"], e["args"], e["error"][:15])
            for e in events if e["type"] == "tool_call"]


@pytest.mark.parametrize("fmt", ["openclaw", "auto"])
def test_a_deleted_session_is_read_from_the_database_once_and_its_published_file_left_to_it(tmp_path, fmt):
    state = _deleted_session_state(tmp_path)
    errors: list = []
    events = list(import_paths(fmt, [state], errors.append))
    assert errors == []
    first = [e for e in events if e["session_id"] == DELETED]
    assert _calls(first) == [(DELETED, "agent:main:first", f"call_{n}", "read", {"path": "missing.txt"},
                              "File not found:") for n in range(1, 5)]
    assert {e["source"]["archive"] for e in first} == {ARCHIVE}
    assert {e["source"]["path"] for e in events} == {str(state / "agents" / "main" / "agent" / openclaw_sqlite.DATABASE_NAME)}
    assert all(e["event_id"].startswith(f"{DELETED}@{ARCHIVE}:") for e in first)
    second = [e for e in events if e["session_id"] != DELETED]
    assert [e["session_key"] for e in second] == ["agent:main:second"] * 4
    assert events.index(first[-1]) < events.index(second[0])  # the archived session first
    # the run ids OpenClaw wrote on the archived session's messages, as for a live one
    assert len({e["run_id"] for e in first}) == 1 and first[0]["run_id"] != second[0]["run_id"]
    # the loop in it is found as in a live session: the 4th identical failing read is blocked
    verdicts = replay_events(first, OpenClawConfig(
        {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}}}))
    assert [(r["verdict"], (r.get("detection") or {}).get("count")) for r in verdicts] == [
        ("allow", None), ("allow", None), ("allow", 2), ("block", 3)]


def test_a_published_archive_without_its_database_reads_as_a_compressed_transcript(tmp_path):
    alone = tmp_path / ARCHIVE
    shutil.copy(FIXTURES / ARCHIVE, alone)
    assert detect_format(alone) == "openclaw"
    events, errors = _import(alone)
    assert errors == []
    assert [(e["tool_call_id"], e["args"], e["error"][:15]) for e in events] == [
        (f"call_{n}", {"path": "missing.txt"}, "File not found:") for n in range(1, 5)]
    assert {e["session_id"] for e in events} == {DELETED}
    # the run ids OpenClaw wrote on its messages, as read from the database
    from_database = [e for e in import_paths("openclaw", [_deleted_session_state(tmp_path / "db")])
                     if e["session_id"] == DELETED]
    assert [e["run_id"] for e in events] == [e["run_id"] for e in from_database]


def _cold_database(tmp_path: Path, storage: str, damage: bool = False) -> Path:
    """A session whose rows OpenClaw 2026.9.6 moved to cold storage (its session-cold-storage-worker's record
    layout: a Zstandard JSON Lines archive of header/event/identity records, named by its SHA-256)."""
    database = _small_database(tmp_path / "agents" / "ops" / "agent" / openclaw_sqlite.DATABASE_NAME,
                               _rows(_entry(1) + _entry(2) + _entry(3)))
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT seq, event_json FROM transcript_events ORDER BY seq").fetchall()
        records = [{"kind": "header", "version": 1, "sessionId": "s1", "generation": "g1"}]
        records += [{"kind": "event", "row": {"seq": seq, "event_json": text, "created_at": 0}} for seq, text in rows[:5]]
        records += [{"kind": "identity", "row": {"event_id": "x", "seq": 0, "event_type": None, "parent_id": None,
                                                 "message_idempotency_key": None, "created_at": 0}}]
        data = zstandard.ZstdCompressor().compress("".join(json.dumps(r) + "\n" for r in records).encode())
        sha = hashlib.sha256(data).hexdigest()
        name = f"{sha}.jsonl.zst"
        db.executescript("""CREATE TABLE session_transcript_cold_archives (session_id TEXT NOT NULL PRIMARY KEY,
            generation TEXT NOT NULL, archive_name TEXT NOT NULL UNIQUE, archive_sha256 TEXT NOT NULL,
            event_count INTEGER NOT NULL, raw_bytes INTEGER NOT NULL, archive_bytes INTEGER NOT NULL,
            last_seq INTEGER NOT NULL, archived_at INTEGER NOT NULL, storage TEXT NOT NULL, archive_blob BLOB)""")
        db.execute("INSERT INTO session_transcript_cold_archives VALUES ('s1', 'g1', ?, ?, 5, 0, ?, 4, 0, ?, ?)",
                   (name, sha, len(data), storage, data if storage == "sqlite" else None))
        db.execute("DELETE FROM transcript_events WHERE seq < 5")  # moved out; the rows after it stay
    db.close()
    if storage == "file":
        cold = database.parent.parent / "sessions" / "cold"
        cold.mkdir(parents=True)
        (cold / name).write_bytes(data[:-7] + b"damaged" if damage else data)
    return database


@pytest.mark.parametrize("storage", ["sqlite", "file"])
def test_a_session_in_cold_storage_is_read_from_its_archive(tmp_path, storage):
    database = _cold_database(tmp_path, storage)
    errors: list = []
    events = list(import_paths("auto", [tmp_path], errors.append))  # the cold file is not listed as unknown
    assert errors == []
    assert [(e["tool_call_id"], e["source"]["line"]) for e in events] == [("c1", 2), ("c2", 4), ("c3", 6)]
    assert events[0]["source"]["cold_archive"].endswith(".jsonl.zst") and events[0]["source"]["path"] == str(database)


def test_a_damaged_cold_archive_is_reported_and_the_rows_left_are_read(tmp_path):
    _cold_database(tmp_path, "file", damage=True)
    events, errors = _import(tmp_path)
    assert [e["tool_call_id"] for e in events] == ["c3"]
    assert len(errors) == 1 and "cold archive" in errors[0].reason and "SHA-256" in errors[0].reason
