"""Faust's entry point (``faust -A streams.app worker -l info``); ``loopwatch`` is :mod:`streams.cli`.

Faust's ``-A`` names a module holding ``app``: Faust looks it up here, which imports Faust only then;
the app itself is :mod:`streams.worker.app` (settings from the ``LOOPWATCH_*`` environment,
:mod:`streams.worker.settings`).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from streams.worker import app as worker_app  # imports Faust: only when Faust asks

    return getattr(worker_app, name)
