"""The ``loopwatch`` executable.

``loopwatch hook RUNNER [options]`` runs before every tool call of an agent, so it is answered
without importing click (:func:`streams.runners.hooks.command.fast_main`); everything else, and a
``hook`` call the fast path does not take (``--help``, a bad option), goes to the click command line
(:mod:`streams.cli`).
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Entry point of the ``loopwatch`` console script."""
    if sys.argv[1:2] == ["hook"]:
        from streams.runners.hooks.command import fast_main

        status = fast_main(sys.argv[2:])
        if status is not None:
            sys.exit(status)
    from streams.cli import main as cli

    cli()
