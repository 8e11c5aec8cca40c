"""``loopwatch gateway``: an HTTP front for runners that cannot hold a Kafka client.

:func:`create_app` builds the aiohttp application around one shared
:class:`~streams.runners.client.LoopwatchClient`; :func:`serve` runs it until cancelled;
:mod:`.processes` runs several processes on one port, each session answered by one (:mod:`.peers`).
The API is in :mod:`.app` and docs/runners/gateway.md.
"""

from .app import DEFAULT_MAX_BODY_BYTES, GatewayConfig, create_app
from .serve import LOOPS, run, serve

__all__ = ["GatewayConfig", "create_app", "serve", "run", "LOOPS", "DEFAULT_MAX_BODY_BYTES"]
