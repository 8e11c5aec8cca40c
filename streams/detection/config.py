"""Loop-detection configuration in OpenClaw's own file shape (Spec §2).

Users point loopwatch at their existing ``openclaw.json`` (JSON5). Only the
blocks loop detection reads are looked at:

* ``tools.loopDetection`` -- the global block G;
* ``agents.list[].tools.loopDetection`` -- per-agent blocks A, overlaid on G;
* ``options.channelSendTools`` -- loopwatch's own addition (not OpenClaw
  config): tool names that behave like channel-plugin send tools (Spec §4.3 rule 7);
* ``options.fleet`` -- loopwatch's own too: fleet loops and the opt-in fleet
  breaker (:mod:`streams.detection.fleet`); never part of OpenClaw's blocks.

Three steps, as in OpenClaw:

1. :func:`validate` -- the strict load-time schema (Spec §2.1), raising
   :class:`ConfigError` with OpenClaw's messages;
2. :func:`merge_blocks` -- the per-agent overlay (Spec §2.4);
3. :func:`resolve` -- runtime clamps and defaults (Spec §2.2, §2.3), which never fail.

``policies`` (loopwatch's opt-in rules beyond OpenClaw's) is validated here too, by
:mod:`streams.detection.policies.config`.

Size: the three steps stay in one module because together they restate one part of OpenClaw
(its schema and its resolver) and are read side by side against the spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import json5

from .fingerprint import js_trim
from .fleet import FleetSettings, fleet_settings, validate_fleet

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
    "resolve",
    "normalize_agent_id",
]

DEFAULT_HISTORY_SIZE = 30
DEFAULT_WARNING_THRESHOLD = 10
DEFAULT_CRITICAL_THRESHOLD = 20
DEFAULT_UNKNOWN_TOOL_THRESHOLD = 10
DEFAULT_GLOBAL_CIRCUIT_BREAKER_THRESHOLD = 30
DEFAULT_WINDOW_SIZE = 3  # postCompactionGuard.windowSize, tool outcomes

# ``--config-validate`` of the worker (a WorkerSettings field), replay and report: one meaning, one default
VALIDATE_BY_DEFAULT = True
VALIDATE_DESCRIPTION = "Validate the config file as OpenClaw does at load time (false = runtime clamping only)."

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


@dataclass(frozen=True, slots=True)
class LoopDetectionSettings:
    """What the detectors and the guard use for one agent (Spec §2.2, §2.3).

    ``enabled`` keeps OpenClaw's three states: True (detectors on), False (all
    off, calls not recorded), None (absent: detectors off, guard on). A
    merged value that is not a boolean (only possible unvalidated) is mapped by
    how OpenClaw tests it (Spec §2.3): the detectors by JavaScript truthiness,
    the guard and call recording by ``=== false``. So a truthy value (``1``,
    ``"false"``, ``[]``, ``{}``) acts as True and a falsy one (``0``, ``""``,
    NaN, null) as absent; see :func:`resolve`.
    """

    enabled: bool | None = None
    history_size: int = DEFAULT_HISTORY_SIZE
    warning_threshold: int = DEFAULT_WARNING_THRESHOLD
    critical_threshold: int = DEFAULT_CRITICAL_THRESHOLD
    unknown_tool_threshold: int = DEFAULT_UNKNOWN_TOOL_THRESHOLD
    global_circuit_breaker_threshold: int = DEFAULT_GLOBAL_CIRCUIT_BREAKER_THRESHOLD
    generic_repeat: bool = True
    known_poll_no_progress: bool = True
    ping_pong: bool = True
    window_size: int = DEFAULT_WINDOW_SIZE

    @property
    def detectors_enabled(self) -> bool:
        """Rolling detectors run only when ``enabled`` is exactly true."""
        return self.enabled is True

    @property
    def records_calls(self) -> bool:
        """Calls are recorded before execution unless ``enabled`` is exactly false."""
        return self.enabled is not False

    @property
    def guard_enabled(self) -> bool:
        """The post-compaction guard runs unless ``enabled`` is exactly false."""
        return self.enabled is not False


DEFAULTS = LoopDetectionSettings()


# --------------------------------------------------------------------- validation

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


def _validate_block(block: Any, path: str, issues: list[tuple[str, str]]) -> None:
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
    # Cross-field rules apply only when both fields are present in this block (Spec §2.1).
    if numbers_ok.get("warningThreshold") and numbers_ok.get("criticalThreshold"):
        if block["warningThreshold"] >= block["criticalThreshold"]:
            issues.append((
                f"{path}.criticalThreshold",
                "tools.loopDetection.warningThreshold must be lower than criticalThreshold.",
            ))
    if numbers_ok.get("criticalThreshold") and numbers_ok.get("globalCircuitBreakerThreshold"):
        if block["criticalThreshold"] >= block["globalCircuitBreakerThreshold"]:
            issues.append((
                f"{path}.globalCircuitBreakerThreshold",
                "tools.loopDetection.criticalThreshold must be lower than globalCircuitBreakerThreshold.",
            ))


def validate(raw: Mapping[str, Any], source: str | None = None) -> None:
    """Check the loop-detection blocks of an OpenClaw config (Spec §2.1).

    Also checks the shape that holds them: ``tools``, ``agents``, each
    ``agents.list`` entry and its ``tools`` must be objects and
    ``agents.list`` an array, when present (otherwise the blocks inside would
    be ignored without a word), and loopwatch's own ``options`` and ``policies``
    sections. Other keys of the file are not looked at.

    Raises:
        ConfigError: listing every issue with its path, e.g.
            ``tools.loopDetection.criticalThreshold: tools.loopDetection.warningThreshold
            must be lower than criticalThreshold.`` or ``agents.list: Expected array,
            received object``.
    """
    issues: list[tuple[str, str]] = []
    tools = _object_member(raw, "tools", "tools", issues)
    if tools is not None and "loopDetection" in tools:
        _validate_block(tools["loopDetection"], "tools.loopDetection", issues)
    agents = _object_member(raw, "agents", "agents", issues)
    if agents is not None and "list" in agents:
        agent_list = agents["list"]
        if not isinstance(agent_list, list):
            issues.append(("agents.list", f"Expected array, received {_type_name(agent_list)}"))
            agent_list = []
        for index, entry in enumerate(agent_list):
            path = f"agents.list.{index}"
            if not _check_object(entry, path, issues):
                continue
            entry_tools = _object_member(entry, "tools", f"{path}.tools", issues)
            if entry_tools is not None and "loopDetection" in entry_tools:
                _validate_block(entry_tools["loopDetection"], f"{path}.tools.loopDetection", issues)
    options = raw.get("options")
    if options is not None:
        if _check_strict(options, ("channelSendTools", "fleet"), "options", issues) and "channelSendTools" in options:
            names = options["channelSendTools"]
            if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
                issues.append(("options.channelSendTools", "Expected array of strings"))
        if isinstance(options, dict) and "fleet" in options:
            issues.extend(validate_fleet(options["fleet"]))
    from .policies.config import parse_policies  # here: the policies package imports this module

    parse_policies(raw, issues)  # loopwatch's own section beside OpenClaw's (docs/policies.md)
    if issues:
        raise ConfigError(issues, source)


# -------------------------------------------------------------- overlay and resolve

_AGENT_ID_VALID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.IGNORECASE | re.ASCII)
_AGENT_ID_INVALID_RUN = re.compile(r"[^a-z0-9_-]+")


def normalize_agent_id(agent_id: str) -> str:
    """Spec §2.4: OpenClaw's agent-id normalisation (``" Safe Runner "`` -> ``safe-runner``)."""
    trimmed = js_trim(agent_id)
    if not trimmed:
        return "main"
    if _AGENT_ID_VALID.fullmatch(trimmed):
        return trimmed.lower()
    cleaned = _AGENT_ID_INVALID_RUN.sub("-", trimmed.lower()).strip("-")[:64]
    return cleaned or "main"


