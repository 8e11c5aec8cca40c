"""OpenClaw session transcripts (``agents/<agentId>/sessions/<sessionId>.jsonl``) -> stream events.

Input: a pi-coding-agent v3 transcript (line 1 ``{"type":"session","id":...}``, then tree
entries ``{type, id, parentId, timestamp, ...}``); archived copies ``.jsonl.reset.<ts>`` /
``.jsonl.deleted.<ts>`` have the same content. An optional trajectory sidecar
``<sessionId>.trajectory.jsonl`` beside it supplies real run ids and the session key.
Format reference: ``shared/realdata/openclaw/SOURCE.md``.

Mapping (one event per tool call, result inline, in transcript order):

* ``tool_call`` per ``toolCall`` block of an assistant message, in block order:
  ``tool_call_id=block.id``, ``tool_name=block.name`` (not normalised: the engine does that),
  ``args=block.arguments``. The matching ``toolResult`` message (first one after the call with
  the same ``toolCallId``) gives the outcome:

  - ``isError: false`` -> ``result = {"content": message.content, "details": message.details}``
    exactly as stored (``details`` only when present), ``error = null``. A non-zero ``exec``
    exit code is such a *returned* result (``status:"completed"``, ``exitCode`` != 0).
  - ``isError: true`` -> ``error = <content text joined by "\\n">``, ``result = null``: OpenClaw
    sets ``isError`` only when the tool *threw* (``Tool X not found``, ``Validation failed for
    tool "X": ...``, exceptions), and the text is the thrown Error's message, so this is
    spec §4.3 rule 1 ("thrown error"), kept apart from error-looking returned results (§9).
  - no result at all -> ``result = null`` (the tool never reported an outcome; the engine
    leaves the record pending). A call in an assistant message whose ``stopReason`` is
    ``aborted`` or ``error`` and that has no result is **skipped**: pi-agent does not execute
    tool calls of an aborted/failed message, so OpenClaw's detector never saw it.

* Orphan results (unknown tool: the assistant message was never saved): a ``toolResult`` whose
  id has no earlier call becomes a synthetic ``tool_call`` at the result's line with
  ``args = null`` (SOURCE.md "Orphan tool results") and the thrown error from its text.
* ``compaction`` entry -> ``compaction_retry`` for the run it falls in.
* Runs: from the sidecar (``context.compiled.data.transcriptLeafId`` = the leaf when the run
  started; a run owns the entries after its leaf up to the next run's leaf). Without a sidecar
  (or before its first run): a user message starts a run (heartbeat and cron prompts included),
  and an ``openclaw:prompt-error`` / ``openclaw:bootstrap-context:full`` custom entry names the
  run it closes (``data.runId``); entries after such a marker belong to the next run (so a
  compaction written between runs arms the next one). Unnamed runs get
  ``<sessionId>#L<line of their first entry>``.
* Branches: a re-parented entry starts a new branch. Entries of the new branch that mirror the
  abandoned one position by position (same type, role, message timestamp, tool-call id,
  compaction summary, custom data) are a *rewrite* of history already imported and are
  skipped entirely; as a safety net a ``toolCallId`` is never emitted twice. The first
  (live) copy is kept because it carries the untruncated results OpenClaw hashed at the time.
* ``session_id`` = header ``id``; ``agent_id`` = the ``agents/<agentId>/sessions`` path segment
  (else the sidecar's); ``session_key`` = the sidecar's ``sessionKey`` when there is one,
  otherwise absent (defaults to the session id).

Errors: unparsable lines, entries without ``type``, and a missing header are reported as
:class:`~streams.importers.events.SessionFormatError` (path, line) and skipped.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .events import (
    ErrorHandler,
    EventIds,
    SessionFormatError,
    iso_to_ms,
    joined_text,
    read_jsonl,
    report,
)

__all__ = ["discover", "read", "is_transcript", "sidecar_path", "looks_like"]

SIDECAR_SUFFIX = ".trajectory.jsonl"
# custom entries written at the end of the run whose id they carry (SOURCE.md "Runs and runId")
_RUN_CLOSERS = frozenset({"openclaw:prompt-error", "openclaw:bootstrap-context:full"})
# assistant messages whose tool calls pi-agent never executes
_UNEXECUTED_STOPS = frozenset({"aborted", "error"})


def is_transcript(path: Path) -> bool:
    """``*.jsonl``, ``*.jsonl.reset.*``, ``*.jsonl.deleted.*``, but never a trajectory sidecar."""
    name = path.name
    if SIDECAR_SUFFIX in name:
        return False
    return name.endswith(".jsonl") or ".jsonl.reset." in name or ".jsonl.deleted." in name


def sidecar_path(path: Path) -> Path:
    """The trajectory sidecar that belongs with transcript ``path`` (it may not exist)."""
    stem = path.name.split(".jsonl", 1)[0]
    return path.with_name(stem + SIDECAR_SUFFIX)


def discover(root: Path) -> Iterator[Path]:
    """Transcripts under ``root`` (recursively, sorted), or ``root`` itself when it is a file.

    A file named explicitly is read whatever its name (a renamed copy is still a
    transcript); :func:`read` says why when it is not one.
    """
    if root.is_dir():
        yield from sorted(p for p in root.rglob("*") if p.is_file() and is_transcript(p))
    elif root.is_file():
        yield root


def looks_like(first: dict[str, Any]) -> bool:
    """Whether a file's first JSON line is an OpenClaw/pi session header."""
    return isinstance(first, dict) and first.get("type") == "session" and "version" in first and "id" in first


