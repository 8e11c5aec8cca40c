"""The command hook itself, on the standard library only: hook JSON in, the gateway asked, the runner's answer out.

``loopwatch hook claude-code|codex`` runs before (and after) every tool call, so it must start fast:
the ``loopwatch`` executable (:mod:`streams.cli`) hands ``loopwatch hook RUNNER [options]`` to
:func:`fast_main` without importing click, Faust, aiokafka or aiohttp (the mapping from hook JSON to
events runs in the gateway, ``POST /v1/hooks/<runner>``); :mod:`streams.commands.hook` is the same
command under click, for ``--help`` and anything :func:`fast_main` does not take. bench/gateway.py
measures the start-up to answer.

What it prints and how it exits:

* The gateway's answer is the runner's hook output. Claude Code: printed as JSON on stdout (exit
  0), nothing when it is ``{}``. Codex: a deny becomes exit status 2 with the reason on stderr (the
  blocking status Codex documents); other output is printed as JSON (exit 0).
* No answer (gateway unreachable, timeout, a non-2xx answer or one that is not a JSON object):
  with ``--on-failure allow`` (fail-open, the default) exit 0 with the reason as ``systemMessage`` on
  stdout (what Codex 0.171 shows of a hook: its TUI prints ``Hook · <message>``; it shows no hook's
  stderr) and on stderr (Claude Code's transcript), so the tool runs; with ``--on-failure block`` (fail-closed) exit 2 with the reason on stderr (Codex:
  every event; Claude Code: ``PreToolUse``), or for Claude Code's other events
  ``{"continue": false, "stopReason": ...}``, which stops the session.

The gateway's bearer token is sent with every call: ``LOOPWATCH_GATEWAY_TOKEN``, else the token
file the gateway made (:mod:`streams.runners.token`), so a hook on the gateway's machine needs no
setting.
"""

from __future__ import annotations

import json
import os
import socket
import sys

from streams.runners.token import read_token

TYPE_CHECKING = False  # type checkers take it as True; the hook does not import typing (a few ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ask_gateway", "GatewayUnavailable", "runner_exit", "run", "fast_main", "RUNNERS", "DEFAULT_URL"]

URL_ENV = "LOOPWATCH_GATEWAY_URL"
TIMEOUT_HEADER = "X-Loopwatch-Timeout"  # the hook's own timeout, seconds: the gateway gives up before it
DEFAULT_URL = "http://127.0.0.1:8787"
DEFAULT_TIMEOUT_S = 5.0
RUNNERS = ("claude-code", "codex")


class GatewayUnavailable(Exception):
    """No usable answer from the gateway; ``str()`` says why."""


