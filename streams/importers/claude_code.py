"""Claude Code session logs (``~/.claude/projects/<cwd>/<sessionId>.jsonl``) -> stream events.

Input: JSON Lines records with ``type`` (``user``, ``assistant``, ``system``, ``progress``,
``file-history-snapshot``, ...); sub-agent logs live in ``<sessionId>/subagents/agent-<id>.jsonl``
and share the parent's ``sessionId``. Reference: ``shared/realdata/claude-code/SOURCE.md``.

Mapping (in log order):

* ``tool_call`` per ``tool_use`` block of an ``assistant`` record (Claude Code writes one
  block per record, several records sharing one ``message.id``): ``tool_call_id=id``,
  ``tool_name=name`` as Claude Code spells it (``Bash``, ``Read``, ...; OpenClaw's own
  normalisation, e.g. ``bash -> exec``, is the engine's job), ``args=input``. A ``tool_use`` id
  is imported once (resumed/forked logs repeat records).
* The outcome is the first later ``tool_result`` block with that ``tool_use_id``:
  ``is_error: true`` -> thrown error whose message is the result text (blocks' text joined by
  ``\\n``; the ``error`` Claude Code hands a ``PostToolUseFailure`` hook), ``result = null``.
  Otherwise, when the record carries Claude Code's parsed ``toolUseResult`` (the ``tool_response``
  its ``PostToolUse`` hook gets), the result is that, in the live hooks' shape
  (:func:`streams.importers.events.structured_result`: an object goes to ``details`` without its
  timing fields), so a replay gives the live result hashes; without it (progress records, older
  logs) ``result = {"content": <blocks>, "details": {}}`` where a string ``content`` becomes
  ``[{"type":"text","text":...}]`` and a block list is kept as is. No result -> ``result = null``.
* Inline or not: the outcome is inline when the result follows its call with nothing between.
  Claude Code writes a block's record as it streams and starts the tool then; the
  ``tool_use`` records of one message written before any of that message's results were all
  started before any result existed, so they are ``outcome_follows`` calls and their outcomes
  ``tool_result`` events (with the call's ``tool_name`` and ``args``) at the results' lines. A
  block written after a result of its own message was not even generated when that result
  came, so it is checked after it, as the log shows. A call with a sub-agent's calls (or any
  other event) between it and its result is written the same way.
* ``system`` / ``compact_boundary`` -> ``compaction_retry`` in the run in progress. The
  ``agent-acompact-*`` summariser log is imported like any sub-agent (it has no tool calls).
* Runs: a human prompt (a ``user`` record that is neither a tool result, nor ``isMeta``, nor a
  compact summary) starts run ``<sessionId>:<prompt id>`` (:func:`prompt_key`: the record's ``promptId``,
  which Claude Code 2.1.332 also hands every hook call as ``prompt_id``; its ``uuid`` in logs of
  releases without it); records before the first prompt are in
  ``<sessionId>:start``. A sub-agent is one run, ``<sessionId>:<agentId>``.
* Sub-agents: their calls are read from their side file (:func:`discover` brings a main log's
  side files along when the main log is named alone). A sub-agent whose side file is missing
  (named by the ``agentId`` of the main log's ``progress`` / ``agent_progress`` records, or of
  a ``Task`` result) is read from those progress records, which carry its messages with ids,
  inputs and results: its events are placed at the progress records' lines and their
  ``source`` says ``"via": "agent_progress"`` (``loopwatch import`` names such sub-agents in
  its summary). When the progress records hold fewer tool calls than the ``Task`` result's
  ``totalToolUseCount``, or none, the sub-agent is reported as a
  :class:`~streams.importers.events.SessionFormatError` naming it and the calls missing.
* ``model`` = the message's ``model``; ``usage`` = its API usage (the last record of the message's:
  the whole output), ``{turn: message.id, input_tokens: input + cache writes + cache reads,
  cached_input_tokens: cache reads, output_tokens}``, the same on every call of the message.
* ``session_id`` = ``sessionId``; ``agent_id`` = ``main`` or the sub-agent's ``agentId``;
  ``session_key`` absent. Event ids are ``<sessionId>:<line>:<n>`` for the main log and
  ``<sessionId>/<agentId>:<line>:<n>`` for a sub-agent (its side file's lines, or the main log's
  lines of its progress records).

Errors: unparsable lines and records without ``type`` are reported (path, line) and skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .compressed import plain_name, present_copy
from .events import (
    ErrorHandler,
    EventIds,
    SessionFormatError,
    discover_files,
    fold_results,
    iso_to_ms,
    joined_text,
    read_jsonl,
    report,
    structured_result,
)

__all__ = ["discover", "read", "looks_like", "is_prompt", "prompt_key", "run_id", "side_file", "MAIN_AGENT", "VIA_PROGRESS"]

MAIN_AGENT = "main"  # agent_id of the top-level conversation
# ``source["via"]`` of events read from the main log's progress records of a sub-agent
VIA_PROGRESS = "agent_progress"


def _key(path: Path) -> str:
    # sorting on the path without ".jsonl" puts "<id>" before "<id>/subagents/..."
    return str(_stem_path(path))


def _stem_path(path: Path) -> Path:
    """``path`` without ``.jsonl`` (and a ``.gz`` / ``.zst`` after it): ``<id>.jsonl.gz`` -> ``<id>``."""
    return path.with_name(plain_name(path.name)).with_suffix("")


def discover(root: Path) -> Iterator[Path]:
    """``*.jsonl`` under ``root`` (recursively), each main log before its sub-agent logs; a file
    named alone comes with the side files of its sub-agents (``<stem>/subagents/*.jsonl``)."""
    yield from discover_files(root, "*.jsonl", key=_key)
    if root.is_file():
        side_dir = _stem_path(root) / "subagents"
        if side_dir.is_dir():
            yield from discover_files(side_dir, "*.jsonl", key=_key)


def side_file(main_log: Path, agent_id: str) -> Path:
    """Where Claude Code keeps the log of sub-agent ``agent_id`` of ``main_log`` (it may not exist; a
    compressed copy of it, ``.jsonl.gz`` / ``.jsonl.zst``, when that is what is there)."""
    return present_copy(_stem_path(main_log) / "subagents" / f"agent-{agent_id}.jsonl")


def looks_like(first: Any) -> bool:
    """Whether a file's first JSON line is a Claude Code record."""
    return isinstance(first, dict) and (
        "sessionId" in first or "parentUuid" in first or first.get("type") in ("file-history-snapshot", "summary")
    )


def _blocks(record: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = (record.get("message") or {}).get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def _tool_results(record: dict[str, Any]) -> list[dict[str, Any]]:
    return _blocks(record, "tool_result") if record.get("type") == "user" else []


def is_prompt(record: dict[str, Any]) -> bool:
    """Whether a log record is a human prompt, which starts a run (see the module docstring)."""
    return (
        record.get("type") == "user"
        and not _tool_results(record)
        and not record.get("isMeta")
        and not record.get("isCompactSummary")
    )


def prompt_key(record: dict[str, Any]) -> str:
    """The id that names the run a human prompt record starts: its ``promptId`` (the ``prompt_id`` of every
    hook call of that prompt, Claude Code 2.1.332), else its ``uuid`` (older logs)."""
    prompt = record.get("promptId")
    return prompt if isinstance(prompt, str) and prompt else str(record.get("uuid"))


def run_id(session_id: str, prompt: str | None = None, sub_agent: str | None = None) -> str:
    """The run id of a call: ``<session>:<sub_agent>`` in a sub-agent, else ``<session>:<prompt>`` (the id of
    the prompt that started the run), else ``<session>:start`` (before any prompt). The live Claude Code
    hooks (:mod:`streams.runners.hooks.claude_code`) name runs with it too."""
    return f"{session_id}:{sub_agent or prompt or 'start'}"


def _progress_agent(record: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """``(agentId, the sub-agent's record)`` of an ``agent_progress`` record, else ``None``."""
    data = record.get("data")
    if record.get("type") != "progress" or not isinstance(data, dict) or data.get("type") != "agent_progress":
        return None
    inner = data.get("message")
    if not isinstance(data.get("agentId"), str) or not isinstance(inner, dict) or not isinstance(inner.get("type"), str):
        return None
    return data["agentId"], inner


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
    # (line, record, sub-agent or None for the log's own agent)
    items: list[tuple[int, dict[str, Any], str | None]] = []
    for ln, rec in records:
        found = None if sub_agent else _progress_agent(rec)
        if found is None:
            items.append((ln, rec, None))
        elif not side_file(path, found[0]).exists():
            items.append((ln, found[1], found[0]))
    events = _events(path, session_id, sub_agent, items)
    if not sub_agent:
        _check_sub_agents(path, records, events, on_error)
    ids: dict[str | None, EventIds] = {}
    for ev in events:
        agent = None if ev["agent_id"] == MAIN_AGENT else ev["agent_id"]
        if agent not in ids:
            ids[agent] = EventIds(f"{session_id}/{agent}" if agent else session_id)
        ev["event_id"] = ids[agent].next(ev["source"]["line"])
    yield from events


def _events(path: Path, session_id: str, sub_agent: str | None,
            items: list[tuple[int, dict[str, Any], str | None]]) -> list[dict[str, Any]]:
    """The events of ``items`` in log order, outcomes folded inline where nothing came between."""
    results: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for ln, rec, _ in items:
        for block in _tool_results(rec):
            results.setdefault(str(block.get("tool_use_id")), []).append((ln, block))
    awaited: dict[tuple[int, str], dict[str, Any]] = {}  # (result line, tool_use id) -> its call
    emitted: set[str] = set()
    answered: set[tuple[str | None, Any]] = set()  # (agent, message.id) with a result already written
    batches: dict[tuple[str | None, Any], list[str]] = {}  # calls written before any result of their message
    main_run = run_id(session_id, sub_agent=sub_agent)
    owner: dict[str, tuple[str | None, Any]] = {}  # tool_use id -> (agent, message.id)
    events: list[dict[str, Any]] = []
    usages = _usages(items)

    for ln, rec, agent in items:
        kind = rec["type"]
        who = agent or sub_agent
        base = {"run_id": run_id(session_id, sub_agent=who) if agent else main_run, "session_id": session_id,
                "agent_id": who or MAIN_AGENT}
        tail = {"event_id": None, "ts": iso_to_ms(rec.get("timestamp")),
                "source": {"path": str(path), "line": ln, **({"via": VIA_PROGRESS} if agent else {})}}
        if agent is None and not sub_agent and is_prompt(rec):
            main_run = run_id(session_id, prompt=prompt_key(rec))
        elif agent is None and kind == "system" and rec.get("subtype") == "compact_boundary":
            events.append({"type": "compaction_retry", **base, **tail})
        elif kind == "assistant":
            message_id = (agent, (rec.get("message") or {}).get("id"))
            for block in _blocks(rec, "tool_use"):
                call_id = str(block.get("id"))
                if call_id in emitted:
                    continue
                emitted.add(call_id)
                found = next(((rl, b) for rl, b in results.get(call_id, ()) if rl > ln and (rl, call_id) not in awaited),
                             None)
                call = {"type": "tool_call", **base, "tool_call_id": call_id, "tool_name": block.get("name"),
                        "args": block.get("input"), "result": None, "error": None,
                        **({"outcome_follows": True} if found else {}), **_model_usage(rec, usages), **tail}
                if found:
                    awaited[(found[0], call_id)] = call
                owner[call_id] = message_id
                if message_id not in answered:
                    batches.setdefault(message_id, []).append(call_id)
                events.append(call)
        for block in _tool_results(rec):
            call = awaited.get((ln, str(block.get("tool_use_id"))))
            if call is None:
                continue
            answered.add(owner[call["tool_call_id"]])
            events.append({"type": "tool_result", **base, "tool_call_id": call["tool_call_id"],
                           "tool_name": call["tool_name"], "args": call["args"], **_outcome(block, rec), **tail})
    apart = {call_id for batch in batches.values() if len(batch) > 1 for call_id in batch}
    return fold_results(events, apart)


def _usages(items: list[tuple[int, dict[str, Any], str | None]]) -> dict[Any, dict[str, Any]]:
    """``message.id`` -> its API ``usage``: the last record's (Claude Code writes a message's blocks as records
    of their own, each with the usage so far: the last has the whole output)."""
    out: dict[Any, dict[str, Any]] = {}
    for _, rec, _ in items:
        message = rec.get("message") if rec.get("type") == "assistant" else None
        if isinstance(message, dict) and message.get("id") is not None and isinstance(message.get("usage"), dict):
            out[message["id"]] = message["usage"]
    return out


def _model_usage(rec: dict[str, Any], usages: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    """``model`` and ``usage`` of a tool call (docs/events-and-verdicts.md), from its message, when it has them:
    input = input + cache writes + cache reads (every token the model read), cached = cache reads."""
    message = rec.get("message") or {}
    out: dict[str, Any] = {}
    if isinstance(message.get("model"), str):
        out["model"] = message["model"]
    usage = usages.get(message.get("id"))
    if usage is not None:
        def n(key: str) -> int:
            value = usage.get(key)
            return value if type(value) is int and value >= 0 else 0

        out["usage"] = {"turn": str(message["id"]), "output_tokens": n("output_tokens"),
                        "input_tokens": n("input_tokens") + n("cache_creation_input_tokens")
                        + n("cache_read_input_tokens"), "cached_input_tokens": n("cache_read_input_tokens")}
    return out


def _check_sub_agents(path: Path, records: list[tuple[int, dict[str, Any]]], events: list[dict[str, Any]],
                      on_error: ErrorHandler | None) -> None:
    """Report each sub-agent of a main log whose calls are neither in a side file nor all in progress records."""
    read_calls: dict[str, int] = {}
    for ev in events:
        if ev["type"] == "tool_call" and ev["source"].get("via") == VIA_PROGRESS:
            read_calls[ev["agent_id"]] = read_calls.get(ev["agent_id"], 0) + 1
    for ln, rec in records:
        outcome = rec.get("toolUseResult")
        if rec.get("type") != "user" or not isinstance(outcome, dict) or not isinstance(outcome.get("agentId"), str):
            continue
        agent = outcome["agentId"]
        if side_file(path, agent).exists():
            continue
        total = outcome.get("totalToolUseCount")
        got = read_calls.get(agent, 0)
        if isinstance(total, int) and not isinstance(total, bool) and got < total:
            report(SessionFormatError(path, ln, f"sub-agent {agent}: no side file ({side_file(path, agent).name}) "
                                                f"and {got} of its {total} tool call(s) in progress records: "
                                                f"{total - got} missing"), on_error)


def _outcome(block: dict[str, Any] | None, record: dict[str, Any] | None = None) -> dict[str, Any]:
    if block is None:
        return {"result": None, "error": None}
    content = block.get("content")
    if block.get("is_error") is True:
        return {"result": None, "error": joined_text(content)}
    if record is not None and "toolUseResult" in record and len(_tool_results(record)) == 1:
        return {"result": structured_result(record["toolUseResult"]), "error": None}
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    elif not isinstance(content, list):
        content = []
    return {"result": {"content": content, "details": {}}, "error": None}