def _agent_from_path(path: Path) -> str | None:
    parts = path.resolve().parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "sessions" and i >= 2 and parts[i - 2] == "agents":
            return parts[i - 1]
    return None


class _Sidecar:
    """What loopwatch needs from a trajectory sidecar: run leaves, session key, agent id."""

    def __init__(self) -> None:
        self.runs: list[tuple[str | None, str]] = []  # (transcriptLeafId, runId), run order
        self.session_key: str | None = None
        self.agent_id: str | None = None

    @classmethod
    def load(cls, path: Path, on_error: ErrorHandler | None) -> _Sidecar:
        car = cls()
        seen: set[str] = set()
        for _lineno, rec in read_jsonl(path, on_error):
            run_id = rec.get("runId")
            data = rec.get("data") if isinstance(rec.get("data"), dict) else {}
            if car.session_key is None and isinstance(rec.get("sessionKey"), str) and rec["sessionKey"]:
                car.session_key = rec["sessionKey"]
            if rec.get("type") == "session.started" and car.agent_id is None:
                car.agent_id = data.get("agentId") if isinstance(data.get("agentId"), str) else None
            if rec.get("type") == "context.compiled" and isinstance(run_id, str) and run_id not in seen:
                seen.add(run_id)
                leaf = data.get("transcriptLeafId")
                car.runs.append((leaf if isinstance(leaf, str) else None, run_id))
        return car


def _mirror_key(entry: dict[str, Any]) -> Any:
    """What must be equal for an entry of a rewritten branch to be a copy of an older entry."""
    kind = entry.get("type")
    if kind == "message":
        msg = entry.get("message") or {}
        return (kind, msg.get("role"), msg.get("timestamp"), msg.get("toolCallId"))
    if kind == "compaction":
        return (kind, entry.get("summary"), entry.get("tokensBefore"))
    rest = {k: v for k, v in entry.items() if k not in ("id", "parentId", "timestamp")}
    return (kind, json.dumps(rest, sort_keys=True, default=str))


