"""``perTool``: other thresholds for some tools, or a tool exempt from a detector.

A slow job's poll blocked one call before it finishes, legitimate paging that warns, a search tool
that should block sooner than a file read: OpenClaw has one set of thresholds per agent. A rule
here overlays ``tools.loopDetection`` keys on the agent's effective settings for the calls of the
tools it matches (the first matching rule wins), re-clamped as OpenClaw clamps (docs/detection-rules.md §2.2:
critical above warning, the global breaker above critical). The detectors then run with those
settings; the call's verdict names the rule in its ``policy`` field.

Matching is on the normalised tool name (docs/detection-rules.md §3 step 1): ``tool`` is an :mod:`fnmatch` pattern;
``mcpServer`` matches the tools an MCP server exposes, which runners name
``mcp__<server>__<tool>``.
"""

from __future__ import annotations

from dataclasses import replace
from fnmatch import fnmatchcase

from ..config import LoopDetectionSettings
from .config import ToolRule

__all__ = ["match_rule", "apply_rule"]

_DETECTOR_FIELDS = {"genericRepeat": "generic_repeat", "knownPollNoProgress": "known_poll_no_progress",
                    "pingPong": "ping_pong"}
_THRESHOLD_FIELDS = {"warningThreshold": "warning_threshold", "criticalThreshold": "critical_threshold",
                     "unknownToolThreshold": "unknown_tool_threshold",
                     "globalCircuitBreakerThreshold": "global_circuit_breaker_threshold"}


def match_rule(rules: tuple[ToolRule, ...], tool: str) -> ToolRule | None:
    """The first rule whose ``tool`` pattern or ``mcpServer`` matches the normalised ``tool``, or None."""
    for rule in rules:
        if rule.tool is not None:
            if fnmatchcase(tool, rule.tool):
                return rule
        elif tool.startswith(f"mcp__{rule.mcp_server.lower()}__"):
            return rule
    return None


def apply_rule(settings: LoopDetectionSettings, rule: ToolRule) -> LoopDetectionSettings:
    """``settings`` with the rule's keys overlaid, clamped as OpenClaw clamps (docs/detection-rules.md §2.2 steps 2-3)."""
    changes = {_THRESHOLD_FIELDS[k]: v for k, v in rule.overrides.items() if k in _THRESHOLD_FIELDS}
    for key, value in rule.overrides.get("detectors", {}).items():
        changes[_DETECTOR_FIELDS[key]] = value
    out = replace(settings, **changes)
    if out.critical_threshold <= out.warning_threshold:
        out = replace(out, critical_threshold=out.warning_threshold + 1)
    if out.global_circuit_breaker_threshold <= out.critical_threshold:
        out = replace(out, global_circuit_breaker_threshold=out.critical_threshold + 1)
    return out
