"""The hook settings to paste into each runner, as ``loopwatch hook RUNNER --print-config`` prints them.

One place for the events each runner must send (docs/runners/claude-code.md and codex.md show the
same, and the end-to-end tests install these very snippets into the real runners):

* Claude Code: ``PreToolUse`` (the check, and the stop: deny with ``continue: false``),
  ``PostToolUse`` and ``PostToolUseFailure`` (the outcome), ``PostToolBatch`` (the stop after a
  failed call, whose own ``continue: false`` Claude Code ignores), ``UserPromptSubmit`` (runs, when
  the transcript cannot be read) and ``PostCompact`` (arms the post-compaction guard; Claude Code
  sends no ``http`` hook for ``SessionStart``).
* Codex: ``PreToolUse``, ``PostToolUse`` and ``PostCompact``, as ``config.toml`` tables or
  ``hooks.json``.

The command is the absolute path of the ``loopwatch`` executable given (so the runner's ``PATH``
does not matter), and never carries options: URL, token, timeout and on-failure come from the
environment (``LOOPWATCH_GATEWAY_URL``, ``LOOPWATCH_GATEWAY_TOKEN``, ``LOOPWATCH_HOOK_TIMEOUT``,
``LOOPWATCH_HOOK_ON_FAILURE``; the token, unset, from the gateway's token file), so the command Codex
trusted never changes.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

__all__ = ["CLAUDE_CODE_EVENTS", "CODEX_EVENTS", "executable", "claude_code_settings", "codex_hooks_json",
           "codex_config_toml", "HOOK_TIMEOUT_S"]

# event -> matcher (None: the event takes no matcher)
CLAUDE_CODE_EVENTS: dict[str, str | None] = {
    "PreToolUse": "*", "PostToolUse": "*", "PostToolUseFailure": "*", "PostToolBatch": None,
    "UserPromptSubmit": None, "PostCompact": None,
}
CODEX_EVENTS = ("PreToolUse", "PostToolUse", "PostCompact")
HOOK_TIMEOUT_S = 10  # the runner's limit on one hook call; above the hook's own 5 s wait for the gateway


def executable() -> str:
    """The absolute path of the running ``loopwatch`` executable (its console script beside the interpreter
    when this process was not started through it)."""
    here = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if here is not None and here.name == "loopwatch" and here.exists():
        return str(here.resolve())
    return str(Path(sys.executable).parent / "loopwatch")


def _command(runner: str, loopwatch: str) -> str:
    return f"{shlex.quote(loopwatch)} hook {runner}"


def claude_code_settings(loopwatch: str | None = None, http_url: str | None = None) -> dict:
    """Claude Code's ``settings.json`` ``hooks``: command hooks running ``loopwatch``, or with ``http_url``
    (the gateway, e.g. ``http://127.0.0.1:8787``) ``http`` hooks posting to it."""
    if http_url is not None:
        # the gateway asks a bearer token: Claude Code fills it in from its environment
        handler = {"type": "http", "url": http_url.rstrip("/") + "/v1/hooks/claude-code", "timeout": HOOK_TIMEOUT_S,
                   "headers": {"Authorization": "Bearer $LOOPWATCH_GATEWAY_TOKEN"},
                   "allowedEnvVars": ["LOOPWATCH_GATEWAY_TOKEN"]}
    else:
        handler = {"type": "command", "command": _command("claude-code", loopwatch or executable()),
                   "timeout": HOOK_TIMEOUT_S}
    hooks = {}
    for event, matcher in CLAUDE_CODE_EVENTS.items():
        group: dict = {"matcher": matcher} if matcher else {}
        hooks[event] = [{**group, "hooks": [dict(handler)]}]
    return {"hooks": hooks}


def codex_hooks_json(loopwatch: str | None = None) -> dict:
    """Codex's ``hooks.json``."""
    handler = {"type": "command", "command": _command("codex", loopwatch or executable()), "timeout": HOOK_TIMEOUT_S}
    return {"hooks": {event: [{"hooks": [dict(handler)]}] for event in CODEX_EVENTS}}


def codex_config_toml(loopwatch: str | None = None) -> str:
    """The same hooks as ``config.toml`` tables (to append to ``$CODEX_HOME/config.toml``)."""
    command = json.dumps(_command("codex", loopwatch or executable()))  # a JSON string is a TOML basic string
    return "".join(f"[[hooks.{event}]]\n[[hooks.{event}.hooks]]\ntype = \"command\"\ncommand = {command}\n"
                   f"timeout = {HOOK_TIMEOUT_S}\n\n" for event in CODEX_EVENTS)