def merge_blocks(global_block: Any, agent_block: Any) -> dict | None:
    """Spec §2.4: shallow overlay of the agent block on the global one, with
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


def _positive_int(value: Any, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    if isinstance(value, float) and not value.is_integer():
        return default
    return int(value) if value > 0 else default


def js_truthy(value: Any) -> bool:
    """JavaScript's truthiness of a parsed JSON/JSON5 value (Spec §2.3).

    Falsy: ``false``, ``null``, ``0`` (and ``-0``), NaN and ``""``;
    everything else, including ``"false"``, ``[]`` and ``{}``, is truthy.
    """
    if value is None or value is False or value == "":
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == value and value != 0  # NaN != NaN
    return True


def resolve(block: Mapping[str, Any] | None) -> LoopDetectionSettings:
    """Spec §2.2: turn a merged block into settings; never fails."""
    if not block:
        return DEFAULTS
    warning = _positive_int(block.get("warningThreshold"), DEFAULT_WARNING_THRESHOLD)
    critical = _positive_int(block.get("criticalThreshold"), DEFAULT_CRITICAL_THRESHOLD)
    breaker = _positive_int(block.get("globalCircuitBreakerThreshold"), DEFAULT_GLOBAL_CIRCUIT_BREAKER_THRESHOLD)
    if critical <= warning:
        critical = warning + 1
    if breaker <= critical:
        breaker = critical + 1
    detectors = block.get("detectors")
    detectors = detectors if isinstance(detectors, dict) else {}
    guard = block.get("postCompactionGuard")
    guard = guard if isinstance(guard, dict) else {}
    enabled = block.get("enabled")

    def flag(name: str) -> bool:
        value = detectors.get(name)
        return value if isinstance(value, bool) else True

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


def _entry_block(entry: dict) -> Any:
    """An ``agents.list`` entry's own ``tools.loopDetection`` block, or None."""
    tools = entry.get("tools")
    return tools.get("loopDetection") if isinstance(tools, dict) else None


