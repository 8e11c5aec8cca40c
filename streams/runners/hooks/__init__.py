"""Runner hooks: a runner's hook JSON in, loopwatch events out, the verdict back in the runner's words.

One module per runner (:mod:`.claude_code`, :mod:`.codex`), each with a mapper class whose
``event(payload)`` gives the loopwatch event a hook call stands for (or None when it stands for
none: a prompt, a session start, ...) and whose ``answer(payload, decision)`` turns the gateway's
decision into the runner's hook output. The gateway (:mod:`streams.runners.gateway`) serves them
at ``POST /v1/hooks/<runner>``; ``loopwatch hook <runner>`` is the command-hook form, which asks
the gateway over HTTP.

Sessions, runs and tool-use ids are mapped as the importers of the same runner's recordings map
them (:mod:`streams.importers.claude_code`, :mod:`streams.importers.codex`, whose helpers are used
here), so a backtest of a recording with ``loopwatch replay --format`` predicts the live verdicts.
"""

from __future__ import annotations

TYPE_CHECKING = False  # type checkers take it as True; not importing typing saves the hook a few ms
if TYPE_CHECKING:
    from .base import HookInputError, RunTracker, tool_outcome

__all__ = ["HookInputError", "RunTracker", "tool_outcome", "mapper"]

# Imported on first use, not with the package: ``loopwatch hook`` (:mod:`.command`, standard library only)
# lives in this package, and importing :mod:`.base` pulls in the importers it must start without.
_FROM_BASE = frozenset({"HookInputError", "RunTracker", "tool_outcome"})


def __getattr__(name: str):
    if name in _FROM_BASE:
        from . import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def mapper(runner: str, runs: RunTracker | None = None):
    """The hook mapper of ``runner`` (``claude-code`` or ``codex``). Raises ValueError for another name."""
    if runner == "claude-code":
        from .claude_code import ClaudeCodeHooks
        return ClaudeCodeHooks(runs)
    if runner == "codex":
        from .codex import CodexHooks
        return CodexHooks(runs)
    raise ValueError(f"unknown runner {runner!r}; expected claude-code or codex")
