"""The ``policies`` section of the config file: loopwatch's own rules beyond OpenClaw's.

It sits at the top level of the file, beside ``tools`` and ``options`` (never inside OpenClaw's
``tools.loopDetection``, whose strict schema OpenClaw itself would reject it in). Every policy is
off unless its block is present and ``enabled`` is not false; with no ``policies`` section every
verdict is OpenClaw's, byte for byte.

Shape (JSON5; every key optional)::

    policies: {
      shadow: false,                // true: every policy only reports what it would do
      perTool: [                    // first matching rule wins
        { tool: "web_*",            // fnmatch pattern on the normalised tool name, or
          mcpServer: "github",      // tools of an MCP server (named mcp__<server>__<tool>)
          warningThreshold: 5, criticalThreshold: 8,
          unknownToolThreshold: 3, globalCircuitBreakerThreshold: 12,
          detectors: { pingPong: false },     // exempt these tools from a detector
          shadow: false },
      ],
      escalation: { consecutiveBlocks: 3, shadow: false },
      runBudget: { blockedCalls: 5, noProgressOutcomes: 40, action: "abort", shadow: false },
      normalizeResults: { patterns: ["uuid", "timestamp", "duration", "nonce",
                                     { regex: "req-[0-9]+", replace: "req-#" }] },
    }

:func:`parse_policies` validates the section and returns :class:`PolicyConfig`; problems are
reported as :class:`~streams.detection.config.ConfigError` issues (path, message), as OpenClaw's
own blocks are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["PolicyConfig", "ToolRule", "Escalation", "RunBudget", "Normalization", "parse_policies",
           "NORMALIZE_PRESETS", "POLICY_KEYS"]

POLICY_KEYS = ("shadow", "perTool", "escalation", "runBudget", "normalizeResults")
_THRESHOLDS = ("warningThreshold", "criticalThreshold", "unknownToolThreshold", "globalCircuitBreakerThreshold")
_DETECTORS = ("genericRepeat", "knownPollNoProgress", "pingPong")

# Named patterns for normalizeResults: what varies between identical outcomes in practice.
NORMALIZE_PRESETS: dict[str, tuple[str, str]] = {
    # 8-4-4-4-12 hex, any case
    "uuid": (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "<uuid>"),
    # ISO 8601 / RFC 3339 date-times (2026-12-01T10:00:00.123Z, 2026-12-01 10:00:00+01:00), then clock times
    "timestamp": (r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
                  r"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<time>"),
    # 1.2s, 350 ms, 2.5 seconds, 3m, 12µs
    "duration": (r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b", "<duration>"),
    # long hex or base64-ish tokens (wrapper nonces, request ids): 16+ characters mixing digits and letters;
    # and hex ids that happen to be all digits (0000000000019919): a token of digits exactly as long as a
    # hex id (16, 24, 32, 40 or 64 characters). Ordinary numbers (counts, sizes, exit codes, epoch seconds
    # or milliseconds, nanosecond times of 19 digits) are never those lengths and stay as they are.
    "nonce": (r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{16,}\b"
              r"|(?<![A-Za-z0-9_-])(?:[0-9]{64}|[0-9]{40}|[0-9]{32}|[0-9]{24}|[0-9]{16})(?![A-Za-z0-9_-])",
              "<nonce>"),
}


@dataclass(frozen=True, slots=True)
class ToolRule:
    """One ``perTool`` rule: which tools, and the ``tools.loopDetection`` keys it overrides."""

    index: int
    tool: str | None
    mcp_server: str | None
    overrides: Mapping[str, Any]
    shadow: bool

    @property
    def name(self) -> str:
        """How verdicts name the rule: ``perTool[<index>]`` and what it matches."""
        what = f"tool={self.tool}" if self.tool is not None else f"mcpServer={self.mcp_server}"
        return f"perTool[{self.index}] {what}"


@dataclass(frozen=True, slots=True)
class Escalation:
    """``escalation``: this many consecutive blocked calls in one run become an abort."""

    consecutive_blocks: int
    shadow: bool


@dataclass(frozen=True, slots=True)
class RunBudget:
    """``runBudget``: per-run limits on distinct blocked calls and no-progress outcomes (None = no limit)."""

    blocked_calls: int | None
    no_progress_outcomes: int | None
    action: str  # "block" or "abort"
    shadow: bool


@dataclass(frozen=True, slots=True)
class Normalization:
    """``normalizeResults``: (compiled pattern, replacement) applied to result text and thrown messages."""

    patterns: tuple[tuple[re.Pattern[str], str], ...]
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """The parsed ``policies`` section; each policy None when off."""

    shadow: bool = False
    per_tool: tuple[ToolRule, ...] = ()
    escalation: Escalation | None = None
    run_budget: RunBudget | None = None
    normalize: Normalization | None = None
    summary: list[str] = field(default_factory=list)

    @property
    def active(self) -> bool:
        """Whether any policy is on."""
        return bool(self.per_tool or self.escalation or self.run_budget or self.normalize)


def _positive_int(value: Any, path: str, issues: list[tuple[str, str]]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value <= 0:
        issues.append((path, f"must be a positive integer, got {value!r}"))
        return None
    return int(value)


def _bool(block: Mapping[str, Any], key: str, path: str, issues: list[tuple[str, str]], default: bool) -> bool:
    value = block.get(key, default)
    if not isinstance(value, bool):
        issues.append((f"{path}.{key}", f"must be true or false, got {value!r}"))
        return default
    return value


def _object(value: Any, path: str, allowed: tuple[str, ...], issues: list[tuple[str, str]]) -> dict | None:
    if not isinstance(value, dict):
        issues.append((path, f"must be an object, got {type(value).__name__}"))
        return None
    for key in value:
        if key not in allowed:
            issues.append((f"{path}.{key}", f"unknown key (known: {', '.join(allowed)})"))
    return value


def _enabled(block: dict, path: str, issues: list[tuple[str, str]]) -> bool:
    return _bool(block, "enabled", path, issues, True)


def _tool_rule(index: int, raw: Any, issues: list[tuple[str, str]]) -> ToolRule | None:
    path = f"policies.perTool[{index}]"
    block = _object(raw, path, ("tool", "mcpServer", "detectors", "shadow", *_THRESHOLDS), issues)
    if block is None:
        return None
    tool, server = block.get("tool"), block.get("mcpServer")
    if (tool is None) == (server is None):
        issues.append((path, "needs exactly one of tool (a name or pattern) and mcpServer"))
        return None
    for key, value in (("tool", tool), ("mcpServer", server)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            issues.append((f"{path}.{key}", f"must be a non-empty string, got {value!r}"))
            return None
    overrides: dict[str, Any] = {}
    for key in _THRESHOLDS:
        if key in block:
            number = _positive_int(block[key], f"{path}.{key}", issues)
            if number is not None:
                overrides[key] = number
    if "warningThreshold" in overrides and "criticalThreshold" in overrides \
            and overrides["warningThreshold"] >= overrides["criticalThreshold"]:
        issues.append((f"{path}.criticalThreshold", "warningThreshold must be lower than criticalThreshold"))
    detectors = block.get("detectors")
    if detectors is not None:
        detectors = _object(detectors, f"{path}.detectors", _DETECTORS, issues) or {}
        flags = {k: v for k, v in detectors.items() if k in _DETECTORS}
        for key, value in flags.items():
            if not isinstance(value, bool):
                issues.append((f"{path}.detectors.{key}", f"must be true or false, got {value!r}"))
        overrides["detectors"] = {k: v for k, v in flags.items() if isinstance(v, bool)}
    if not overrides:
        issues.append((path, "overrides nothing: give a threshold or detectors"))
    return ToolRule(index, tool.strip().lower() if tool else None, server.strip() if server else None,
                    overrides, _bool(block, "shadow", path, issues, False))


def _escalation(raw: Any, issues: list[tuple[str, str]]) -> Escalation | None:
    block = _object(raw, "policies.escalation", ("enabled", "consecutiveBlocks", "shadow"), issues)
    if block is None or not _enabled(block, "policies.escalation", issues):
        return None
    count = _positive_int(block.get("consecutiveBlocks", 3), "policies.escalation.consecutiveBlocks", issues)
    return Escalation(count or 3, _bool(block, "shadow", "policies.escalation", issues, False))


def _run_budget(raw: Any, issues: list[tuple[str, str]]) -> RunBudget | None:
    path = "policies.runBudget"
    block = _object(raw, path, ("enabled", "blockedCalls", "noProgressOutcomes", "action", "shadow"), issues)
    if block is None or not _enabled(block, path, issues):
        return None
    blocked = _positive_int(block["blockedCalls"], f"{path}.blockedCalls", issues) if "blockedCalls" in block else None
    stalled = (_positive_int(block["noProgressOutcomes"], f"{path}.noProgressOutcomes", issues)
               if "noProgressOutcomes" in block else None)
    if "blockedCalls" not in block and "noProgressOutcomes" not in block:
        issues.append((path, "needs blockedCalls, noProgressOutcomes or both"))
    action = block.get("action", "abort")
    if action not in ("block", "abort"):
        issues.append((f"{path}.action", f'must be "block" or "abort", got {action!r}'))
        action = "abort"
    return RunBudget(blocked, stalled, action, _bool(block, "shadow", path, issues, False))


def _normalization(raw: Any, issues: list[tuple[str, str]]) -> Normalization | None:
    path = "policies.normalizeResults"
    block = _object(raw, path, ("enabled", "patterns"), issues)
    if block is None or not _enabled(block, path, issues):
        return None
    patterns = block.get("patterns", ["uuid", "timestamp", "duration", "nonce"])
    if not isinstance(patterns, list) or not patterns:
        issues.append((f"{path}.patterns", "must be a non-empty list of preset names or {regex, replace} objects"))
        return None
    compiled: list[tuple[re.Pattern[str], str]] = []
    names: list[str] = []
    for i, item in enumerate(patterns):
        where = f"{path}.patterns[{i}]"
        if isinstance(item, str):
            if item not in NORMALIZE_PRESETS:
                issues.append((where, f"unknown preset {item!r} (known: {', '.join(NORMALIZE_PRESETS)})"))
                continue
            regex, replace = NORMALIZE_PRESETS[item]
            names.append(item)
        else:
            item = _object(item, where, ("regex", "replace"), issues)
            if item is None:
                continue
            regex, replace = item.get("regex"), item.get("replace", "<masked>")
            if not isinstance(regex, str) or not isinstance(replace, str):
                issues.append((where, "regex and replace must be strings"))
                continue
            names.append(f"/{regex}/")
        try:
            compiled.append((re.compile(regex), replace))
        except re.error as exc:
            issues.append((where, f"not a valid regular expression: {exc}"))
    return Normalization(tuple(compiled), tuple(names)) if compiled else None


def parse_policies(raw: Mapping[str, Any], issues: list[tuple[str, str]]) -> PolicyConfig:
    """Parse the ``policies`` section of a parsed config file.

    Arguments:
        raw: the whole parsed file (only ``raw["policies"]`` is read).
        issues: problems found are appended as ``(path, message)``; the caller raises
            :class:`~streams.detection.config.ConfigError` when there are any.
    Returns:
        The policies; ``PolicyConfig()`` (all off) when the section is absent.
    """
    section = raw.get("policies")
    if section is None:
        return PolicyConfig()
    section = _object(section, "policies", POLICY_KEYS, issues)
    if section is None:
        return PolicyConfig()
    shadow = _bool(section, "shadow", "policies", issues, False)
    rules_raw = section.get("perTool", [])
    rules: list[ToolRule] = []
    if not isinstance(rules_raw, list):
        issues.append(("policies.perTool", "must be a list of rules"))
    else:
        rules = [r for i, raw_rule in enumerate(rules_raw) if (r := _tool_rule(i, raw_rule, issues)) is not None]
    escalation = _escalation(section["escalation"], issues) if "escalation" in section else None
    budget = _run_budget(section["runBudget"], issues) if "runBudget" in section else None
    normalize = _normalization(section["normalizeResults"], issues) if "normalizeResults" in section else None
    summary = [rule.name for rule in rules]
    if escalation:
        summary.append(f"escalation after {escalation.consecutive_blocks} consecutive blocks")
    if budget:
        limits = [f"{budget.blocked_calls} blocked calls" if budget.blocked_calls else "",
                  f"{budget.no_progress_outcomes} no-progress outcomes" if budget.no_progress_outcomes else ""]
        summary.append(f"runBudget {' or '.join(x for x in limits if x)} -> {budget.action}")
    if normalize:
        summary.append(f"normalizeResults {', '.join(normalize.names)}")
    if shadow and summary:
        summary.append("all in shadow mode")
    return PolicyConfig(shadow, tuple(rules), escalation, budget, normalize, summary)
