"""The load-time schema of the loop-detection blocks (docs/detection-rules.md §2.1; 2026.9.6: §11.2.1):
:func:`validate` raises :class:`ConfigError` with OpenClaw's messages.

Also checks the shape that holds the blocks (``tools``, ``agents.list``, ``agents.entries``) and
loopwatch's own ``options``; the ``policies`` section is checked by
:mod:`streams.detection.policies.config`, reporting into the same :class:`ConfigError`.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..fleet import validate_fleet
from ..profiles import DEFAULT_PROFILE, OPENCLAW_2026_9_6, check_profile
from .js import js_double
from .resolve import normalize_agent_id, profiles_of

__all__ = ["ConfigError", "validate"]

_NUMERIC_KEYS = (
    "historySize",
    "warningThreshold",
    "criticalThreshold",
    "unknownToolThreshold",
    "globalCircuitBreakerThreshold",
)
_BLOCK_KEYS = frozenset(("enabled", *_NUMERIC_KEYS, "detectors", "postCompactionGuard"))
_DETECTOR_KEYS = ("genericRepeat", "knownPollNoProgress", "pingPong")
_GUARD_KEYS = ("windowSize",)


class ConfigError(ValueError):
    """A configuration that OpenClaw's schema would reject.

    ``issues`` lists ``(path, message)`` pairs; ``str()`` joins them one per line.
    """

    def __init__(self, issues: list[tuple[str, str]], source: str | None = None) -> None:
        self.issues = issues
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__("\n".join(f"{prefix}{path}: {message}" for path, message in issues))


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _check_object(value: Any, path: str, issues: list[tuple[str, str]]) -> bool:
    if isinstance(value, dict):
        return True
    issues.append((path, f"Expected object, received {_type_name(value)}"))
    return False


def _object_member(parent: dict, key: str, path: str, issues: list[tuple[str, str]]) -> dict | None:
    """``parent[key]`` when it is an object; None when absent or not an object (then an issue)."""
    if key not in parent or not _check_object(parent[key], path, issues):
        return None
    return parent[key]


def _check_strict(block: Any, allowed: tuple[str, ...] | frozenset[str], path: str,
                  issues: list[tuple[str, str]]) -> bool:
    if not _check_object(block, path, issues):
        return False
    unknown = [key for key in block if key not in allowed]
    if unknown:
        keys = ", ".join(f"'{key}'" for key in unknown)
        issues.append((path, f"Unrecognized key(s) in object: {keys}"))
    return True


def _check_positive_int(value: Any, path: str, issues: list[tuple[str, str]]) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        issues.append((path, f"Expected number, received {_type_name(value)}"))
        return False
    value = js_double(value)
    if isinstance(value, float) and not value.is_integer():
        issues.append((path, "Expected integer, received float"))
        return False
    if value <= 0:
        issues.append((path, "Number must be greater than 0"))
        return False
    return True


def _check_boolean(value: Any, path: str, issues: list[tuple[str, str]]) -> None:
    if not isinstance(value, bool):
        issues.append((path, f"Expected boolean, received {_type_name(value)}"))


# What a user is told when a block holds a key 2026.9.6 retired (docs/detection-rules.md §11.2.1: its schema accepts only
# ``enabled``; OpenClaw's own message is zod's, the first sentence here).
_RETIRED_KEYS_HINT = (
    "profile openclaw-2026.9.6 reads only 'enabled' (OpenClaw 2026.9.6 fixes warning 10, critical 20, "
    "global 30, unknown-tool 10, history 30 and guard window 3, and refuses these keys; `openclaw doctor --fix` "
    "removes them). Remove them, or choose profile openclaw-2026.7 to keep your thresholds"
)


def _validate_block_2026_9(block: Any, path: str, issues: list[tuple[str, str]]) -> None:
    """docs/detection-rules.md §11.2.1: only ``enabled`` (a boolean); every other key is refused."""
    if not _check_object(block, path, issues):
        return
    retired = [key for key in block if key != "enabled"]
    if retired:
        keys = ", ".join(f"'{key}'" for key in retired)
        issues.append((path, f"Unrecognized key(s) in object: {keys}: {_RETIRED_KEYS_HINT}"))
    if "enabled" in block:
        _check_boolean(block["enabled"], f"{path}.enabled", issues)


def _validate_block(block: Any, path: str, issues: list[tuple[str, str]], profile: str = DEFAULT_PROFILE) -> None:
    if profile == OPENCLAW_2026_9_6:
        _validate_block_2026_9(block, path, issues)
        return
    if not _check_strict(block, _BLOCK_KEYS, path, issues):
        return
    numbers_ok: dict[str, bool] = {}
    for key in _NUMERIC_KEYS:
        if key in block:
            numbers_ok[key] = _check_positive_int(block[key], f"{path}.{key}", issues)
    if "enabled" in block:
        _check_boolean(block["enabled"], f"{path}.enabled", issues)
    if "detectors" in block and _check_strict(block["detectors"], _DETECTOR_KEYS, f"{path}.detectors", issues):
        for key in _DETECTOR_KEYS:
            if key in block["detectors"]:
                _check_boolean(block["detectors"][key], f"{path}.detectors.{key}", issues)
    if "postCompactionGuard" in block and _check_strict(
        block["postCompactionGuard"], _GUARD_KEYS, f"{path}.postCompactionGuard", issues
    ):
        if "windowSize" in block["postCompactionGuard"]:
            _check_positive_int(
                block["postCompactionGuard"]["windowSize"], f"{path}.postCompactionGuard.windowSize", issues
            )
    # Cross-field rules apply only when both fields are present in this block (docs/detection-rules.md §2.1).
    # (comparing the doubles JavaScript holds, docs/detection-rules.md §2.2)
    if numbers_ok.get("warningThreshold") and numbers_ok.get("criticalThreshold"):
        if js_double(block["warningThreshold"]) >= js_double(block["criticalThreshold"]):
            issues.append((
                f"{path}.criticalThreshold",
                "tools.loopDetection.warningThreshold must be lower than criticalThreshold.",
            ))
    if numbers_ok.get("criticalThreshold") and numbers_ok.get("globalCircuitBreakerThreshold"):
        if js_double(block["criticalThreshold"]) >= js_double(block["globalCircuitBreakerThreshold"]):
            issues.append((
                f"{path}.globalCircuitBreakerThreshold",
                "tools.loopDetection.criticalThreshold must be lower than globalCircuitBreakerThreshold.",
            ))


_OPTION_KEYS = ("channelSendTools", "fleet", "profile", "agentProfiles")


def _validate_profiles(options: Any, issues: list[tuple[str, str]]) -> tuple[str, dict[str, str]]:
    """Check ``options.profile`` and ``options.agentProfiles``; return the default and the per-agent profiles
    (normalised agent id -> profile) that validation of the blocks goes by."""
    default, per_agent = profiles_of(options)
    if not isinstance(options, dict):
        return default, per_agent
    if "profile" in options:
        problem = check_profile(options["profile"])
        if problem:
            issues.append(("options.profile", problem))
    if "agentProfiles" in options:
        table = options["agentProfiles"]
        if _check_object(table, "options.agentProfiles", issues):
            for agent_id, value in table.items():
                problem = check_profile(value)
                if problem:
                    issues.append((f"options.agentProfiles.{agent_id}", problem))
    return default, per_agent


def _validate_entry(entry: Any, path: str, issues: list[tuple[str, str]], profile: str) -> None:
    """An agent entry (of ``agents.list`` or ``agents.entries``): an object whose ``tools``, when present, is an
    object whose ``loopDetection`` block follows ``profile``'s rules."""
    if not _check_object(entry, path, issues):
        return
    entry_tools = _object_member(entry, "tools", f"{path}.tools", issues)
    if entry_tools is not None and "loopDetection" in entry_tools:
        _validate_block(entry_tools["loopDetection"], f"{path}.tools.loopDetection", issues, profile)


