"""Behaviour profiles: which OpenClaw release's loop detection a verdict reproduces.

* :data:`OPENCLAW_2026_7` (the default) -- the configurable 2026.7 line
  (docs/detection-rules.md §1-§10): every threshold, ``historySize``, detector flag and
  guard window of ``tools.loopDetection`` works as the user set it.
* :data:`OPENCLAW_2026_9_6` -- the 2026.9.6 release (docs/detection-rules.md §11):
  fixed thresholds 10/20/30, history 30, guard window 3, only ``enabled`` is
  read; vetoes are recorded, a critical loop gets one recovery chance, warnings
  reach the model as a note, and the rest of that section.

A profile is chosen, first match wins, by the event's ``profile`` field (a runner
that knows its host's OpenClaw version sets it), the agent's entry in the config's
``options.agentProfiles``, the config's ``options.profile``, else the default
(:func:`~streams.detection.config.OpenClawConfig.profile_for`; docs/configuration.md).
Both profiles run in one :class:`~streams.detection.engine.Engine`: each rule that
2026.9.6 changes branches on :attr:`LoopDetectionSettings.is_2026_9
<streams.detection.config.LoopDetectionSettings.is_2026_9>` beside the 2026.7 rule.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OPENCLAW_2026_7", "OPENCLAW_2026_9_6", "PROFILES", "DEFAULT_PROFILE", "check_profile"]

OPENCLAW_2026_7 = "openclaw-2026.7"
OPENCLAW_2026_9_6 = "openclaw-2026.9.6"
PROFILES = (OPENCLAW_2026_7, OPENCLAW_2026_9_6)
DEFAULT_PROFILE = OPENCLAW_2026_7


def check_profile(value: Any) -> str | None:
    """Why ``value`` is not a profile name (None: it is one), for config and event validation."""
    if value in PROFILES and type(value) is str:
        return None
    return f"expected one of {', '.join(repr(name) for name in PROFILES)}, got {value!r}"