def _rewritten_copies(entries: list[tuple[int, dict[str, Any]]]) -> set[int]:
    """Lines of entries that re-write (copy) an abandoned branch; see module docstring."""
    by_id: dict[str, dict[str, Any]] = {}
    copies: set[int] = set()
    prev_id: str | None = None
    mirror: list[dict[str, Any]] = []  # abandoned entries still to be matched, in order
    for lineno, entry in entries:
        eid, parent = entry.get("id"), entry.get("parentId")
        if prev_id is not None and parent != prev_id and parent in by_id:
            # Re-parented: the abandoned branch is the chain from the old leaf back to `parent`.
            chain: list[dict[str, Any]] = []
            node = by_id.get(prev_id)
            while node is not None and node.get("id") != parent:
                chain.append(node)
                node = by_id.get(node.get("parentId"))
            mirror = chain[::-1] if node is not None else []
        if mirror and parent is not None and _mirror_key(entry) == _mirror_key(mirror[0]):
            copies.add(lineno)
            mirror.pop(0)
        else:
            mirror = []
        if isinstance(eid, str):
            by_id[eid] = entry
            prev_id = eid
    return copies


def _is_user(entry: dict[str, Any]) -> bool:
    return entry.get("type") == "message" and (entry.get("message") or {}).get("role") == "user"


def _segment_runs(session_id: str, entries: list[tuple[int, dict[str, Any]]]) -> dict[int, str]:
    """Run id per line from user messages and run-closing custom entries (no sidecar)."""
    run_of: dict[int, str] = {}
    segment: list[int] = []
    has_user = False
    named: str | None = None

    def close() -> None:
        nonlocal segment, has_user, named
        if segment:
            rid = named or f"{session_id}#L{segment[0]}"
            for ln in segment:
                run_of[ln] = rid
        segment, has_user, named = [], False, None

    for lineno, entry in entries:
        if _is_user(entry) and has_user:
            close()
        segment.append(lineno)
        has_user = has_user or _is_user(entry)
        data = entry.get("data")
        if entry.get("type") == "custom" and entry.get("customType") in _RUN_CLOSERS and isinstance(data, dict):
            if isinstance(data.get("runId"), str) and data["runId"].strip():
                named = data["runId"]
                close()
    close()
    return run_of


def _sidecar_runs(car: _Sidecar, entries: list[tuple[int, dict[str, Any]]], run_of: dict[int, str]) -> None:
    """Overwrite ``run_of`` with the sidecar's runs from its first known leaf onwards."""
    line_of = {e.get("id"): ln for ln, e in entries}
    starts: list[tuple[int, str]] = []
    for leaf, run_id in car.runs:
        if leaf is None:
            starts.append((0, run_id))  # run started on an empty transcript
        elif leaf in line_of:
            starts.append((line_of[leaf], run_id))
    if not starts:
        return
    starts.sort(key=lambda s: s[0])
    keys = [s[0] for s in starts]
    for ln, _entry in entries:
        i = bisect.bisect_left(keys, ln) - 1  # last run whose leaf is strictly before this line
        if i >= 0:
            run_of[ln] = starts[i][1]


def read(path: Path, on_error: ErrorHandler | None = None) -> Iterator[dict[str, Any]]:
    """Yield the stream events of one OpenClaw transcript (see the module docstring).

    A trajectory sidecar given as the transcript yields nothing and is reported
    as a :class:`SessionFormatError` (raised without ``on_error``).
    """
    path = Path(path)
    if SIDECAR_SUFFIX in path.name:
        transcript = path.name.split(SIDECAR_SUFFIX, 1)[0] + ".jsonl"
        report(SessionFormatError(path, None, f"a trajectory sidecar, not a transcript: name its transcript "
                                              f"({transcript}) instead, which is read with it"), on_error)
        return
    rows = list(read_jsonl(path, on_error))
    if not rows or rows[0][1].get("type") != "session" or not isinstance(rows[0][1].get("id"), str):
        report(SessionFormatError(path, rows[0][0] if rows else 1, "missing session header"), on_error)
        session_id = path.name.split(".jsonl", 1)[0]
    else:
        session_id = rows[0][1]["id"]
        rows = rows[1:]
    entries: list[tuple[int, dict[str, Any]]] = []
    for lineno, entry in rows:
        if not isinstance(entry.get("type"), str):
            report(SessionFormatError(path, lineno, "entry without a type"), on_error)
        elif entry["type"] == "message" and not isinstance(entry.get("message"), dict):
            report(SessionFormatError(path, lineno, "message entry without a message object"), on_error)
        else:
            entries.append((lineno, entry))

    copies = _rewritten_copies(entries)
    live = [(ln, e) for ln, e in entries if ln not in copies]
    run_of = _segment_runs(session_id, live)
    car = _Sidecar()
    side = sidecar_path(path)
    if side.is_file():
        car = _Sidecar.load(side, on_error)
        _sidecar_runs(car, live, run_of)

    base: dict[str, Any] = {"session_id": session_id}
    if car.session_key:
        base["session_key"] = car.session_key
    agent_id = _agent_from_path(path) or car.agent_id
    if agent_id:
        base["agent_id"] = agent_id
    yield from _emit(path, live, run_of, base, EventIds(session_id))


