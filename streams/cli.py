"""The ``loopwatch`` executable (console script); ``faust -A streams.app`` is the other way in.

``loopwatch hook RUNNER [options]`` runs before every tool call of an agent, so it is answered
without importing click (:func:`streams.runners.hooks.command.fast_main`); everything else, and a
``hook`` call the fast path does not take (``--help``, a bad option), goes to the click command line
(:mod:`streams.commands`); a usage error of ``hook`` exits 1 there, not 2, which the runners read as
"block".
"""

from __future__ import annotations

import os
import sys

__all__ = ["main"]


def main() -> None:
    """Entry point of the ``loopwatch`` console script."""
    from_hook = sys.argv[1:2] == ["hook"]
    if from_hook:
        from streams.runners.hooks.command import fast_main

        status = fast_main(sys.argv[2:])
        if status is not None:
            _exit_at_once(status)
    from streams.commands import loopwatch as cli

    try:
        cli()
    except SystemExit as exc:
        # For a runner, exit status 2 blocks the tool call: a mistyped hook command would block every
        # call of every agent. A usage error of `loopwatch hook` exits 1 (a non-blocking hook failure).
        if from_hook and exc.code == 2:
            sys.exit(1)
        raise


def _exit_at_once(status: int) -> None:
    """Exit with ``status`` once stdout and stderr are flushed, without the interpreter's teardown (freeing
    every module and object: a few ms of a command hook's start-up to answer, which the runner waits for).
    A flush that fails (the runner closed the pipe) exits through ``sys.exit``, which reports it as before."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        sys.exit(status)
    os._exit(status)
