"""``loopwatch hook claude-code|codex`` under click: ``--help``, and any arguments the fast path
(:func:`streams.runners.hooks.command.fast_main`, which the ``loopwatch`` executable runs without
importing click) does not take. Behaviour: :mod:`streams.runners.hooks.command`."""

from __future__ import annotations

import sys

import click

from streams.runners.hooks.command import DEFAULT_TIMEOUT_S, DEFAULT_URL, RUNNERS, URL_ENV, runner_exit, run
from streams.runners.token import read_token

__all__ = ["hook", "runner_exit"]


@click.command("hook", epilog="""\b
Examples (settings to paste: docs/runners/claude-code.md, docs/runners/codex.md):
  echo '{"hook_event_name":"PreToolUse",...}' | loopwatch hook claude-code
  loopwatch hook codex --on-failure block      # fail-closed: no verdict, no tool call
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
def hook(runner: str, url: str, timeout: float, on_failure: str) -> None:
    """Answer one RUNNER hook call (JSON on stdin) with the gateway's verdict.

    Exit status 0 lets the tool run (Claude Code reads the JSON printed on
    stdout, e.g. a deny); 2 blocks it, with the reason on stderr (Codex's
    blocks, and failing closed). The gateway's bearer token comes from
    LOOPWATCH_GATEWAY_TOKEN, else the gateway's token file
    (LOOPWATCH_GATEWAY_TOKEN_FILE, else ~/.config/loopwatch/gateway-token).
    """
    status, out, err = run(runner, url, timeout, on_failure, sys.stdin.buffer.read(), read_token())
    if out:
        sys.stdout.write(out)
    if err:
        sys.stderr.write(err)
    sys.stdout.flush()
    sys.exit(status)
