"""Codex CLI session files (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``) -> stream events.

Input: JSON Lines records ``{"timestamp", "type", "payload"}`` as Codex 0.171 writes them:
``session_meta`` (``payload.id``: the session id, what hooks call ``session_id``), ``turn_context``,
``response_item`` (the conversation: ``message``, ``function_call`` ``{name, arguments, call_id}``,
``custom_tool_call`` ``{name, input, call_id}``, ``function_call_output`` / ``custom_tool_call_output``
``{call_id, output}``, ...), ``event_msg`` (``task_started`` / ``task_complete`` / ``turn_aborted``
with ``turn_id``; ``item_completed`` whose ``item`` is a ``CommandExecution`` ``{id = call_id,
aggregated_output, exit_code, status}``; ``context_compacted``) and ``compacted``.

Mapping, the one the live Codex hooks use (:mod:`streams.runners.hooks.codex`), so a replay of the
session gives the live run ids, call ids and result hashes:

* ``session_id`` = the session id; ``run_id`` = ``<session_id>#<turn_id>`` (each turn a run,
  :func:`streams.importers.codex.run_id`); ``agent_id`` = ``codex`` (a sub-agent's: its thread id, see
  "Sub-agents"); ``tool_call_id`` = ``call_id``.
* A shell call (``exec_command {cmd}``, ``shell_command {command}``, ``shell {command: [...]}``,
  what hooks name ``Bash``) -> ``tool_name = "shell"``, ``args = {"command": <the command line>}``
  (for ``shell``, the script of ``bash -lc SCRIPT``, else the words joined). Its outcome is the
  ``CommandExecution``'s ``aggregated_output`` as text (``{"content": [{"type": "text", "text": ...}],
  "details": {}}``), which is the ``tool_response`` Codex hands the ``PostToolUse`` hook: a non-zero
  exit is a returned result (the engine hashes the text, docs/detection-rules.md §4.3 rule 8).
* ``apply_patch`` (custom tool) -> ``apply_patch`` with ``args = {"command": <patch>}``; other
  function calls keep their name and parsed ``arguments``; their outcome is the output text.
* A call Codex did not run has no outcome: one a ``PreToolUse`` hook blocked (output ``... blocked by
  PreToolUse hook: <reason> ...``) and one interrupted before it ran (``aborted by user``). The
  engine judges it again in a replay (a loopwatch block is blocked again).
* ``compacted`` (or ``event_msg`` ``context_compacted`` when no ``compacted`` record is next to it)
  -> ``compaction_retry`` in the turn in progress.
* Order: every executed call is written as an ``outcome_follows`` call at its ``function_call`` line
  and a ``tool_result`` at its outcome's line; calls whose outcome follows at once are folded inline
  (:func:`streams.importers.events.fold_results`), calls of one model response that all started
  before any outcome stay apart.
* ``ts`` is the record's ``timestamp`` in epoch milliseconds.
* ``model`` = the last ``turn_context``'s; ``usage`` = the ``last_token_usage`` of the first
  ``token_count`` event after the call (the model response that asked for it),
  ``{turn: "token_count@<line>", input_tokens, cached_input_tokens, output_tokens}``.
* Sub-agents (``spawn_agent`` of the ``multi_agent_v1`` tools): Codex 0.171 writes each spawned thread
  to a rollout file of its own (``rollout-<time>-<thread id>.jsonl``, in the day folder of its start),
  whose ``session_meta`` has ``id`` = the sub-agent's thread, ``session_id`` = the session it belongs
  to (the root thread's id), ``parent_thread_id`` and ``source = {"subagent": {"thread_spawn":
  {"parent_thread_id", "depth", "agent_nickname", ...}}}``. Its hooks get that ``session_id``, the
  sub-agent's own ``turn_id`` and ``agent_id`` = its thread; so its events have ``session_id`` = the
  root session, ``run_id`` = ``<root session>#<sub-agent turn>`` (a run of its own, in its parent's
  session), ``agent_id`` = the sub-agent's thread id as the hook sends, ``source`` adds ``thread`` and
  ``parent_thread``, and event ids are ``<session>/<thread>:<line>:<n>``. A rollout without
  ``session_id`` (before 0.171) belongs to its parent thread's session. A namespaced function call
  is named as hooks get it (:func:`hook_tool_name`: ``multi_agent_v1wait_agent``, but ``spawn_agent``).

Errors: unparsable lines, records without ``type`` or ``payload``, calls without ``call_id`` are
reported (path, line) and skipped.
"""

from __future__ import annotations

import bisect
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .events import (ErrorHandler, EventIds, SessionFormatError, fold_results, iso_to_ms, joined_text,
                     number_events, read_jsonl, report, text_result)

__all__ = ["read", "looks_like", "SHELL_TOOLS", "BLOCKED_MARK", "shell_command", "sub_agent_parent", "hook_tool_name"]

