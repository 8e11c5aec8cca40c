"""``loopwatch hook claude-code|codex``: a command hook that asks the gateway.

The runner starts this command before (and after) every tool call, so it must start fast: it
imports the standard library and click only (no Faust, no aiokafka, no aiohttp; the mapping from
hook JSON to events runs in the gateway, ``POST /v1/hooks/<runner>``). bench/gateway.py measures
its start-up to answer.

What it prints and how it exits:

* The gateway's answer is the runner's hook output. Claude Code: printed as JSON on stdout (exit
  0), nothing when it is ``{}``. Codex: a deny becomes exit status 2 with the reason on stderr (the
  blocking status Codex documents); other output is printed as JSON (exit 0).
* No answer (gateway unreachable, timeout, a non-2xx answer or one that is not a JSON object):
  with ``--on-failure allow`` (fail-open, the default) exit 0 and a one-line note on stderr, so the
  tool runs; with ``--on-failure block`` (fail-closed) exit 2 with the reason on stderr (Codex:
  every event; Claude Code: ``PreToolUse``), or for Claude Code's other events
  ``{"continue": false, "stopReason": ...}``, which stops the session.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

import click

__all__ = ["hook", "ask_gateway", "GatewayUnavailable", "runner_exit"]

URL_ENV = "LOOPWATCH_GATEWAY_URL"
TOKEN_ENV = "LOOPWATCH_GATEWAY_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8787"


class GatewayUnavailable(Exception):
    """No usable answer from the gateway; ``str()`` says why."""


def ask_gateway(url: str, runner: str, body: bytes, timeout: float, token: str | None) -> dict[str, Any]:
    """POST ``body`` (the hook JSON) to ``<url>/v1/hooks/<runner>``; the answer object.

    Raises:
        GatewayUnavailable: unreachable, timed out, a non-2xx status (its ``error`` quoted) or an
            answer that is not a JSON object.
    """
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"{url.rstrip('/')}/v1/hooks/{runner}", data=body, headers=headers,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        try:
            reason = json.loads(exc.read()).get("error")
        except (ValueError, AttributeError, OSError):
            reason = None
        raise GatewayUnavailable(f"gateway answered {exc.code}" + (f": {reason}" if reason else "")) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise GatewayUnavailable(f"gateway at {url} unreachable ({reason})") from None
    try:
        answer = json.loads(raw or b"{}")
    except ValueError:
        raise GatewayUnavailable("gateway answer is not JSON") from None
    if not isinstance(answer, dict):
        raise GatewayUnavailable("gateway answer is not a JSON object")
    return answer


def _deny_reason(output: dict[str, Any]) -> str | None:
    specific = output.get("hookSpecificOutput")
    if isinstance(specific, dict) and specific.get("permissionDecision") == "deny":
        return str(specific.get("permissionDecisionReason") or "blocked by loopwatch")
    return None


def runner_exit(runner: str, event_name: Any, output: dict[str, Any] | None, failure: str | None,
                on_failure: str) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` for the runner, given the gateway's ``output`` or the ``failure``."""
    if failure is not None:
        if on_failure == "allow":
            return 0, "", f"loopwatch: {failure}; failing open (--on-failure allow): the tool runs\n"
        reason = f"loopwatch: {failure}; failing closed (--on-failure block)"
        if runner == "claude-code" and event_name != "PreToolUse":
            return 0, json.dumps({"continue": False, "stopReason": reason}) + "\n", ""
        return 2, "", reason + "\n"
    assert output is not None
    deny = _deny_reason(output) if runner == "codex" else None
    if deny is not None:
        return 2, "", deny + "\n"
    return 0, (json.dumps(output) + "\n") if output else "", ""


@click.command("hook", epilog="""\b
Examples (settings to paste: docs/runners/claude-code.md, docs/runners/codex.md):
  echo '{"hook_event_name":"PreToolUse",...}' | loopwatch hook claude-code
  loopwatch hook codex --on-failure block      # fail-closed: no verdict, no tool call
""")
@click.argument("runner", type=click.Choice(["claude-code", "codex"]))
@click.option("--url", default=DEFAULT_URL, show_default=True, envvar=URL_ENV, show_envvar=True,
              help="The loopwatch gateway.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=5.0, show_default=True,
              envvar="LOOPWATCH_HOOK_TIMEOUT", show_envvar=True,
              help="Seconds to wait for the gateway (keep it above the gateway's own --timeout).")
@click.option("--on-failure", type=click.Choice(["allow", "block"]), default="allow", show_default=True,
              envvar="LOOPWATCH_HOOK_ON_FAILURE", show_envvar=True,
              help="When no verdict can be had from the gateway: allow (fail-open) or block (fail-closed).")
def hook(runner: str, url: str, timeout: float, on_failure: str) -> None:
    """Answer one RUNNER hook call (JSON on stdin) with the gateway's verdict.

    Exit status 0 lets the tool run (Claude Code reads the JSON printed on
    stdout, e.g. a deny); 2 blocks it, with the reason on stderr (Codex's
    blocks, and failing closed). The bearer token, if the gateway asks one,
    comes from LOOPWATCH_GATEWAY_TOKEN.
    """
    body = sys.stdin.buffer.read()
    try:
        event_name = json.loads(body).get("hook_event_name")
    except (ValueError, AttributeError):
        event_name = None
    output, failure = None, None
    try:
        output = ask_gateway(url, runner, body, timeout, os.environ.get(TOKEN_ENV) or None)
    except GatewayUnavailable as exc:
        failure = str(exc)
    status, out, err = runner_exit(runner, event_name, output, failure, on_failure)
    if out:
        sys.stdout.write(out)
    if err:
        sys.stderr.write(err)
    sys.stdout.flush()
    sys.exit(status)
