"""What ``loopwatch hook RUNNER`` imports: the command hook starts before every tool call of an agent,
so it runs on the standard library alone (streams/runners/hooks/command.py). These tests run the
executable's entry in a subprocess, answered by a one-shot HTTP server, and list the modules it
imported beyond a bare interpreter's; a change that pulls Faust, aiokafka, click or the importers
into the hook's path fails here, without any timing."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading

import pytest

# the project's modules the hook may import, and nothing else of the project
HOOK_MODULES = {"streams", "streams.cli", "streams.runners", "streams.runners.hooks",
                "streams.runners.hooks.command", "streams.runners.token"}
# standard-library modules that cost a command hook milliseconds and that it has no use for
HEAVY_STDLIB = {"asyncio", "typing", "logging", "ssl", "http.client", "urllib.request", "email", "dataclasses",
                "uuid", "subprocess", "threading", "datetime", "argparse", "encodings.idna", "sqlite3",
                "concurrent.futures", "inspect"}

# Runs `loopwatch hook ...` as the console script does and writes the modules it imported to argv[1] when it
# exits (the hook ends with os._exit, which skips atexit; other exits go through atexit).
_PROBE = """\
import atexit, json, os, sys
out = sys.argv.pop(1)
def dump():
    with open(out, "w") as file:
        file.write(json.dumps(sorted(sys.modules)))
_exit = os._exit
os._exit = lambda status: (dump(), _exit(status))
atexit.register(dump)
from streams.cli import main
main()
"""
_BARE = "import json, sys; print(json.dumps(sorted(sys.modules)))"


def _serve_once(answer: bytes) -> tuple[socket.socket, threading.Thread]:
    """A listening socket that answers one HTTP request with ``answer`` (a JSON body), in a thread."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(60)

    def answer_one() -> None:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(60)
            request = b""
            while b"\r\n\r\n" not in request or not request.endswith(b"}"):
                chunk = conn.recv(65536)
                if not chunk:
                    return
                request += chunk
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n%s" % (len(answer), answer))

    thread = threading.Thread(target=answer_one, daemon=True)
    thread.start()
    return server, thread


def _imported_by_hook(tmp_path, url: str, runner: str) -> tuple[set[str], subprocess.CompletedProcess]:
    out = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", _PROBE, str(out), "hook", runner, "--url", url, "--timeout", "30"],
                          input=b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash"}',
                          capture_output=True, timeout=120)
    bare = set(json.loads(subprocess.run([sys.executable, "-c", _BARE], capture_output=True, check=True,
                                         timeout=120).stdout))
    # the probe's own json/atexit are imported by the bare interpreter's list too
    return set(json.loads(out.read_text())) - bare, done


@pytest.mark.parametrize("runner, answer, status, stdout", [
    ("claude-code", {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                            "permissionDecisionReason": "loop"}}, 0, "permissionDecision"),
    ("codex", {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                      "permissionDecisionReason": "loop"}}, 2, ""),
], ids=["claude-code-deny", "codex-deny"])
def test_the_hook_answers_on_the_standard_library_and_its_own_modules_only(tmp_path, runner, answer, status, stdout):
    server, thread = _serve_once(json.dumps(answer).encode())
    with server:
        extra, done = _imported_by_hook(tmp_path, f"http://127.0.0.1:{server.getsockname()[1]}", runner)
        thread.join(60)
    assert done.returncode == status, done.stderr
    assert stdout in done.stdout.decode()
    assert {name for name in extra if name.split(".")[0] == "streams"} <= HOOK_MODULES
    outside = {name for name in extra if name.split(".")[0] not in sys.stdlib_module_names | {"streams"}}
    assert outside == set()  # no faust, aiokafka, aiohttp, click, msgpack, pydantic, ...
    assert extra & HEAVY_STDLIB == set()


def test_a_hook_failing_open_imports_no_more(tmp_path):
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    extra, done = _imported_by_hook(tmp_path, url, "claude-code")
    assert done.returncode == 0 and b"failing open" in done.stderr
    assert {name for name in extra if name.split(".")[0] == "streams"} <= HOOK_MODULES
    assert extra & HEAVY_STDLIB == set()
    assert "click" not in extra and "streams.importers" not in extra