def validate(raw: Mapping[str, Any], source: str | None = None, profile: str | None = None) -> None:
    """Check the loop-detection blocks of an OpenClaw config (docs/detection-rules.md §2.1).

    Also checks the shape that holds them: ``tools``, ``agents``, each
    ``agents.list`` entry and its ``tools`` must be objects and
    ``agents.list`` an array, when present (otherwise the blocks inside would
    be ignored without a word), and loopwatch's own ``options`` and ``policies``
    sections. Other keys of the file are not looked at. Each block is checked by
    the rules of its profile (``options.agentProfiles`` for an agent's block,
    ``options.profile`` -- or ``profile`` when given -- for the global one and
    the rest): under ``openclaw-2026.9.6`` every key but ``enabled`` is refused,
    naming the keys and why.

    Raises:
        ConfigError: listing every issue with its path, e.g.
            ``tools.loopDetection.criticalThreshold: tools.loopDetection.warningThreshold
            must be lower than criticalThreshold.`` or ``agents.list: Expected array,
            received object``.
    """
    issues: list[tuple[str, str]] = []
    options = raw.get("options")
    default_profile, agent_profiles = _validate_profiles(options, issues)
    if profile is not None:  # a command's --profile in place of options.profile
        default_profile = profile

    def agent_profile(agent_id: Any) -> str:
        if isinstance(agent_id, str):
            return agent_profiles.get(normalize_agent_id(agent_id), default_profile)
        return default_profile

    tools = _object_member(raw, "tools", "tools", issues)
    if tools is not None and "loopDetection" in tools:
        _validate_block(tools["loopDetection"], "tools.loopDetection", issues, default_profile)
    agents = _object_member(raw, "agents", "agents", issues)
    if agents is not None and "list" in agents:
        agent_list = agents["list"]
        if not isinstance(agent_list, list):
            issues.append(("agents.list", f"Expected array, received {_type_name(agent_list)}"))
            agent_list = []
        for index, entry in enumerate(agent_list):
            _validate_entry(entry, f"agents.list.{index}", issues,
                            agent_profile(entry.get("id") if isinstance(entry, dict) else None))
    if agents is not None and "entries" in agents:  # 2026.9.6's agent table (docs/detection-rules.md §11.2.4)
        entries = agents["entries"]
        if _check_object(entries, "agents.entries", issues):
            for agent_id, entry in entries.items():
                _validate_entry(entry, f"agents.entries.{agent_id}", issues, agent_profile(agent_id))
    if options is not None:
        if _check_strict(options, _OPTION_KEYS, "options", issues) and "channelSendTools" in options:
            names = options["channelSendTools"]
            if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
                issues.append(("options.channelSendTools", "Expected array of strings"))
        if isinstance(options, dict) and "fleet" in options:
            issues.extend(validate_fleet(options["fleet"]))
    from ..policies.config import parse_policies  # here: the policies package imports the config package

    parse_policies(raw, issues)  # loopwatch's own section beside OpenClaw's (docs/policies.md)
    if issues:
        raise ConfigError(issues, source)