class OpenClawConfig:
    """The loop-detection part of an OpenClaw config, resolved per agent.

    Arguments:
        raw: the parsed config (``{"tools": {"loopDetection": ...}, "agents":
            {"list": [...]}, "options": {...}}``); other keys are ignored.
    Settings per agent id are computed once and cached.
    """

    __slots__ = ("raw", "channel_send_tools", "fleet", "_global", "_agents", "_cache")

    def __init__(self, raw: Mapping[str, Any] | None = None) -> None:
        raw = dict(raw or {})
        self.raw = raw
        tools = raw.get("tools")
        self._global = tools.get("loopDetection") if isinstance(tools, dict) else None
        agents = raw.get("agents")
        agent_list = agents.get("list") if isinstance(agents, dict) else None
        self._agents: list[dict] = [a for a in agent_list if isinstance(a, dict)] if isinstance(agent_list, list) else []
        options = raw.get("options")
        names = options.get("channelSendTools") if isinstance(options, dict) else None
        self.channel_send_tools = frozenset(
            name.strip().lower() for name in names or () if isinstance(name, str)
        )
        self.fleet: FleetSettings = fleet_settings(raw)  # options.fleet: loopwatch's, not OpenClaw's
        self._cache: dict[str | None, LoopDetectionSettings] = {}

    @property
    def smallest_warning_threshold(self) -> int:
        """The lowest resolved ``warningThreshold`` over the global block and every agent."""
        ids = [entry.get("id") for entry in self._agents if isinstance(entry.get("id"), str)]
        return min(self.for_agent(agent_id).warning_threshold for agent_id in [None, *ids])

    @property
    def agents_with_blocks(self) -> list[str]:
        """Ids of the ``agents.list`` entries whose own ``tools.loopDetection`` block :meth:`for_agent`
        applies (the first entry of each normalised id, as there), in file order."""
        seen: set[str] = set()
        ids = []
        for entry in self._agents:
            entry_id = entry.get("id")
            if not isinstance(entry_id, str) or normalize_agent_id(entry_id) in seen:
                continue
            seen.add(normalize_agent_id(entry_id))
            if _entry_block(entry) is not None:
                ids.append(entry_id)
        return ids

    def _agent_block(self, agent_id: str) -> Any:
        wanted = normalize_agent_id(agent_id)
        for entry in self._agents:
            entry_id = entry.get("id")
            if isinstance(entry_id, str) and normalize_agent_id(entry_id) == wanted:
                return _entry_block(entry)
        return None

    def for_agent(self, agent_id: str | None) -> LoopDetectionSettings:
        """Spec §2.4: effective settings for events of ``agent_id`` (None/empty: global only)."""
        try:
            return self._cache[agent_id]
        except KeyError:
            pass
        if isinstance(agent_id, str) and agent_id:
            block = merge_blocks(self._global, self._agent_block(agent_id))
        else:
            block = self._global if isinstance(self._global, dict) else None
        settings = self._cache[agent_id] = resolve(block)
        return settings


def load_config(path: str | Path | None, *, strict: bool = VALIDATE_BY_DEFAULT) -> OpenClawConfig:
    """Read an ``openclaw.json`` (JSON5) and return its loop-detection config.

    Arguments:
        path: the file; None gives OpenClaw's defaults (detection disabled).
        strict: validate as OpenClaw does at load time (Spec §2.1).
    Raises:
        ConfigError: the file is not UTF-8 JSON5, not an object, or fails validation.
        OSError: the file cannot be read.
    """
    if path is None:
        return OpenClawConfig({})
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([("(file)", f"not UTF-8 text: {exc.reason} at byte {exc.start}")], str(path)) from None
    try:
        raw = json5.loads(text)
    except (ValueError, RecursionError) as exc:
        reason = str(exc).replace("<string>:", "line ")  # json5 names no file; ConfigError does
        raise ConfigError([("(file)", f"not valid JSON5: {reason}")], str(path)) from None
    if not isinstance(raw, dict):
        raise ConfigError([("(file)", "the top level must be an object")], str(path))
    if strict:
        validate(raw, str(path))
    return OpenClawConfig(raw)