AGENT_ID = "codex"
SHELL_TOOLS = frozenset({"exec_command", "shell_command", "shell", "local_shell"})
# how Codex words the output of a call a PreToolUse hook blocked, and of one interrupted before it ran
BLOCKED_MARK = "blocked by PreToolUse hook"
ABORTED_MARK = "aborted by user"
_RECORD_TYPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
_PLAIN_HOOK_NAMES = frozenset({"spawn_agent"})  # namespaced tools hooks get without their namespace


def looks_like(first: Any) -> bool:
    """Whether a file's first JSON line is a Codex session (rollout) record."""
    return isinstance(first, dict) and first.get("type") in _RECORD_TYPES and isinstance(first.get("payload"), dict)


def shell_command(name: str, arguments: Any) -> Any:
    """The command line of a shell call, as Codex's hooks give it in ``tool_input.command``."""
    if not isinstance(arguments, dict):
        return arguments
    if name == "exec_command":
        return arguments.get("cmd")
    command = arguments.get("command")
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        if len(command) == 3 and command[1] in ("-lc", "-c"):
            return command[2]
        return shlex.join(command)
    return command


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _output_text(output: Any) -> str:
    if isinstance(output, dict):  # older shape {"content": ..., "success": ...}
        output = output.get("content")
    return output if isinstance(output, str) else joined_text(output)


def read(path: Path, on_error: ErrorHandler | None = None) -> Iterator[dict[str, Any]]:
    """Yield the stream events of one Codex session file (see the module docstring)."""
    from .codex import run_id, shell_args  # the Codex importer's helpers (it imports this module)

    path = Path(path)
    rows: list[tuple[int, str, dict[str, Any], Any]] = []
    for lineno, rec in read_jsonl(path, on_error):
        if not isinstance(rec.get("type"), str) or not isinstance(rec.get("payload"), dict):
            report(SessionFormatError(path, lineno, "record without a type or payload"), on_error)
            continue
        rows.append((lineno, rec["type"], rec["payload"], rec.get("timestamp")))
    thread = _thread(rows, path)
    session_id = thread.session
    # the line of each call's outcome: its CommandExecution completion, else its output
    executed: dict[str, tuple[int, dict[str, Any]]] = {}
    outputs: dict[str, tuple[int, str]] = {}
    for ln, kind, payload, _ in rows:
        ptype = payload.get("type")
        item = payload.get("item") if ptype == "item_completed" else None
        if kind == "event_msg" and isinstance(item, dict) and item.get("type") == "CommandExecution":
            executed.setdefault(str(item.get("id")), (ln, item))
        elif kind == "response_item" and ptype in ("function_call_output", "custom_tool_call_output"):
            outputs.setdefault(str(payload.get("call_id")), (ln, _output_text(payload.get("output"))))

    usage_at = _UsageLines(rows)
    events: list[dict[str, Any]] = []
    turn: str | int = 1
    calls: dict[str, dict[str, Any]] = {}
    pending: dict[int, list[tuple[str, dict[str, Any]]]] = {}  # outcome line -> (call id, result event)
    response_calls: list[str] = []  # calls of the model response being read, before any outcome
    apart: set[str] = set()
    compacted_at = {ln for ln, kind, _, _ in rows if kind == "compacted"}
    for ln, kind, payload, stamp in rows:
        ptype = payload.get("type")
        tail = {"event_id": None, "ts": iso_to_ms(stamp), "source": {"path": str(path), "line": ln, **thread.source}}
        if kind == "event_msg" and ptype == "task_started" and isinstance(payload.get("turn_id"), str):
            turn = payload["turn_id"]
        head = {"run_id": run_id(session_id, turn), "session_id": session_id, "agent_id": thread.agent}
        if kind == "compacted" or (kind == "event_msg" and ptype == "context_compacted"
                                   and not ({ln - 1, ln + 1} & compacted_at)):
            events.append({"type": "compaction_retry", **head, **tail})
        elif kind == "response_item" and ptype in ("function_call", "custom_tool_call"):
            call_id, name = payload.get("call_id"), payload.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                report(SessionFormatError(path, ln, f"{ptype} without a call_id or name"), on_error)
                continue
            if name in SHELL_TOOLS:
                tool, args = "shell", shell_args(shell_command(name, _arguments(payload.get("arguments"))))
            elif ptype == "custom_tool_call":
                tool, args = name, {"command": payload.get("input")}
            else:
                tool, args = hook_tool_name(name, payload.get("namespace")), _arguments(payload.get("arguments"))
            outcome = _outcome(call_id, name, executed, outputs)
            call = {"type": "tool_call", **head, "tool_call_id": call_id, "tool_name": tool, "args": args,
                    "result": None, "error": None, **({"outcome_follows": True} if outcome else {}),
                    **usage_at.of(ln), **tail}
            calls[call_id] = call
            events.append(call)
            if outcome:
                response_calls.append(call_id)
                pending.setdefault(outcome[0], []).append(
                    (call_id, {"type": "tool_result", **head, "tool_call_id": call_id, "tool_name": tool,
                               "args": args, "result": outcome[1], "error": None, **tail,
                               "source": {"path": str(path), "line": outcome[0], **thread.source}}))
        for call_id, result in pending.pop(ln, ()):
            if len(response_calls) > 1:
                apart.update(response_calls)
            response_calls = []
            result["ts"] = tail["ts"]
            events.append(result)
    return iter(number_events(fold_results(events, apart), EventIds(thread.id_prefix)))


