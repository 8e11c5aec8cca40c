"""SWE-agent trajectories (``<instance>.traj``) -> stream events.

Input: one JSON object ``{trajectory: [{action, observation, thought, response, state, ...}],
history: [{role, content, [action], [tool_calls], [is_demo], ...}], info, ...}``.
Reference: ``shared/realdata/swe-agent/SOURCE.md``.

Mapping: one ``tool_call`` per ``trajectory`` step, in order, with the result inline.

* ``session_id`` = ``run_id`` = the file name without ``.traj``; ``agent_id`` = ``"swe-agent"``.
* The step is matched with the i-th non-demonstration assistant message of ``history`` when
  that message's ``action`` is the step's action. If that message has function-calling
  ``tool_calls``: ``tool_call_id = tool_calls[0].id``, ``tool_name = function.name``, ``args`` =
  the parsed ``function.arguments`` (the raw string if it is not JSON). Otherwise
  ``tool_call_id = "<instance>#<i>"``, ``tool_name`` = the first word of the action (``edit``,
  ``open``, ``python``, ``submit``, ...), and ``args`` = the rest of the action as one string
  (``""`` when there is none), verbatim: the action text *is* the call.
* ``result = {"content": [{"type":"text","text": observation}], "details": {}}``. SWE-agent has
  no error flag, so every observation is a returned result, never a thrown error (texts such
  as "Wrong flag!" or "syntax error" are error-looking *results*, docs/detection-rules.md §9).
* No compactions exist in this format.
* The file carries no clock: ``ts`` is the step index; ``source`` is ``{"path", "line": 1,
  "step": i}`` (the file is pretty-printed JSON, so steps are cited by index).

Errors: a file that is not UTF-8, or not one JSON object with a ``trajectory`` list, is
reported (with the line of the first bad byte or JSON error) and yields nothing; a step
without a string ``action`` is reported and skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streams.wire.codecs import json_loads
from .events import ErrorHandler, EventIds, SessionFormatError, discover_files, not_utf8, report, text_result

__all__ = ["discover", "read", "looks_like"]


def discover(root: Path) -> Iterator[Path]:
    """``*.traj`` under ``root`` (recursively, sorted), or ``root`` itself."""
    return discover_files(root, "*.traj")


def looks_like(first: Any) -> bool:
    """Whether a parsed file is a SWE-agent trajectory."""
    return isinstance(first, dict) and isinstance(first.get("trajectory"), list)


def _split_action(action: str) -> tuple[str, str]:
    parts = action.strip().split(None, 1)
    if not parts:
        return "", ""
    return parts[0], parts[1] if len(parts) > 1 else ""


def _function_call(message: dict[str, Any] | None) -> tuple[str, str, Any] | None:
    calls = (message or {}).get("tool_calls")
    if not isinstance(calls, list) or not calls or not isinstance(calls[0], dict):
        return None
    fn = calls[0].get("function") or {}
    raw = fn.get("arguments")
    try:
        args = json_loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        args = raw
    return str(calls[0].get("id")), fn.get("name"), args


def read(path: Path, on_error: ErrorHandler | None = None) -> Iterator[dict[str, Any]]:
    """Yield the stream events of one ``.traj`` file (see the module docstring)."""
    path = Path(path)
    from .compressed import CompressedDataError, open_binary, plain_name

    try:
        with open_binary(path) as fh:
            data = fh.read()
    except CompressedDataError as exc:
        report(SessionFormatError(path, None, str(exc)), on_error)
        return
    try:
        doc = json_loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:  # one JSON document: nothing of it can be read
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        lineno = data.count(b"\n", 0, line_start) + 1
        report(SessionFormatError(path, lineno, not_utf8(exc, exc.start - line_start)), on_error)
        return
    except json.JSONDecodeError as exc:
        report(SessionFormatError(path, exc.lineno, f"not JSON: {exc.msg}"), on_error)
        return
    if not looks_like(doc):
        report(SessionFormatError(path, 1, "not a SWE-agent trajectory (no trajectory list)"), on_error)
        return
    name = plain_name(path.name)
    instance = name[: -len(".traj")] if name.endswith(".traj") else Path(name).stem
    history = doc.get("history") if isinstance(doc.get("history"), list) else []
    assistants = [m for m in history if isinstance(m, dict) and m.get("role") == "assistant" and not m.get("is_demo")]
    ids = EventIds(instance)

    for i, step in enumerate(doc["trajectory"]):
        action = step.get("action") if isinstance(step, dict) else None
        if not isinstance(action, str):
            report(SessionFormatError(path, 1, f"trajectory step {i} has no action"), on_error)
            continue
        message = assistants[i] if i < len(assistants) and assistants[i].get("action") == action else None
        fcall = _function_call(message)
        if fcall:
            call_id, name, args = fcall
        else:
            call_id = f"{instance}#{i}"
            name, args = _split_action(action)
        observation = step.get("observation")
        yield {"type": "tool_call", "run_id": instance, "session_id": instance, "agent_id": "swe-agent",
               "tool_call_id": call_id, "tool_name": name, "args": args,
               "result": text_result(observation if isinstance(observation, str) else json.dumps(observation)),
               "error": None, "event_id": ids.next(i), "ts": i,
               "source": {"path": str(path), "line": 1, "step": i}}
