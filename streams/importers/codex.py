"""Codex CLI recordings -> stream events: session files (rollouts, :mod:`.codex_rollout`) and ``codex exec --json`` output.

A file whose first record is a rollout record (``session_meta``, ...) is read by
:func:`streams.importers.codex_rollout.read`, with the ids the live Codex hooks use; the rest of this
docstring is about ``codex exec --json`` output, whose item ids (``item_1``, ...) are not Codex's call
ids, so a capture predicts the live decisions but not the live ids.

Input: JSON Lines events ``thread.started {thread_id}``, ``turn.started``, ``turn.completed``,
``turn.failed``, ``item.started {item}``, ``item.completed {item}``, ``error``; ``item.id`` pairs a
start with its completion. Reference: ``shared/realdata/codex-cli/SOURCE.md``.

Mapping (``session_id`` = ``thread_id``, ``run_id`` = ``<thread_id>#turn<n>`` for the n-th
``turn.started``, ``agent_id`` = ``"codex"``, ``tool_call_id`` = ``item.id``):

* ``command_execution`` -> ``tool_name = "shell"``, ``args = {"command": item.command}``. The
  outcome is ``result = {"content": [{"type":"text","text": aggregated_output}], "details":
  {"status", "exitCode", "aggregated"}}`` (OpenClaw's exec field names, so the facts sit where a
  reader expects them; the engine hashes ``shell`` by docs/detection-rules.md §4.3 rule 8, text plus details). A
  non-zero exit code is a *returned* result, like OpenClaw's ``exec`` (Codex marks it
  ``status:"failed"``, but the command ran). Only a command that never ran (``declined``, or
  ``failed`` with no exit code) is a thrown error, whose message is the output text or
  ``"command <status>"``.
* ``file_change`` (completion only) -> ``apply_patch`` with ``args = {"changes": [...]}`` and
  ``result = {"content": [], "details": {"status", "changes"}}``; ``status:"failed"`` -> error
  ``"patch failed"``.
* ``todo_list`` -> ``update_plan`` with ``args = {"items": [...]}`` from the first event of the
  item; the completion gives ``result = {"content": [], "details": {"items": [...]}}``.
* ``web_search`` -> ``web_search`` with ``args = {"query": ...}``; ``mcp_tool_call`` ->
  ``tool_name = item.tool``, ``args = item.arguments``, ``result = item.result``, ``error =
  item.error`` (neither occurs in the recorded files).
* Ordering: a call whose completion follows its start with no other tool item starting or
  completing in between is emitted as one complete ``tool_call`` (a ``file_change``, which has
  only a completion, always is). Otherwise (Codex runs several at once) the call is emitted at
  its start with ``outcome_follows: true`` and its outcome as a ``tool_result`` (with the call's
  ``tool_name`` and ``args``) at its completion, which is how OpenClaw would see them (detect at
  call, record at outcome): an item that starts while another is still running gets its result
  after every completion that comes before it in the log, never inline.
* No compaction events exist in this format. ``error`` / ``turn.failed`` are run-level
  (transport) errors, not tool results, and produce no event.
* Codex prints no clock: ``ts`` is the 1-based line number (order only).

Errors: unparsable lines and items without ``id`` are reported (path, line) and skipped; a file with
records but neither a rollout's first record nor any ``codex exec --json`` event is reported (at its
first record) and gives nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import codex_rollout
from .compressed import open_binary
from .events import (
    ErrorHandler,
    EventIds,
    SessionFormatError,
    discover_files,
    fold_results,
    number_events,
    read_jsonl,
    report,
    text_result,
)

__all__ = ["discover", "read", "looks_like", "TOOL_ITEMS", "AGENT_ID", "run_id", "shell_args"]

AGENT_ID = "codex"

# the event kinds of `codex exec --json` output (thread.started, turn.completed, item.started, error, ...)
_EXEC_KINDS = frozenset({"thread", "turn", "item", "error"})

# item.type -> tool name loopwatch reports
TOOL_ITEMS = {
    "command_execution": "shell",
    "file_change": "apply_patch",
    "todo_list": "update_plan",
    "web_search": "web_search",
    "mcp_tool_call": None,  # named by item.tool
}


def discover(root: Path) -> Iterator[Path]:
    """``*.jsonl`` under ``root`` (recursively, sorted), or ``root`` itself."""
    return discover_files(root, "*.jsonl")


def looks_like(first: Any) -> bool:
    """Whether a file's first JSON line is a Codex session record or a ``codex exec --json`` event."""
    return codex_rollout.looks_like(first) or (
        isinstance(first, dict) and first.get("type") in ("thread.started", "turn.started"))


def run_id(session_id: str, turn: int | str) -> str:
    """The run id of a turn: ``<thread_id>#turn<n>`` for the n-th turn of a capture (an int); the live
    Codex hooks (:mod:`streams.runners.hooks.codex`), which get Codex's own turn id, give ``<session>#<turn_id>``:
    the same cut into runs, spelled with the id Codex has there."""
    return f"{session_id}#turn{turn}" if isinstance(turn, int) else f"{session_id}#{turn}"