@dataclass(frozen=True, slots=True)
class _Thread:
    """Whose file this is: ``session`` the session id the hooks send, ``source`` what every event's ``source``
    adds (``thread``, ``parent_thread`` for a sub-agent), ``id_prefix`` of its event ids, ``agent`` the
    ``agent_id`` of its events (a sub-agent's thread id, what its hooks get as ``agent_id``; else ``codex``)."""

    session: str
    source: dict[str, str]
    id_prefix: str
    agent: str = AGENT_ID


def _thread(rows: list[tuple[int, str, dict[str, Any], Any]], path: Path) -> _Thread:
    """The thread of a rollout from its ``session_meta`` (module docstring, "Sub-agents")."""
    meta = next((p for _, t, p, _ in rows if t == "session_meta" and isinstance(p.get("id"), str)), None)
    if meta is None:
        return _Thread(path.stem, {}, path.stem)
    thread = meta["id"]
    parent = sub_agent_parent(meta)
    session = meta.get("session_id")
    if not isinstance(session, str) or not session:
        session = parent or thread  # releases before 0.171 wrote no session_id
    if parent is None and session == thread:
        return _Thread(thread, {}, thread)
    source = {"thread": thread, **({"parent_thread": parent} if parent else {})}
    return _Thread(session, source, f"{session}/{thread}", thread if parent else AGENT_ID)


def sub_agent_parent(meta: dict[str, Any]) -> str | None:
    """The parent thread id of a sub-agent's ``session_meta`` payload (``parent_thread_id``, else
    ``source.subagent.thread_spawn.parent_thread_id``), or None for a thread a user started."""
    parent = meta.get("parent_thread_id")
    if isinstance(parent, str) and parent:
        return parent
    source = meta.get("source")
    spawn = source.get("subagent") if isinstance(source, dict) else None
    spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
    parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    return parent if isinstance(parent, str) and parent else None


def hook_tool_name(name: str, namespace: Any) -> str:
    """The ``tool_name`` Codex 0.171 hands hooks for a function call of ``namespace`` (``multi_agent_v1``'s
    ``wait_agent`` -> ``multi_agent_v1wait_agent``: the two joined as they are), except ``spawn_agent``,
    which hooks get by its own name (both measured with the real CLI)."""
    if isinstance(namespace, str) and namespace and name not in _PLAIN_HOOK_NAMES:
        return namespace + name
    return name


def _outcome(call_id: str, name: str, executed: dict, outputs: dict) -> tuple[int, dict[str, Any]] | None:
    """``(line, result)`` of a call that ran; None for one Codex did not run (blocked, interrupted, no output)."""
    if name in SHELL_TOOLS:
        found = executed.get(call_id)
        if found is None:
            return None
        return found[0], text_result(found[1].get("aggregated_output") or "")
    found = outputs.get(call_id)
    if found is None or BLOCKED_MARK in found[1] or found[1].rstrip().endswith(ABORTED_MARK):
        return None
    return found[0], text_result(found[1])


class _UsageLines:
    """``model`` and ``usage`` of a call at a line: the model of the last ``turn_context`` before it, and the
    ``last_token_usage`` of the first ``token_count`` event after it (Codex writes it once the model response
    that asked for the call is complete; the calls before the same ``token_count`` share it). Codex counts
    cached input in ``input_tokens`` and reasoning in ``output_tokens``, as the usage of an event does."""

    def __init__(self, rows: list[tuple[int, str, dict[str, Any], Any]]) -> None:
        models = [(ln, p["model"]) for ln, kind, p, _ in rows
                  if kind == "turn_context" and isinstance(p.get("model"), str)]
        tokens = [(ln, p["info"]["last_token_usage"]) for ln, kind, p, _ in rows
                  if kind == "event_msg" and p.get("type") == "token_count" and isinstance(p.get("info"), dict)
                  and isinstance(p["info"].get("last_token_usage"), dict)]
        self.model_lines, self.models = [ln for ln, _ in models], [m for _, m in models]
        self.token_lines, self.tokens = [ln for ln, _ in tokens], [u for _, u in tokens]

    def of(self, line: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        at = bisect.bisect_left(self.model_lines, line) - 1
        if at >= 0:
            out["model"] = self.models[at]
        after = bisect.bisect_right(self.token_lines, line)
        if after < len(self.tokens):
            usage = self.tokens[after]

            def n(key: str) -> int:
                value = usage.get(key)
                return value if type(value) is int and value >= 0 else 0

            out["usage"] = {"turn": f"token_count@{self.token_lines[after]}", "input_tokens": n("input_tokens"),
                            "cached_input_tokens": n("cached_input_tokens"), "output_tokens": n("output_tokens")}
        return out
