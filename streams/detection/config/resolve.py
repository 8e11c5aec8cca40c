"""From the blocks of a config to one agent's settings, as OpenClaw does at runtime (never failing):
the per-agent overlay (docs/detection-rules.md §2.4; 2026.9.6: §11.2.4), then clamps and defaults
(§2.2, §2.3; 2026.9.6: §11.2.2); with them OpenClaw's agent-id normalisation and which profile
``options.profile`` / ``options.agentProfiles`` give an agent.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ..fingerprint import js_trim
from ..profiles import DEFAULT_PROFILE, OPENCLAW_2026_9_6, check_profile
from .js import js_double, js_increment, js_truthy
from .settings import (DEFAULT_CRITICAL_THRESHOLD, DEFAULT_GLOBAL_CIRCUIT_BREAKER_THRESHOLD, DEFAULT_HISTORY_SIZE,
                       DEFAULT_UNKNOWN_TOOL_THRESHOLD, DEFAULT_WARNING_THRESHOLD, DEFAULT_WINDOW_SIZE, DEFAULTS,
                       DEFAULTS_2026_9, LoopDetectionSettings)

__all__ = ["normalize_agent_id", "merge_blocks", "merge_blocks_2026_9", "resolve", "resolve_2026_9", "profiles_of"]

_AGENT_ID_VALID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.IGNORECASE | re.ASCII)
_AGENT_ID_INVALID_RUN = re.compile(r"[^a-z0-9_-]+")


def normalize_agent_id(agent_id: str) -> str:
    """docs/detection-rules.md §2.4: OpenClaw's agent-id normalisation (``" Safe Runner "`` -> ``safe-runner``)."""
    trimmed = js_trim(agent_id)
    if not trimmed:
        return "main"
    if _AGENT_ID_VALID.fullmatch(trimmed):
        return trimmed.lower()
    cleaned = _AGENT_ID_INVALID_RUN.sub("-", trimmed.lower()).strip("-")[:64]
    return cleaned or "main"


def merge_blocks(global_block: Any, agent_block: Any) -> dict | None:
    """docs/detection-rules.md §2.4: shallow overlay of the agent block on the global one, with
    ``detectors`` and ``postCompactionGuard`` merged key by key."""
    if not isinstance(agent_block, dict):
        return global_block if isinstance(global_block, dict) else None
    if not isinstance(global_block, dict):
        return agent_block
    merged = {**global_block, **agent_block}
    for key in ("detectors", "postCompactionGuard"):
        g, a = global_block.get(key), agent_block.get(key)
        if isinstance(g, dict) or isinstance(a, dict):
            merged[key] = {**(g if isinstance(g, dict) else {}), **(a if isinstance(a, dict) else {})}
    return merged


def profiles_of(options: Any) -> tuple[str, dict[str, str]]:
    """The default profile and normalised agent id -> profile of ``options`` (invalid entries skipped)."""
    if not isinstance(options, dict):
        return DEFAULT_PROFILE, {}
    default = options.get("profile")
    default = default if check_profile(default) is None else DEFAULT_PROFILE
    table = options.get("agentProfiles")
    per_agent = {}
    if isinstance(table, dict):
        for agent_id, value in table.items():
            if isinstance(agent_id, str) and check_profile(value) is None:
                per_agent.setdefault(normalize_agent_id(agent_id), value)
    return default, per_agent


def _positive_int(value: Any, default: int) -> int:
    """docs/detection-rules.md §2.2 step 1: a number, an integer (as a double) and > 0; else ``default``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    value = js_double(value)
    if isinstance(value, float) and not value.is_integer():  # also NaN and the infinities
        return default
    return int(value) if value > 0 else default


def resolve(block: Mapping[str, Any] | None) -> LoopDetectionSettings:
    """docs/detection-rules.md §2.2: turn a merged block into settings; never fails."""
    if not block:
        return DEFAULTS
    warning = _positive_int(block.get("warningThreshold"), DEFAULT_WARNING_THRESHOLD)
    critical = _positive_int(block.get("criticalThreshold"), DEFAULT_CRITICAL_THRESHOLD)
    breaker = _positive_int(block.get("globalCircuitBreakerThreshold"), DEFAULT_GLOBAL_CIRCUIT_BREAKER_THRESHOLD)
    if critical <= warning:
        critical = js_increment(warning)
    if breaker <= critical:
        breaker = js_increment(critical)
    detectors = block.get("detectors")
    detectors = detectors if isinstance(detectors, dict) else {}
    guard = block.get("postCompactionGuard")
    guard = guard if isinstance(guard, dict) else {}
    enabled = block.get("enabled")

    def flag(name: str) -> bool:  # `detectors.x ?? true`, then tested by truthiness: "" / 0 / NaN turn it off
        value = detectors.get(name)
        return True if value is None else js_truthy(value)

    return LoopDetectionSettings(
        enabled=enabled if isinstance(enabled, bool) else (True if js_truthy(enabled) else None),
        history_size=_positive_int(block.get("historySize"), DEFAULT_HISTORY_SIZE),
        warning_threshold=warning,
        critical_threshold=critical,
        unknown_tool_threshold=_positive_int(block.get("unknownToolThreshold"), DEFAULT_UNKNOWN_TOOL_THRESHOLD),
        global_circuit_breaker_threshold=breaker,
        generic_repeat=flag("genericRepeat"),
        known_poll_no_progress=flag("knownPollNoProgress"),
        ping_pong=flag("pingPong"),
        window_size=_positive_int(guard.get("windowSize"), DEFAULT_WINDOW_SIZE),
    )


def merge_blocks_2026_9(global_block: Any, agent_block: Any) -> dict | None:
    """docs/detection-rules.md §11.2.4: no agent block -> the global one; no global block -> the agent's; both ->
    ``{enabled: agent.enabled ?? global.enabled}`` (an agent ``enabled: null`` or absent falls back)."""
    if not isinstance(agent_block, dict):
        return global_block if isinstance(global_block, dict) else None
    if not isinstance(global_block, dict):
        return agent_block
    enabled = agent_block.get("enabled")
    return {"enabled": global_block.get("enabled") if enabled is None else enabled}


def resolve_2026_9(block: Mapping[str, Any] | None) -> LoopDetectionSettings:
    """docs/detection-rules.md §11.2.2-§2.3: every knob fixed; ``enabled`` is True only when exactly true, False only
    when exactly false, else None (detectors and call recording off, guard on)."""
    enabled = block.get("enabled") if isinstance(block, dict) else None
    if enabled is True or enabled is False:
        return LoopDetectionSettings(enabled=enabled, profile=OPENCLAW_2026_9_6, is_2026_9=True)
    return DEFAULTS_2026_9
