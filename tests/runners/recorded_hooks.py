"""Recorded sessions as the hook calls their runner would have made, and hook output read back as decisions.

Claude Code (a session log, written out line by line to ``transcript_dir`` as Claude Code writes its
transcript, each hook call naming it as ``transcript_path`` and seeing the lines before its own
record): ``UserPromptSubmit`` for each human prompt (the importer's
``is_prompt``), ``PreToolUse`` at each ``tool_use`` block, ``PostToolUse`` (``tool_response`` = the
record's ``toolUseResult``, the parsed result Claude Code hands its hooks) or ``PostToolUseFailure``
(``error`` = the result text) at the tool's result, ``SessionStart`` with ``source: "compact"`` at a
``compact_boundary``; sub-agent logs carry the sub-agent's ``agent_id``.

Codex (``codex exec --json``): each turn gets a ``turn_id``; ``PreToolUse`` when a ``Bash`` command
(``command_execution``) or ``apply_patch`` (``file_change``) starts, ``PostToolUse`` when it completes.
Codex runs no hooks for its plan tool (``todo_list``) or web search, so those make no call. The
``tool_response`` of a command holds the output, exit code and status Codex reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from streams.importers.claude_code import is_prompt
from streams.importers.codex import TOOL_ITEMS
from streams.importers.events import joined_text, read_jsonl


def claude_code_hooks(path: Path, transcript_dir: Path) -> Iterator[dict[str, Any]]:
    """The hook payloads of one Claude Code log, in the order Claude Code would have sent them."""
    lines = {ln: raw for ln, raw in enumerate(Path(path).read_bytes().splitlines(keepends=True), 1)}
    numbered = [(ln, rec) for ln, rec in read_jsonl(Path(path), None) if isinstance(rec.get("type"), str)]
    records = [rec for _, rec in numbered]
    session = next((r["sessionId"] for r in records if isinstance(r.get("sessionId"), str)), Path(path).stem)
    sub_agent = next((r["agentId"] for r in records if r.get("isSidechain") and isinstance(r.get("agentId"), str)),
                     None)
    transcript = Path(transcript_dir) / Path(path).name
    transcript.write_bytes(b"")
    common: dict[str, Any] = {"session_id": session, "transcript_path": str(transcript), "cwd": "/work",
                              "permission_mode": "default"}
    if sub_agent:
        common["agent_id"] = sub_agent
    called: dict[str, dict[str, Any]] = {}
    answered: set[str] = set()
    written = 0
    for line, rec in numbered:
        with transcript.open("ab") as handle:  # the lines before this record: Claude Code writes it after the hook
            handle.write(b"".join(lines[n] for n in range(written + 1, line)))
        written = line - 1
        content = (rec.get("message") or {}).get("content")
        if rec["type"] == "user" and not sub_agent and is_prompt(rec):
            yield {**common, "hook_event_name": "UserPromptSubmit", "prompt": joined_text(content)}
        elif rec["type"] == "system" and rec.get("subtype") == "compact_boundary":
            yield {**common, "hook_event_name": "SessionStart", "source": "compact"}
        elif rec["type"] == "assistant" and isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use" and str(block.get("id")) not in called:
                    call = {"tool_name": block.get("name"), "tool_input": block.get("input"),
                            "tool_use_id": str(block.get("id"))}
                    called[call["tool_use_id"]] = call
                    yield {**common, "hook_event_name": "PreToolUse", **call}
        elif rec["type"] == "user" and isinstance(content, list):
            for block in content:
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                call_id = str(block.get("tool_use_id"))
                if call_id not in called or call_id in answered:
                    continue
                answered.add(call_id)
                if block.get("is_error") is True:
                    yield {**common, "hook_event_name": "PostToolUseFailure", **called[call_id],
                           "error": joined_text(block.get("content"))}
                else:
                    yield {**common, "hook_event_name": "PostToolUse", **called[call_id],
                           "tool_response": rec.get("toolUseResult")}


def codex_hooks(path: Path) -> Iterator[dict[str, Any]]:
    """The hook payloads of one ``codex exec --json`` capture, in the order Codex would have sent them."""
    session, turn = Path(path).stem, 0
    started: set[str] = set()
    for _, ev in read_jsonl(Path(path), None):
        kind, item = ev.get("type"), ev.get("item")
        if kind == "thread.started":
            session = ev.get("thread_id") or session
        elif kind == "turn.started":
            turn += 1
        if not isinstance(item, dict) or item.get("type") not in ("command_execution", "file_change"):
            continue
        assert item.get("type") in TOOL_ITEMS
        common = {"session_id": session, "turn_id": f"turn-{turn}", "transcript_path": None, "cwd": "/work",
                  "model": "gpt-5-codex", "permission_mode": "default", "tool_use_id": f"call_{turn}_{item['id']}"}
        if item["type"] == "command_execution":
            call = {"tool_name": "Bash", "tool_input": {"command": item.get("command")}}
            response = {"output": item.get("aggregated_output"), "exit_code": item.get("exit_code"),
                        "status": item.get("status")}
        else:
            call = {"tool_name": "apply_patch", "tool_input": {"command": json.dumps(item.get("changes"))}}
            response = {"status": item.get("status"), "changes": item.get("changes")}
        key = f"{turn}:{item['id']}"
        if key not in started:
            started.add(key)
            yield {**common, "hook_event_name": "PreToolUse", **call}
        if kind == "item.completed":
            yield {**common, "hook_event_name": "PostToolUse", **call, "tool_response": response}


def decision_of(output: dict[str, Any]) -> str:
    """What a runner does with a hook output: ``block`` (deny), ``abort`` (stop), ``warn`` (a message), ``allow``."""
    specific = output.get("hookSpecificOutput") or {}
    if specific.get("permissionDecision") == "deny":
        return "block"
    if output.get("continue") is False:
        return "abort"
    if output.get("systemMessage"):
        return "warn"
    return "allow"


def replay_decision(verdict: str) -> str:
    """A replayed verdict as a runner sees it (``ignore`` changes nothing: ``allow``)."""
    return verdict if verdict in ("warn", "block", "abort") else "allow"
