"""Loop-detection configuration in OpenClaw's own file shape (docs/detection-rules.md §2).

Users point loopwatch at their existing ``openclaw.json`` (JSON5). Only the
blocks loop detection reads are looked at:

* ``tools.loopDetection`` -- the global block G;
* ``agents.list[].tools.loopDetection`` -- per-agent blocks A, overlaid on G;
* ``options.channelSendTools`` -- loopwatch's own addition (not OpenClaw
  config): tool names that behave like channel-plugin send tools (docs/detection-rules.md §4.3 rule 7);
* ``options.fleet`` -- loopwatch's own too: fleet loops and the opt-in fleet
  breaker (:mod:`streams.detection.fleet`); never part of OpenClaw's blocks;
* ``options.profile`` and ``options.agentProfiles`` -- loopwatch's own: which
  OpenClaw release's behaviour to reproduce, globally and per agent id
  (:mod:`streams.detection.profiles`). Under ``openclaw-2026.9.6`` a block holds
  only ``enabled``; every other key is refused at load time, as that release's
  schema refuses it, and ignored at runtime (docs/detection-rules.md §11.2).

Three steps, as in OpenClaw:

1. :func:`validate` -- the strict load-time schema (docs/detection-rules.md §2.1), raising
   :class:`ConfigError` with OpenClaw's messages (``schema.py``);
2. :func:`merge_blocks` -- the per-agent overlay (docs/detection-rules.md §2.4; ``resolve.py``);
3. :func:`resolve` -- runtime clamps and defaults (docs/detection-rules.md §2.2, §2.3), which never fail
   (``resolve.py``), giving :class:`LoopDetectionSettings` (``settings.py``).

:class:`OpenClawConfig` (``openclaw.py``) looks the settings up per agent and profile;
:func:`load_config` (``load.py``) reads the file; ``js.py`` has how JavaScript reads the
parsed values (doubles, truthiness, key order) that the three steps depend on.

``policies`` (loopwatch's opt-in rules beyond OpenClaw's) is validated here too, by
:mod:`streams.detection.policies.config`.
"""

from __future__ import annotations

from .js import js_double, js_increment, js_truthy
from .load import load_config
from .openclaw import OpenClawConfig
from .resolve import merge_blocks, merge_blocks_2026_9, normalize_agent_id, resolve, resolve_2026_9
from .schema import ConfigError, validate
from .settings import DEFAULTS, VALIDATE_BY_DEFAULT, VALIDATE_DESCRIPTION, LoopDetectionSettings

__all__ = [
    "ConfigError",
    "LoopDetectionSettings",
    "VALIDATE_BY_DEFAULT",
    "VALIDATE_DESCRIPTION",
    "OpenClawConfig",
    "DEFAULTS",
    "js_truthy",
    "load_config",
    "validate",
    "merge_blocks",
    "merge_blocks_2026_9",
    "resolve",
    "resolve_2026_9",
    "normalize_agent_id",
    "js_double",
    "js_increment",
]