def shell_args(command: Any) -> dict[str, Any]:
    """The args of a shell command call (``tool_name`` ``shell``), from a capture or a live hook."""
    return {"command": command}


def _is_rollout(path: Path) -> bool:
    try:
        with open_binary(path) as handle:
            first = next((line for line in handle if line.strip()), b"")
        return codex_rollout.looks_like(json.loads(first))
    except (OSError, ValueError):  # CompressedDataError is a ValueError
        return False


def _args(item: dict[str, Any]) -> Any:
    kind = item.get("type")
    if kind == "command_execution":
        return shell_args(item.get("command"))
    if kind == "file_change":
        return {"changes": item.get("changes")}
    if kind == "todo_list":
        return {"items": item.get("items")}
    if kind == "web_search":
        return {"query": item.get("query")}
    return item.get("arguments")


def _outcome(item: dict[str, Any]) -> dict[str, Any]:
    kind, status = item.get("type"), item.get("status")
    if kind == "command_execution":
        output = item.get("aggregated_output") or ""
        exit_code = item.get("exit_code")
        if status == "declined" or (status == "failed" and exit_code is None):
            return {"result": None, "error": output.strip() or f"command {status}"}
        return {"result": text_result(output, {"status": status, "exitCode": exit_code, "aggregated": output}),
                "error": None}
    if kind == "file_change":
        if status == "failed":
            return {"result": None, "error": "patch failed"}
        return {"result": {"content": [], "details": {"status": status, "changes": item.get("changes")}}, "error": None}
    if kind == "todo_list":
        return {"result": {"content": [], "details": {"items": item.get("items")}}, "error": None}
    if kind == "mcp_tool_call":
        return {"result": item.get("result"), "error": item.get("error")}
    return {"result": {"content": [], "details": {k: v for k, v in item.items() if k not in ("id", "type")}},
            "error": None}


def read(path: Path, on_error: ErrorHandler | None = None) -> Iterator[dict[str, Any]]:
    """Yield the stream events of one Codex session file or ``codex exec --json`` capture (see the module
    docstring)."""
    path = Path(path)
    if _is_rollout(path):
        yield from codex_rollout.read(path, on_error)
        return
    rows: list[tuple[int, dict[str, Any]]] = []
    for lineno, ev in read_jsonl(path, on_error):
        item = ev.get("item")
        if ev.get("type") in ("item.started", "item.completed", "item.updated"):
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                report(SessionFormatError(path, lineno, "item event without an item id"), on_error)
                continue
        rows.append((lineno, ev))
    if rows and not any(str(e.get("type")).split(".", 1)[0] in _EXEC_KINDS for _, e in rows):
        report(SessionFormatError(path, rows[0][0], "neither a Codex session file (its first record is no "
                                  "session_meta, response_item, ... record with a payload) nor `codex exec "
                                  "--json` output (no thread, turn or item event)"), on_error)
        return

    session_id = next((e["thread_id"] for _, e in rows if e.get("type") == "thread.started"), None) or path.stem
    # per tool item (keyed by turn and id: ids restart each turn): its first event, its completion
    first_at: dict[tuple[int, str], int] = {}
    done_at: dict[tuple[int, str], int] = {}
    turn = 0
    keyed: list[tuple[int, dict[str, Any], tuple[int, str] | None, int]] = []
    for i, (ln, ev) in enumerate(rows):
        if ev.get("type") == "turn.started":
            turn += 1
        key = None
        item = ev.get("item")
        if isinstance(item, dict) and item.get("type") in TOOL_ITEMS:
            key = (turn, item["id"])
            first_at.setdefault(key, i)
            if ev.get("type") == "item.completed":
                done_at.setdefault(key, i)
        keyed.append((ln, ev, key, max(turn, 1)))

    events: list[dict[str, Any]] = []
    calls: dict[tuple[int, str], dict[str, Any]] = {}
    running: set[tuple[int, str]] = set()  # started, not completed
    apart: set[str] = set()  # items that started while another was running
    for i, (ln, ev, key, turn_no) in enumerate(keyed):
        if key is None:
            continue
        item = ev["item"]
        head = {"run_id": run_id(session_id, turn_no), "session_id": session_id, "agent_id": AGENT_ID,
                "tool_call_id": item["id"]}
        tail = {"event_id": None, "ts": ln, "source": {"path": str(path), "line": ln}}
        end = done_at.get(key)
        if first_at[key] == i:
            if running and end is not None and end > i:
                apart.add(item["id"])
            name = TOOL_ITEMS[item["type"]] or item.get("tool")
            call = {"type": "tool_call", **head, "tool_name": name, "args": _args(item), "result": None,
                    "error": None, **({"outcome_follows": True} if end is not None else {}), **tail}
            calls[key] = call
            events.append(call)
            if end is not None and end > i:
                running.add(key)
        if end == i:
            running.discard(key)
            call = calls[key]
            events.append({"type": "tool_result", **head, "tool_name": call["tool_name"], "args": call["args"],
                           **_outcome(item), **tail})
    yield from number_events(fold_results(events, apart), EventIds(session_id))