def _emit(
    path: Path,
    live: list[tuple[int, dict[str, Any]]],
    run_of: dict[int, str],
    base: dict[str, Any],
    ids: EventIds,
) -> Iterator[dict[str, Any]]:
    # toolCallId -> result lines in file order, to pair each call with the first later result
    results: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for ln, e in live:
        msg = e.get("message") or {}
        if e["type"] == "message" and msg.get("role") == "toolResult":
            results.setdefault(str(msg.get("toolCallId")), []).append((ln, msg))
    used: set[int] = set()  # result lines already paired with a call
    emitted: set[str] = set()  # toolCallIds already emitted

    def call_event(ln: int, ts: int | None, call_id: str, name: Any, args: Any, outcome: Any) -> dict[str, Any]:
        ev: dict[str, Any] = {"type": "tool_call", "run_id": run_of.get(ln), **base,
                              "tool_call_id": call_id, "tool_name": name, "args": args}
        ev.update(_outcome(outcome))
        ev.update(event_id=ids.next(ln), ts=ts, source={"path": str(path), "line": ln})
        return ev

    for ln, e in live:
        kind = e["type"]
        ts = iso_to_ms(e.get("timestamp"))
        if kind == "compaction":
            yield {"type": "compaction_retry", "run_id": run_of.get(ln), "session_id": base["session_id"],
                   **({"agent_id": base["agent_id"]} if "agent_id" in base else {}),
                   "event_id": ids.next(ln), "ts": ts, "source": {"path": str(path), "line": ln}}
            continue
        if kind != "message":
            continue
        msg = e["message"]
        role = msg.get("role")
        if role == "assistant" and isinstance(msg.get("content"), list):
            for block in msg["content"]:
                if not isinstance(block, dict) or block.get("type") != "toolCall":
                    continue
                call_id = str(block.get("id"))
                if call_id in emitted:
                    continue
                outcome = next(((rl, r) for rl, r in results.get(call_id, ()) if rl > ln and rl not in used), None)
                if outcome is None and msg.get("stopReason") in _UNEXECUTED_STOPS:
                    continue
                if outcome is not None:
                    used.add(outcome[0])
                emitted.add(call_id)
                yield call_event(ln, ts, call_id, block.get("name"), block.get("arguments"),
                                 outcome[1] if outcome else None)
        elif role == "toolResult" and ln not in used:
            call_id = str(msg.get("toolCallId"))
            if call_id in emitted:
                continue  # a second result for a call already imported
            used.add(ln)
            emitted.add(call_id)
            yield call_event(ln, ts, call_id, msg.get("toolName"), None, msg)


def _outcome(msg: dict[str, Any] | None) -> dict[str, Any]:
    """``{"result": ..., "error": ...}`` for a toolResult message (``None`` = no outcome)."""
    if msg is None:
        return {"result": None, "error": None}
    if msg.get("isError") is True:
        return {"result": None, "error": joined_text(msg.get("content"))}
    result: dict[str, Any] = {"content": msg.get("content", [])}
    if "details" in msg:
        result["details"] = msg["details"]
    return {"result": result, "error": None}