def _post(url: str, path: str, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
    """POST ``body`` to ``url`` + ``path``: ``(status, answer body)``. Plain ``http://`` goes over a socket of
    its own (urllib alone costs more start-up than the rest of the hook); ``https://`` through urllib.

    Raises:
        OSError: unreachable, timed out, or not an HTTP answer.
    """
    if url.startswith("https://"):
        import urllib.error
        import urllib.request

        request = urllib.request.Request(url.rstrip("/") + path, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
    if not url.startswith("http://"):
        raise OSError(f"not an http:// or https:// URL: {url}")
    hostport, _, prefix = url[len("http://"):].partition("/")
    host, _, port = hostport.rpartition(":") if hostport.rpartition(":")[2].isdigit() else (hostport, "", "80")
    target = "/" + prefix.strip("/") + path if prefix.strip("/") else path
    head = [f"POST {target} HTTP/1.1", f"Host: {hostport}", f"Content-Length: {len(body)}", "Connection: close",
            *(f"{k}: {v}" for k, v in headers.items())]
    host = host.strip("[]")
    # an ASCII name as bytes: getaddrinfo encodes a str with the idna codec, whose import costs the hook ~1 ms
    with socket.create_connection((host.encode("ascii") if host.isascii() else host, int(port)),
                                  timeout=timeout) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    raw = b"".join(chunks)
    header, sep, answer = raw.partition(b"\r\n\r\n")
    status_line = header.split(b"\r\n", 1)[0].split()
    if not sep or len(status_line) < 2 or not status_line[1].isdigit():
        raise OSError("not an HTTP answer")
    if b"transfer-encoding: chunked" in header.lower():
        answer = _unchunk(answer)
    return int(status_line[1]), answer


def _unchunk(data: bytes) -> bytes:
    out, rest = [], data
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2:]
    return b"".join(out)


def ask_gateway(url: str, runner: str, body: bytes, timeout: float, token: str | None) -> dict[str, Any]:
    """POST ``body`` (the hook JSON) to ``<url>/v1/hooks/<runner>``; the answer object.

    The request says the hook's ``timeout`` (header ``X-Loopwatch-Timeout``), so that the gateway stops
    waiting for the verdict before the hook does: the gateway then knows the call runs without a
    verdict and marks its result (docs/events-and-verdicts.md, "Late calls").

    Raises:
        GatewayUnavailable: unreachable, timed out, a non-2xx status (its ``error`` quoted) or an
            answer that is not a JSON object.
    """
    headers = {"Content-Type": "application/json", TIMEOUT_HEADER: f"{timeout:g}"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        status, raw = _post(url, f"/v1/hooks/{runner}", body, headers, timeout)
    except (OSError, ValueError) as exc:
        raise GatewayUnavailable(f"gateway at {url} unreachable ({exc})") from None
    if not 200 <= status < 300:
        try:
            reason = json.loads(raw).get("error")
        except (ValueError, AttributeError):
            reason = None
        raise GatewayUnavailable(f"gateway answered {status}" + (f": {reason}" if reason else ""))
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
            note = f"loopwatch: {failure}; failing open (on-failure allow): the tool runs without a loop check"
            # stderr for Claude Code's transcript; systemMessage is what Codex shows ("Hook · ...") and
            # Claude Code shows the user; exit 0 so that neither counts the hook as failed
            return 0, json.dumps({"systemMessage": note}) + "\n", note + "\n"
        reason = f"loopwatch: {failure}; failing closed (on-failure block)"
        if runner == "claude-code" and event_name != "PreToolUse":
            return 0, json.dumps({"continue": False, "stopReason": reason}) + "\n", ""
        return 2, "", reason + "\n"
    assert output is not None
    deny = _deny_reason(output) if runner == "codex" else None
    if deny is not None:
        return 2, "", deny + "\n"
    return 0, (json.dumps(output) + "\n") if output else "", ""


def run(runner: str, url: str, timeout: float, on_failure: str, body: bytes, token: str | None) -> tuple[int, str, str]:
    """Answer one hook call: ``(exit status, stdout, stderr)`` for hook JSON ``body``."""
    try:
        event_name = json.loads(body).get("hook_event_name")
    except (ValueError, AttributeError):
        event_name = None
    output, failure = None, None
    try:
        output = ask_gateway(url, runner, body, timeout, token)
    except GatewayUnavailable as exc:
        failure = str(exc)
    return runner_exit(runner, event_name, output, failure, on_failure)


def _options(args: list[str]) -> dict[str, Any] | None:
    """``RUNNER [--url U] [--timeout S] [--on-failure allow|block]`` (also ``--opt=value``) with the
    environment's defaults; None for anything else (``--help``, a typo), which click then handles."""
    if not args or args[0] not in RUNNERS:
        return None
    options: dict[str, Any] = {"runner": args[0], "url": os.environ.get(URL_ENV) or DEFAULT_URL,
                               "timeout": os.environ.get("LOOPWATCH_HOOK_TIMEOUT") or DEFAULT_TIMEOUT_S,
                               "on_failure": os.environ.get("LOOPWATCH_HOOK_ON_FAILURE") or "allow"}
    rest = []
    for arg in args[1:]:
        rest.extend(arg.split("=", 1) if arg.startswith("--") and "=" in arg else [arg])
    names = {"--url": "url", "--timeout": "timeout", "--on-failure": "on_failure"}
    if len(rest) % 2:
        return None
    for flag, value in zip(rest[::2], rest[1::2]):
        if flag not in names:
            return None
        options[names[flag]] = value
    try:
        options["timeout"] = float(options["timeout"])
    except ValueError:
        return None
    if not options["timeout"] > 0 or options["on_failure"] not in ("allow", "block"):
        return None
    return options


def fast_main(args: list[str]) -> int | None:
    """Run ``loopwatch hook`` with ``args`` (after ``hook``) and return its exit status; None when the
    arguments are not plain options (the caller hands them to click, which explains)."""
    options = _options(args)
    if options is None:
        return None
    try:
        status, out, err = run(options["runner"], options["url"], options["timeout"], options["on_failure"],
                               sys.stdin.buffer.read(), read_token())
    except KeyboardInterrupt:  # the runner or the user stopped us: a line, not a traceback
        sys.stderr.write("loopwatch hook: interrupted before a verdict\n")
        return 130  # 128 + SIGINT; not 2, which the runners read as "block"
    if out:
        sys.stdout.write(out)
        sys.stdout.flush()
    if err:
        sys.stderr.write(err)
    return status
