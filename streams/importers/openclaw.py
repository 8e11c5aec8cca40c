"""OpenClaw session transcripts (``agents/<agentId>/sessions/<sessionId>.jsonl``) -> stream events.

Input: a pi-coding-agent v3 transcript (line 1 ``{"type":"session","id":...}``, then tree
entries ``{type, id, parentId, timestamp, ...}``); archived copies ``.jsonl.reset.<ts>`` /
``.jsonl.deleted.<ts>`` have the same content. An optional trajectory sidecar
``<sessionId>.trajectory.jsonl`` beside it supplies real run ids and the session key.
Format reference: ``shared/realdata/openclaw/SOURCE.md``.

Mapping (in transcript order):

* ``tool_call`` per ``toolCall`` block of an assistant message, in block order:
  ``tool_call_id=block.id``, ``tool_name=block.name`` (not normalised: the engine does that),
  ``args=block.arguments``. The matching ``toolResult`` message (first one after the call with
  the same ``toolCallId``) gives the outcome, inline when the result follows its call; when one
  assistant message holds several executed calls, pi-agent's parallel tool execution (its
  default) checks and records every call of the message before any of them has a result, so
  they are written as ``outcome_follows`` calls, each followed later by its ``tool_result`` (with
  the call's ``tool_name`` and ``args``) at the result's line. Inlined, N identical calls of one
  message would each see the earlier ones' outcomes, and block where OpenClaw only warns. The
  outcome:

  - ``isError: false`` -> ``result = {"content": message.content, "details": message.details}``
    exactly as stored (``details`` only when present), ``error = null``, except a trailing
    tool-loop warning note block, which OpenClaw 2026.9.x and the loopwatch plugin append after the
    outcome was recorded (docs/detection-rules.md §11.3.1). A non-zero ``exec``
    exit code is such a *returned* result (``status:"completed"``, ``exitCode`` != 0).
  - ``details`` exactly ``{status: "error", tool, error}`` (``isError`` false in the older
    recordings, true as 2026.7.35 and 2026.9.6 write it, with those details as JSON for text)
    -> ``error = details.error``,
    ``result = null``: OpenClaw's tool adapter writes this result when the tool *threw* (in older
    releases ``exec`` threw on a non-zero exit code: ``"Command exited with code 1"``); its
    loop-detection wrapper had already recorded the throw as a thrown error, from the same
    message (docs/detection-rules.md §4.3 rule 1), and the live plugin reports the same message.
  - other ``isError: true`` -> ``error = <content text joined by "\\n">``, ``result = null``: pi-agent
    sets ``isError`` for errors it raised itself (``Tool X not found``, ``Validation failed for
    tool "X": ...``); the text is that Error's message, so this is a thrown error too, kept
    apart from error-looking returned results (§9).
  - no result at all -> ``result = null`` inline (the tool never reported an outcome; the engine
    leaves the record pending). A call in an assistant message whose ``stopReason`` is
    ``aborted`` or ``error`` and that has no result is **skipped**: pi-agent does not execute
    tool calls of an aborted/failed message, so OpenClaw's detector never saw it.

* A call OpenClaw 2026.9.x's own loop detection refused (its result's ``details`` are
  ``{status: "blocked", deniedReason: "tool-loop", ...}``) never reached a plugin: it becomes only
  a ``tool_result`` at the result's line with ``judged: false`` and ``blocked_by:
  "openclaw:loop-detection"``, as the live plugin reports it (loopwatch does not apply it).
* Orphan results (unknown tool: the assistant message was never saved): a ``toolResult`` whose
  id has no earlier call becomes a synthetic ``tool_call`` at the result's line with
  ``args = null`` (SOURCE.md "Orphan tool results") and the thrown error from its text.
* ``compaction`` entry -> ``compaction_retry`` for the run it falls in.
* Runs: from the sidecar (``context.compiled.data.transcriptLeafId`` = the leaf when the run
  started; a run owns the entries after its leaf up to the next run's leaf). Without a sidecar
  (or before its first run): a user message starts a run (heartbeat and cron prompts included),
  and an ``openclaw:prompt-error`` / ``openclaw:bootstrap-context:full`` custom entry names the
  run it closes (``data.runId``; :mod:`streams.importers.openclaw_runs`); entries after such a marker belong to the next run (so a
  compaction written between runs arms the next one), except after a model-fallback retry: an
  ``openclaw:prompt-error``, a ``model-snapshot`` within 30 s, then the same prompt again is
  OpenClaw running the same run on its fallback model (the retry's own closer carries the same
  ``runId``), so the run goes on under that id. Unnamed runs get
  ``<sessionId>#L<line of their first entry>``. A 2026.9.x transcript (an archived session
  published as a file) carries the run id on its messages (``__openclaw.runId``): those are its
  runs, as in the agent database (:func:`streams.importers.openclaw_runs.message_runs`).
* Branches: a re-parented entry starts a new branch. Entries of the new branch that mirror the
  abandoned one position by position (same type, role, message timestamp, tool-call id,
  compaction summary, custom data) are a *rewrite* of history already imported and are
  skipped entirely; as a safety net a ``toolCallId`` is never emitted twice. The first
  (live) copy is kept because it carries the untruncated results OpenClaw hashed at the time.
* ``session_id`` = header ``id``; ``agent_id`` = the ``agents/<agentId>/sessions`` path segment
  (else the sidecar's); ``session_key`` = the sidecar's ``sessionKey`` when there is one, on
  every event of the session (``compaction_retry`` and ``tool_result`` included), otherwise
  absent (defaults to the session id).

Errors: unparsable lines, entries without ``type``, and a missing header are reported as
:class:`~streams.importers.events.SessionFormatError` (path, line) and skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .compressed import plain_name, present_copy
from .events import (
    ErrorHandler,
    EventIds,
    SessionFormatError,
    fold_results,
    iso_to_ms,
    joined_text,
    number_events,
    read_jsonl,
    report,
)
from .openclaw_runs import Sidecar, message_runs, sidecar_runs

__all__ = ["discover", "read", "is_transcript", "sidecar_path", "looks_like", "live_entries", "emit_events", "result_outcome"]

SIDECAR_SUFFIX = ".trajectory.jsonl"
# assistant messages whose tool calls pi-agent never executes
_UNEXECUTED_STOPS = frozenset({"aborted", "error"})
# details of the result OpenClaw's tool adapter writes for a tool that threw
_ADAPTER_ERROR_KEYS = frozenset({"status", "tool", "error"})


def is_transcript(path: Path) -> bool:
    """``*.jsonl``, ``*.jsonl.reset.*``, ``*.jsonl.deleted.*``, but never a trajectory sidecar."""
    name = plain_name(path.name)
    if SIDECAR_SUFFIX in name:
        return False
    return name.endswith(".jsonl") or ".jsonl.reset." in name or ".jsonl.deleted." in name


def sidecar_path(path: Path) -> Path:
    """The trajectory sidecar that belongs with transcript ``path`` (it may not exist), or a compressed
    copy of it (``.gz``, ``.zst``) when only that is there."""
    return present_copy(path.with_name(path.name.split(".jsonl", 1)[0] + SIDECAR_SUFFIX))


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

    live = live_entries(entries)
    run_of = message_runs(session_id, live)  # 2026.9.x run ids on the messages, else cut as 2026.7 sessions
    car = Sidecar()
    side = sidecar_path(path)
    if side.is_file():
        car = Sidecar.load(side, on_error)
        sidecar_runs(car, live, run_of)

    base: dict[str, Any] = {"session_id": session_id}
    if car.session_key:
        base["session_key"] = car.session_key
    agent_id = _agent_from_path(path) or car.agent_id
    if agent_id:
        base["agent_id"] = agent_id
    yield from emit_events(path, live, run_of, base, EventIds(session_id))


def live_entries(entries: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """The entries of a transcript without the copies a re-written branch made of older ones."""
    copies = _rewritten_copies(entries)
    return [(ln, e) for ln, e in entries if ln not in copies]


def emit_events(
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
    awaited: dict[int, dict[str, Any]] = {}  # result line -> the outcome_follows call it answers
    emitted: set[str] = set()  # toolCallIds already emitted
    batched: set[str] = set()  # calls of a message with several executed calls (pi-agent's parallel mode)
    unjudged: dict[int, tuple[Any, Any]] = {}  # result line -> (tool, args) of a call OpenClaw's detector refused
    events: list[dict[str, Any]] = []

    def event(kind: str, ln: int, ts: int | None, **fields: Any) -> dict[str, Any]:
        ev: dict[str, Any] = {"type": kind, "run_id": run_of.get(ln), **base, **fields}
        ev.update(event_id=None, ts=ts, source={"path": str(path), "line": ln})
        return ev

    for ln, e in live:
        kind = e["type"]
        ts = iso_to_ms(e.get("timestamp"))
        if kind == "compaction":
            events.append(event("compaction_retry", ln, ts))
            continue
        if kind != "message":
            continue
        msg = e["message"]
        role = msg.get("role")
        if role == "assistant" and isinstance(msg.get("content"), list):
            batch: list[str] = []
            for block in msg["content"]:
                if not isinstance(block, dict) or block.get("type") != "toolCall":
                    continue
                call_id = str(block.get("id"))
                if call_id in emitted:
                    continue
                outcome = next(((rl, r) for rl, r in results.get(call_id, ()) if rl > ln and rl not in awaited), None)
                if outcome is None and msg.get("stopReason") in _UNEXECUTED_STOPS:
                    continue
                emitted.add(call_id)
                if outcome is not None and _builtin_veto(outcome[1]):
                    # OpenClaw's own loop detection refused it before any plugin was asked:
                    # the live plugin only sees its result, which it reports as never judged
                    unjudged[outcome[0]] = (block.get("name"), block.get("arguments"))
                    continue
                batch.append(call_id)
                follows = {"outcome_follows": True} if outcome is not None else {}
                call = event("tool_call", ln, ts, tool_call_id=call_id, tool_name=block.get("name"),
                             args=block.get("arguments"), result=None, error=None, **follows)
                if outcome is not None:
                    awaited[outcome[0]] = call
                events.append(call)
            if len(batch) > 1:
                batched.update(batch)
        elif role == "toolResult":
            if ln in unjudged:
                name, arguments = unjudged[ln]
                events.append(event("tool_result", ln, ts, tool_call_id=str(msg.get("toolCallId")), tool_name=name,
                                    args=arguments, **result_outcome(msg), judged=False,
                                    blocked_by="openclaw:loop-detection"))
                continue
            call = awaited.get(ln)
            if call is not None:
                events.append(event("tool_result", ln, ts, tool_call_id=call["tool_call_id"],
                                    tool_name=call["tool_name"], args=call["args"], **result_outcome(msg)))
                continue
            call_id = str(msg.get("toolCallId"))
            if call_id in emitted:
                continue  # a second result for a call already imported
            emitted.add(call_id)
            events.append(event("tool_call", ln, ts, tool_call_id=call_id, tool_name=msg.get("toolName"),
                                args=None, **result_outcome(msg)))
    yield from number_events(fold_results(events, batched), ids)


# the note OpenClaw 2026.9.x (and the loopwatch plugin) append to a warned call's result after
# recording its outcome (docs/detection-rules.md §11.3.1): not part of what was hashed
_LOOP_NOTE = re.compile(r"\[System note: Tool-loop warning after \d+ repeated calls\. "
                        r"Change your approach or stop if you are not making progress\.\]")


def _without_loop_note(content: Any) -> Any:
    """``content`` without a trailing tool-loop warning note block."""
    if isinstance(content, list) and content:
        last = content[-1]
        if (isinstance(last, dict) and last.get("type") == "text" and isinstance(last.get("text"), str)
                and _LOOP_NOTE.fullmatch(last["text"])):
            return content[:-1]
    return content


def _builtin_veto(msg: dict[str, Any]) -> bool:
    """A result OpenClaw 2026.9.x wrote for a call its own loop detection refused (never executed)."""
    details = msg.get("details")
    return isinstance(details, dict) and details.get("status") == "blocked" and details.get("deniedReason") == "tool-loop"


def result_outcome(msg: dict[str, Any] | None) -> dict[str, Any]:
    """``{"result": ..., "error": ...}`` for a toolResult message (``None`` = no outcome).

    The adapter's record of a thrown error comes first: OpenClaw 2026.9.x writes it with
    ``isError: true`` and a text that is ``details`` pretty-printed as JSON, but its engine hashed
    the thrown message (docs/detection-rules.md §4.3), which is ``details.error``, as the live plugin sends it.
    """
    if msg is None:
        return {"result": None, "error": None}
    thrown = _adapter_error(msg.get("details"))
    if thrown is not None:
        return {"result": None, "error": thrown}
    if msg.get("isError") is True:
        return {"result": None, "error": joined_text(msg.get("content"))}
    result: dict[str, Any] = {"content": _without_loop_note(msg.get("content", []))}
    if "details" in msg:
        result["details"] = msg["details"]
    return {"result": result, "error": None}


def _adapter_error(details: Any) -> str | None:
    """The message of a thrown error that OpenClaw's tool adapter turned into a result, else ``None``.

    The adapter catches what a tool throws and returns ``{status: "error", tool, error: <message>}``
    as the result's details (``isError`` stays false); the loop-detection wrapper inside it had
    already recorded the throw as an error outcome, hashed from the same message (docs/detection-rules.md §4.3 rule
    1). Exactly those three keys: a tool's own result with ``status: "error"`` (an ``exec`` run's
    details carry ``exitCode``, ``durationMs``, ...) is a returned result.
    """
    if (isinstance(details, dict) and details.keys() == _ADAPTER_ERROR_KEYS and details["status"] == "error"
            and isinstance(details["error"], str)):
        return details["error"]
    return None
