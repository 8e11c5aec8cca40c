"""``loopwatch hook claude-code|codex`` under click: ``--help``, and any arguments the fast path
(:func:`streams.runners.hooks.command.fast_main`, which the ``loopwatch`` executable runs without
importing click) does not take. Behaviour: :mod:`streams.runners.hooks.command`."""

from __future__ import annotations

import json
import sys

import click

from streams.runners.hooks import snippets
from streams.runners.hooks.command import DEFAULT_TIMEOUT_S, DEFAULT_URL, RUNNERS, URL_ENV, runner_exit, run
from streams.runners.token import read_token

__all__ = ["hook", "runner_exit"]


@click.command("hook", epilog="""\b
Examples (settings to paste: docs/runners/claude-code.md, docs/runners/codex.md):
  echo '{"hook_event_name":"PreToolUse",...}' | loopwatch hook claude-code
  LOOPWATCH_HOOK_ON_FAILURE=block loopwatch hook codex   # fail-closed: no verdict, no tool call
  loopwatch hook codex --print-config >> ~/.codex/config.toml
  loopwatch hook claude-code --print-config --http http://127.0.0.1:8787
""")
@click.argument("runner", type=click.Choice(RUNNERS))
@click.option("--url", default=DEFAULT_URL, show_default=True, envvar=URL_ENV, show_envvar=True,
              help="The loopwatch gateway.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_TIMEOUT_S, show_default=True,
              envvar="LOOPWATCH_HOOK_TIMEOUT", show_envvar=True,
              help="Seconds to wait for the gateway (keep it above the gateway's own --timeout).")
@click.option("--on-failure", type=click.Choice(["allow", "block"]), default="allow", show_default=True,
              envvar="LOOPWATCH_HOOK_ON_FAILURE", show_envvar=True,
              help="When no verdict can be had from the gateway: allow (fail-open) or block (fail-closed).")
@click.option("--print-config", is_flag=True,
              help="Print the hook settings for RUNNER (with this loopwatch's absolute path) and exit: Claude "
                   "Code's settings.json hooks, Codex's config.toml tables (--format json: hooks.json).")
@click.option("--format", "fmt", type=click.Choice(["toml", "json"]), default=None,
              help="With --print-config for codex: config.toml tables (default) or hooks.json.")
@click.option("--http", "http_url", metavar="GATEWAY_URL", default=None,
              help="With --print-config for claude-code: http hooks posting to this gateway instead of commands.")
def hook(runner: str, url: str, timeout: float, on_failure: str, print_config: bool, fmt: str | None,
         http_url: str | None) -> None:
    """Answer one RUNNER hook call (JSON on stdin) with the gateway's verdict.

    Exit status 0 lets the tool run (Claude Code reads the JSON printed on
    stdout, e.g. a deny); 2 blocks it, with the reason on stderr (Codex's
    blocks, and failing closed). The gateway's bearer token comes from
    LOOPWATCH_GATEWAY_TOKEN, else the gateway's token file
    (LOOPWATCH_GATEWAY_TOKEN_FILE, else ~/.config/loopwatch/gateway-token).
    """
    if print_config:
        _warn_options_left_out(click.get_current_context())
        click.echo(_snippet(runner, fmt, http_url), nl=False)
        return
    if fmt or http_url:
        raise click.UsageError("--format and --http go with --print-config")
    status, out, err = run(runner, url, timeout, on_failure, sys.stdin.buffer.read(), read_token())
    if out:
        sys.stdout.write(out)
    if err:
        sys.stderr.write(err)
    sys.stdout.flush()
    sys.exit(status)


# option -> the environment variable the printed command reads it from instead
_ENV_OF = {"url": URL_ENV, "timeout": "LOOPWATCH_HOOK_TIMEOUT", "on_failure": "LOOPWATCH_HOOK_ON_FAILURE"}


def _warn_options_left_out(ctx: click.Context) -> None:
    """Say on stderr which options given with --print-config the printed command leaves out, and the
    variable to set instead: the command never carries options (a changed command loses Codex's trust)."""
    for name, env in _ENV_OF.items():
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
            option = "--" + name.replace("_", "-")
            click.echo(f"loopwatch hook: {option} is not written into the printed command (the command never "
                       f"changes, so the runner's trust in it holds); set {env}={ctx.params[name]} in the "
                       "runner's environment instead", err=True)


def _snippet(runner: str, fmt: str | None, http_url: str | None) -> str:
    if runner == "claude-code":
        if fmt == "toml":
            raise click.UsageError("Claude Code's settings are JSON: leave out --format toml")
        return json.dumps(snippets.claude_code_settings(http_url=http_url), indent=2) + "\n"
    if http_url:
        raise click.UsageError("Codex runs command hooks only: leave out --http")
    if fmt == "json":
        return json.dumps(snippets.codex_hooks_json(), indent=2) + "\n"
    return snippets.codex_config_toml()
