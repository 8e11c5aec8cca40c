"""Claude Code session logs (``~/.claude/projects/<cwd>/<sessionId>.jsonl``) -> stream events.

Input: JSON Lines records with ``type`` (``user``, ``assistant``, ``system``, ``progress``,
``file-history-snapshot``, ...); sub-agent logs live in ``<sessionId>/subagents/agent-<id>.jsonl``
and share the parent's ``sessionId``. Reference: ``shared/realdata/claude-code/SOURCE.md``.

Mapping:

* ``tool_call`` per ``tool_use`` block of an ``assistant`` record (Claude Code writes one
  block per record): ``tool_call_id=id``, ``tool_name=name`` as Claude Code spells it (``Bash``,
  ``Read``, ...; OpenClaw's own normalisation, e.g. ``bash -> exec``, is the engine's job),
  ``args=input``. A ``tool_use`` id is imported once (resumed/forked logs repeat records).
* The outcome is the first later ``tool_result`` block with that ``tool_use_id``:
  ``is_error: true`` -> thrown error whose message is the result text (blocks' text joined by
  ``\\n``), ``result = null``; otherwise ``result = {"content": <blocks>, "details": {}}`` where a
  string ``content`` becomes ``[{"type":"text","text":...}]`` and a block list is kept as is.
  ``details`` stays empty: Claude Code's parsed ``toolUseResult`` has no OpenClaw counterpart,
  so the outcome hash is the one of the text (spec §4.3 rule 8). No result -> ``result = null``.
* ``system`` / ``compact_boundary`` -> ``compaction_retry`` in the run in progress. The
  ``agent-acompact-*`` summariser log is imported like any sub-agent (it has no tool calls).
* Runs: a human prompt (a ``user`` record that is neither a tool result, nor ``isMeta``, nor a
  compact summary) starts run ``<sessionId>:<uuid>``; records before the first prompt are in
  ``<sessionId>:start``. A sub-agent file is one run, ``<sessionId>:<agentId>``.
* ``session_id`` = ``sessionId``; ``agent_id`` = ``main`` or the sub-agent's ``agentId``;
  ``session_key`` absent. Event ids are ``<sessionId>:<line>:<n>`` for the main log and
  ``<sessionId>/<agentId>:<line>:<n>`` for a sub-agent.

Errors: unparsable lines and records without ``type`` are reported (path, line) and skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .events import ErrorHandler, EventIds, SessionFormatError, discover_files, iso_to_ms, joined_text, read_jsonl, report

__all__ = ["discover", "read", "looks_like", "is_prompt", "run_id", "MAIN_AGENT"]

MAIN_AGENT = "main"  # agent_id of the top-level conversation


def discover(root: Path) -> Iterator[Path]:
    """``*.jsonl`` under ``root`` (recursively), each main log before its sub-agent logs."""
    # sorting on the path without ".jsonl" puts "<id>" before "<id>/subagents/..."
    return discover_files(root, "*.jsonl", key=lambda p: str(p.with_suffix("")))


def looks_like(first: Any) -> bool:
    """Whether a file's first JSON line is a Claude Code record."""
    return isinstance(first, dict) and (
        "sessionId" in first or "parentUuid" in first or first.get("type") in ("file-history-snapshot", "summary")
    )


def _tool_results(record: dict[str, Any]) -> list[dict[str, Any]]:
    content = (record.get("message") or {}).get("content")
    if record.get("type") != "user" or not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def is_prompt(record: dict[str, Any]) -> bool:
    """Whether a log record is a human prompt, which starts a run (see the module docstring)."""
    return (
        record.get("type") == "user"
        and not _tool_results(record)
        and not record.get("isMeta")
        and not record.get("isCompactSummary")
    )


def run_id(session_id: str, prompt: str | None = None, sub_agent: str | None = None) -> str:
    """The run id of a call: ``<session>:<sub_agent>`` in a sub-agent, else ``<session>:<prompt>`` (the id of
    the prompt that started the run), else ``<session>:start`` (before any prompt). The live Claude Code
    hooks (:mod:`streams.runners.hooks.claude_code`) name runs with it too."""
    return f"{session_id}:{sub_agent or prompt or 'start'}"


def read(path: Path, on_error: ErrorHandler | None = None) -> Iterator[dict[str, Any]]:
    """Yield the stream events of one Claude Code log (see the module docstring)."""
    path = Path(path)
    records: list[tuple[int, dict[str, Any]]] = []
    for lineno, rec in read_jsonl(path, on_error):
        if not isinstance(rec.get("type"), str):
            report(SessionFormatError(path, lineno, "record without a type"), on_error)
            continue
        records.append((lineno, rec))
    session_id = next((r["sessionId"] for _, r in records if isinstance(r.get("sessionId"), str)), None)
    session_id = session_id or path.stem
    sub_agent = next(
        (r["agentId"] for _, r in records if r.get("isSidechain") and isinstance(r.get("agentId"), str)), None
    )
    agent_id = sub_agent or MAIN_AGENT
    ids = EventIds(f"{session_id}/{sub_agent}" if sub_agent else session_id)

    results: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for ln, rec in records:
        for block in _tool_results(rec):
            results.setdefault(str(block.get("tool_use_id")), []).append((ln, block))
    used: set[tuple[int, str]] = set()
    emitted: set[str] = set()
    run = run_id(session_id, sub_agent=sub_agent)

    for ln, rec in records:
        kind = rec["type"]
        ts = iso_to_ms(rec.get("timestamp"))
        src = {"path": str(path), "line": ln}
        if not sub_agent and is_prompt(rec):
            run = run_id(session_id, prompt=str(rec.get("uuid")))
        elif kind == "system" and rec.get("subtype") == "compact_boundary":
            yield {"type": "compaction_retry", "run_id": run, "session_id": session_id, "agent_id": agent_id,
                   "event_id": ids.next(ln), "ts": ts, "source": src}
        elif kind == "assistant":
            content = (rec.get("message") or {}).get("content")
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict) or block.get("type") != "tool_use":
                    continue
                call_id = str(block.get("id"))
                if call_id in emitted:
                    continue
                emitted.add(call_id)
                found = next(((rl, b) for rl, b in results.get(call_id, ()) if rl > ln and (rl, call_id) not in used), None)
                if found:
                    used.add((found[0], call_id))
                ev: dict[str, Any] = {"type": "tool_call", "run_id": run, "session_id": session_id,
                                      "agent_id": agent_id, "tool_call_id": call_id, "tool_name": block.get("name"),
                                      "args": block.get("input")}
                ev.update(_outcome(found[1] if found else None))
                ev.update(event_id=ids.next(ln), ts=ts, source=src)
                yield ev


def _outcome(block: dict[str, Any] | None) -> dict[str, Any]:
    if block is None:
        return {"result": None, "error": None}
    content = block.get("content")
    if block.get("is_error") is True:
        return {"result": None, "error": joined_text(content)}
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    elif not isinstance(content, list):
        content = []
    return {"result": {"content": content, "details": {}}, "error": None}
