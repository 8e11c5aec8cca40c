"""The Faust entry point: ``faust -A streams.app worker -l info``.

Faust looks up ``app`` here; the app itself is :mod:`streams.worker.app` (settings from the
``LOOPWATCH_*`` environment, :mod:`streams.worker.settings`).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from streams.worker import app as worker_app  # imports Faust: only when Faust asks

    return getattr(worker_app, name)
