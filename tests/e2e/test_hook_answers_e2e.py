"""What the real runner CLIs do with each hook answer (``make e2e``; marker ``e2e``; no broker, no loopwatch).

The scripted model asks for the same failing command 6 times; a scripted command hook
(:mod:`tests.e2e.scripted_hook`, installed where loopwatch's hook goes, for the same events) gives one
answer from the 3rd call of one event on and no opinion otherwise. Each case checks how many commands
ran, how many times the model asked for a tool, whether the model read the hook's reason, and whether
the runner stopped. docs/runners/claude-code.md and codex.md ("What stops a run") give the same table;
loopwatch's hooks rely on the rows marked there (deny, deny with ``continue: false``, exit status 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.e2e.harness import ModelServer, run_claude_code, run_codex, runner_bin
from tests.e2e.scripted_hook import REASON

pytestmark = [pytest.mark.e2e]

CALLS = 6

# (event:answer) -> (commands run, tool calls the model asked for, the model read the reason, the runner stopped)
CLAUDE_CODE = {
    "PreToolUse:deny": (2, 6, True, False),
    "PreToolUse:exit2": (2, 6, True, False),
    "PreToolUse:decision": (2, 6, True, False),
    "PreToolUse:deny+continue": (2, 3, False, True),
    "PreToolUse:continue": (3, 3, False, True),  # no deny: the call runs, then the session stops
    "PreToolUse:exit1": (6, 6, False, False),
    "PostToolUseFailure:continue": (6, 6, False, False),  # ignored
    "PostToolUseFailure:exit2": (6, 6, True, False),
    "PostToolBatch:continue": (3, 3, False, True),
    "PostToolBatch:exit2": (3, 3, False, True),
}
CODEX = {
    "PreToolUse:deny": (2, 6, True, False),
    "PreToolUse:exit2": (2, 6, True, False),
    "PreToolUse:decision": (2, 6, True, False),
    "PreToolUse:continue": (6, 6, False, False),  # the hook counts as failed: the call runs
    "PreToolUse:garbage": (6, 6, False, False),
    "PostToolUse:continue": (6, 6, True, False),
    "PostToolUse:exit2": (6, 6, True, False),
}


def _hook(tmp_path: Path) -> str:
    """The scripted hook as an executable the runner's hook command can name (its arguments are ignored)."""
    script = tmp_path / "scripted-hook"
    source = Path(__file__).with_name("scripted_hook.py").read_text()
    script.write_text(f"#!{sys.executable}\n{source}")
    script.chmod(0o755)
    return str(script)


def _run(runner: str, case: str, tmp_path: Path) -> tuple[int, int, bool, bool]:
    binary = runner_bin(runner)
    if binary is None:
        pytest.skip(f"{runner} of the pinned version is not installed: run `make e2e` (installs it)")
    counter = tmp_path / "project" / "ran.txt"
    log = tmp_path / "model.jsonl"
    env = {"SCRIPTED_HOOK_LOG": str(tmp_path / "hooks.jsonl"), "SCRIPTED_HOOK_ANSWER": case}
    with ModelServer(f"echo ran >> {counter.name}; ls /nonexistent-loop-target", CALLS, log) as model:
        run = (run_codex if runner == "codex" else run_claude_code)(binary, tmp_path, model.url, env,
                                                                      loopwatch=_hook(tmp_path))
    assert run.status == 0, run.stderr
    ran = len(counter.read_text().splitlines()) if counter.exists() else 0
    read = REASON in log.read_text().splitlines()[-1]
    session = run.session_file.read_text() if run.session_file else ""
    stopped = "hook_stopped_continuation" in session if runner == "claude" else model.model.calls < CALLS
    return ran, model.model.calls, read, stopped


@pytest.mark.parametrize("case", list(CLAUDE_CODE))
def test_claude_code_hook_answers(case, tmp_path):
    assert _run("claude", case, tmp_path) == CLAUDE_CODE[case]


@pytest.mark.parametrize("case", list(CODEX))
def test_codex_hook_answers(case, tmp_path):
    assert _run("codex", case, tmp_path) == CODEX[case]
