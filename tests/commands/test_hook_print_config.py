"""``loopwatch hook RUNNER --print-config``: the settings to paste, with the installed command's absolute path
and no options on the command (so Codex's trusted command never changes), through the real executable."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

LOOPWATCH = Path(sys.executable).parent / "loopwatch"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LOOPWATCH), "hook", *args], capture_output=True, text=True, timeout=60)


def test_codex_config_toml_and_hooks_json_run_the_installed_loopwatch():
    command = f"{LOOPWATCH.resolve()} hook codex"
    toml = tomllib.loads(_run("codex", "--print-config").stdout)
    assert sorted(toml["hooks"]) == ["PostCompact", "PostToolUse", "PreToolUse"]
    assert {h["hooks"][0]["command"] for groups in toml["hooks"].values() for h in groups} == {command}
    hooks = json.loads(_run("codex", "--print-config", "--format", "json").stdout)["hooks"]
    assert hooks["PreToolUse"] == [{"hooks": [{"type": "command", "command": command, "timeout": 10}]}]


def test_claude_code_settings_hold_the_hooks_that_stop_and_arm_the_guard():
    hooks = json.loads(_run("claude-code", "--print-config").stdout)["hooks"]
    assert sorted(hooks) == sorted(["PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch",
                                    "UserPromptSubmit", "PostCompact"])  # no SessionStart: never sent over http
    assert hooks["PreToolUse"][0]["matcher"] == "*" and "matcher" not in hooks["PostToolBatch"][0]
    http = json.loads(_run("claude-code", "--print-config", "--http", "http://127.0.0.1:8787").stdout)["hooks"]
    handler = http["PostCompact"][0]["hooks"][0]
    assert handler == {"type": "http", "url": "http://127.0.0.1:8787/v1/hooks/claude-code", "timeout": 10,
                       "headers": {"Authorization": "Bearer $LOOPWATCH_GATEWAY_TOKEN"},
                       "allowedEnvVars": ["LOOPWATCH_GATEWAY_TOKEN"]}


def test_options_that_do_not_fit_the_runner_are_usage_errors_that_do_not_block():
    for args in (("claude-code", "--print-config", "--format", "toml"), ("codex", "--print-config", "--http", "x"),
                 ("codex", "--format", "json")):
        done = _run(*args)
        assert done.returncode == 1 and done.stdout == "", args  # 1, not 2: a runner reads 2 as "block"


def test_options_given_with_print_config_are_named_on_stderr_with_the_variable_to_set():
    """The printed command carries no options, so a fail-closed choice made on the command line would be lost
    without a word: the hook says which variable carries it instead."""
    result = _run("claude-code", "--print-config", "--on-failure", "block", "--url", "http://127.0.0.1:8797")
    assert result.returncode == 0
    assert f"{LOOPWATCH.resolve()} hook claude-code" in result.stdout and "block" not in result.stdout
    assert "set LOOPWATCH_HOOK_ON_FAILURE=block in the runner's environment" in result.stderr
    assert "set LOOPWATCH_GATEWAY_URL=http://127.0.0.1:8797 in the runner's environment" in result.stderr
    assert _run("codex", "--print-config").stderr == ""  # nothing given, nothing said
