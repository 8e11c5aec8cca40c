"""The demo's worker: ``loopwatch worker`` as a subprocess in its own process group, logging to a
file, ready once Faust says so, and stopped with the demo (even a demo killed outright, on Linux).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from .common import say

__all__ = ["DemoWorker", "READY_LINE"]

READY_LINE = "[^Worker]: Ready"  # Faust logs it once the worker has its partitions


def die_with_parent() -> None:
    """In the worker's child process: ask Linux to send it SIGTERM when the demo dies.

    The demo stops its worker on exit, but a demo killed outright (SIGKILL, a crash) runs no
    cleanup; the worker lives in its own session, so without this it would keep running alone.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class DemoWorker:
    """``loopwatch worker`` as a subprocess in its own process group, logging to a file."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "from streams.cli import main; main()", "worker"],
                cwd=log_path.parent, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **env, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def log_text(self) -> str:
        try:
            return self.log_path.read_text("utf-8", "replace")
        except OSError:
            return ""

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while READY_LINE not in self.log_text():
            if self.proc.poll() is not None:
                raise click.ClickException(f"the worker exited with status {self.proc.returncode}; "
                                           f"last lines of {self.log_path}:\n{self._tail()}")
            if time.monotonic() > deadline:
                raise click.ClickException(f"the worker was not ready within {timeout:g} s; "
                                           f"last lines of {self.log_path}:\n{self._tail()}")
            time.sleep(0.2)

    def _tail(self, lines: int = 25) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            say(f"worker still running after {timeout:g} s: SIGKILL")
            self.proc.kill()
            self.proc.wait(10)
