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
   :class:`ConfigError` with OpenClaw's messages;
2. :func:`merge_blocks` -- the per-agent overlay (docs/detection-rules.md §2.4);
3. :func:`resolve` -- runtime clamps and defaults (docs/detection-rules.md §2.2, §2.3), which never fail.

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
from .profiles import DEFAULT_PROFILE, OPENCLAW_2026_9_6, PROFILES, check_profile

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
    """What the detectors and the guard use for one agent (docs/detection-rules.md §2.2, §2.3).

    ``enabled`` keeps OpenClaw's three states: True (detectors on), False (all
    off, calls not recorded), None (absent: detectors off, guard on). A
    merged value that is not a boolean (only possible unvalidated) is mapped by
    how OpenClaw tests it (docs/detection-rules.md §2.3): the detectors by JavaScript truthiness,
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
    profile: str = DEFAULT_PROFILE  # streams.detection.profiles
    is_2026_9: bool = False  # profile == openclaw-2026.9.6: the engine's and detectors' branches test this

    @property
    def detectors_enabled(self) -> bool:
        """Rolling detectors run only when ``enabled`` is exactly true."""
        return self.enabled is True

    @property
    def records_calls(self) -> bool:
        """Calls are recorded before execution unless ``enabled`` is exactly false
        (2026.9.6: only when it is exactly true, docs/detection-rules.md §11.2.3)."""
        if self.is_2026_9:
            return self.enabled is True
        return self.enabled is not False

    @property
    def guard_enabled(self) -> bool:
        """The post-compaction guard runs unless ``enabled`` is exactly false."""
        return self.enabled is not False


DEFAULTS = LoopDetectionSettings()
DEFAULTS_2026_9 = LoopDetectionSettings(profile=OPENCLAW_2026_9_6, is_2026_9=True)


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
    default, per_agent = _profiles_of(options)
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


def _profiles_of(options: Any) -> tuple[str, dict[str, str]]:
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
    from .policies.config import parse_policies  # here: the policies package imports this module

    parse_policies(raw, issues)  # loopwatch's own section beside OpenClaw's (docs/policies.md)
    if issues:
        raise ConfigError(issues, source)


# -------------------------------------------------------------- overlay and resolve

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


_MAX_SAFE = 2 ** 53  # up to here every integer is exactly a double


def js_double(value: int | float) -> int | float:
    """The IEEE-754 double JavaScript's JSON reader makes of a parsed number (docs/detection-rules.md §2.2).

    Integers beyond 2^53 become the nearest double (``9007199254740993`` ->
    ``9007199254740992``), returned as a Python int when finite so it prints
    as JavaScript prints it; an integer too large for a double is ``inf``.
    Floats (already doubles) and smaller integers are returned unchanged.
    """
    if type(value) is int and not -_MAX_SAFE <= value <= _MAX_SAFE:
        try:
            return int(float(value))
        except OverflowError:  # beyond the largest double: JavaScript's Infinity
            return float("inf") if value > 0 else float("-inf")
    return value


def js_increment(value: int) -> int:
    """``value + 1`` in double arithmetic (docs/detection-rules.md §2.2 steps 2-3: ``2**53 + 1`` stays ``2**53``)."""
    return value + 1 if value < _MAX_SAFE else int(float(value) + 1)


def _positive_int(value: Any, default: int) -> int:
    """docs/detection-rules.md §2.2 step 1: a number, an integer (as a double) and > 0; else ``default``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    value = js_double(value)
    if isinstance(value, float) and not value.is_integer():  # also NaN and the infinities
        return default
    return int(value) if value > 0 else default


def js_truthy(value: Any) -> bool:
    """JavaScript's truthiness of a parsed JSON/JSON5 value (docs/detection-rules.md §2.3).

    Falsy: ``false``, ``null``, ``0`` (and ``-0``), NaN and ``""``;
    everything else, including ``"false"``, ``[]`` and ``{}``, is truthy.
    """
    if value is None or value is False or value == "":
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == value and value != 0  # NaN != NaN
    return True


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


def _entry_block(entry: dict | list) -> Any:
    """An ``agents.list`` entry's own ``tools.loopDetection`` block, or None (an array entry has none)."""
    tools = entry.get("tools") if isinstance(entry, dict) else None
    return tools.get("loopDetection") if isinstance(tools, dict) else None


def _entry_agent_id(entry: dict | list) -> str | None:
    """The normalised id an ``agents.list`` entry is looked up by (docs/detection-rules.md §2.4).

    An array entry (an object in JavaScript, with no ``id``) and an entry whose
    ``id`` is absent, null or blank normalise to ``main``; None for an id that
    is not a string (OpenClaw's normalisation cannot take it: not a candidate).
    """
    entry_id = entry.get("id") if isinstance(entry, dict) else None
    if entry_id is None:
        return "main"
    return normalize_agent_id(entry_id) if isinstance(entry_id, str) else None


class OpenClawConfig:
    """The loop-detection part of an OpenClaw config, resolved per agent.

    Arguments:
        raw: the parsed config (``{"tools": {"loopDetection": ...}, "agents":
            {"list": [...]}, "options": {...}}``); other keys are ignored.
    Settings per agent id are computed once and cached.
    """

    __slots__ = ("raw", "channel_send_tools", "fleet", "profile", "_agent_profiles", "_global", "_agents",
                 "_entries", "_cache")

    def __init__(self, raw: Mapping[str, Any] | None = None, profile: str | None = None) -> None:
        raw = dict(raw or {})
        self.raw = raw
        tools = raw.get("tools")
        self._global = tools.get("loopDetection") if isinstance(tools, dict) else None
        agents = raw.get("agents")
        agent_list = agents.get("list") if isinstance(agents, dict) else None
        # candidates: the entries that are objects in JavaScript's sense, arrays included (docs/detection-rules.md §2.4),
        # with the normalised id each is looked up by
        self._agents: list[tuple[str, dict | list]] = [
            (agent_id, entry) for entry in (agent_list if isinstance(agent_list, list) else ())
            if isinstance(entry, (dict, list)) and (agent_id := _entry_agent_id(entry)) is not None
        ]
        # 2026.9.6's roster (docs/detection-rules.md §11.2.4): when ``agents.entries`` is present it is the only
        # roster (``agents.list`` is not read, and an entries value that is not an object finds no agent); an
        # entry is an object that is not an array, found by its normalised key, the first in JavaScript's key order
        entries = agents.get("entries") if isinstance(agents, dict) else None
        self._entries: dict[str, Any] | None = None if not isinstance(agents, dict) or "entries" not in agents else {}
        if self._entries is not None and isinstance(entries, dict):
            for key in _js_key_order(entries):
                if isinstance(entries[key], dict):
                    self._entries.setdefault(normalize_agent_id(key), entries[key])
        options = raw.get("options")
        # the default profile (``profile`` overrides ``options.profile``: a conformance scenario's) and per agent
        self.profile, self._agent_profiles = _profiles_of(options)
        if profile is not None:
            problem = check_profile(profile)
            if problem:
                raise ValueError(f"profile: {problem}")
            self.profile = profile
        names = options.get("channelSendTools") if isinstance(options, dict) else None
        self.channel_send_tools = frozenset(
            name.strip().lower() for name in names or () if isinstance(name, str)
        )
        self.fleet: FleetSettings = fleet_settings(raw)  # options.fleet: loopwatch's, not OpenClaw's
        self._cache: dict[str | None, LoopDetectionSettings] = {}

    @property
    def smallest_warning_threshold(self) -> int:
        """The lowest resolved ``warningThreshold`` over the global block and every agent (of ``agents.list``,
        ``agents.entries`` and ``options.agentProfiles``), under either profile (an event may name its own)."""
        ids = [agent_id for agent_id, _ in self._agents]
        ids += [*(self._entries or ()), *self._agent_profiles]
        return min(self.for_agent(agent_id, profile).warning_threshold
                   for agent_id in [None, *ids] for profile in PROFILES)

    @property
    def agent_profiles(self) -> dict[str, str]:
        """``options.agentProfiles`` as read: normalised agent id -> profile."""
        return dict(self._agent_profiles)

    def profile_for(self, agent_id: str | None, event_profile: str | None = None) -> str:
        """The profile events of ``agent_id`` are judged by: the event's own ``profile`` field, else
        ``options.agentProfiles`` (by normalised agent id), else the default (``options.profile``)."""
        if event_profile is not None:
            return event_profile
        if agent_id and self._agent_profiles:
            return self._agent_profiles.get(normalize_agent_id(agent_id), self.profile)
        return self.profile

    @property
    def agents_with_blocks(self) -> list[str]:
        """Ids of the ``agents.list`` entries whose own ``tools.loopDetection`` block :meth:`for_agent`
        applies (the first entry of each normalised id, as there), in file order."""
        seen: set[str] = set()
        ids = []
        for agent_id, entry in self._agents:
            if agent_id in seen:
                continue
            seen.add(agent_id)
            if _entry_block(entry) is not None:
                entry_id = entry.get("id") if isinstance(entry, dict) else None
                ids.append(entry_id if isinstance(entry_id, str) and js_trim(entry_id) else agent_id)
        return ids

    def _agent_block(self, agent_id: str) -> Any:
        """The first candidate entry whose normalised id is ``agent_id``'s: its own block, or None."""
        wanted = normalize_agent_id(agent_id)
        for entry_id, entry in self._agents:
            if entry_id == wanted:
                return _entry_block(entry)
        return None

    def for_agent(self, agent_id: str | None, profile: str | None = None) -> LoopDetectionSettings:
        """docs/detection-rules.md §2.4: effective settings for events of ``agent_id``.

        None or ``""``: no lookup, the global block alone; a blank id (``" "``)
        is looked up as ``main``. ``profile`` is the event's ``profile``
        field (None: the agent's, :meth:`profile_for`).
        """
        key: Any = agent_id if profile is None else (profile, agent_id)
        try:
            return self._cache[key]
        except KeyError:
            pass
        is_2026_9 = self.profile_for(agent_id, profile) == OPENCLAW_2026_9_6
        if isinstance(agent_id, str) and agent_id:
            if is_2026_9:  # docs/detection-rules.md §11.2.4: another agent lookup and overlay
                block = merge_blocks_2026_9(self._global, self._agent_block_2026_9(agent_id))
            else:
                block = merge_blocks(self._global, self._agent_block(agent_id))
        else:
            block = self._global if isinstance(self._global, dict) else None
        settings = self._cache[key] = (resolve_2026_9 if is_2026_9 else resolve)(block)
        return settings

    def _agent_block_2026_9(self, agent_id: str) -> Any:
        """docs/detection-rules.md §11.2.4: with ``agents.entries`` present, its entry for the id (or none);
        without it, ``agents.list`` as in 2026.7."""
        if self._entries is None:
            return self._agent_block(agent_id)
        entry = self._entries.get(normalize_agent_id(agent_id))
        return _entry_block(entry) if entry is not None else None


def _js_key_order(obj: Mapping[str, Any]) -> list[str]:
    """The keys of a parsed JSON object in the order JavaScript enumerates them: array-index keys
    (canonical integers below 2**32 - 1) first, ascending, then the others as inserted."""
    indices = [key for key in obj if isinstance(key, str) and key.isdigit() and key.isascii()
               and (key == "0" or key[0] != "0") and int(key) < 2**32 - 1]
    if not indices:
        return [key for key in obj if isinstance(key, str)]
    index_set = set(indices)
    return sorted(indices, key=int) + [key for key in obj if isinstance(key, str) and key not in index_set]


def load_config(path: str | Path | None, *, strict: bool = VALIDATE_BY_DEFAULT,
                profile: str | None = None) -> OpenClawConfig:
    """Read an ``openclaw.json`` (JSON5) and return its loop-detection config.

    Arguments:
        path: the file; None gives OpenClaw's defaults (detection disabled).
        strict: validate as OpenClaw does at load time (docs/detection-rules.md §2.1).
        profile: the default profile instead of the file's ``options.profile`` (a command's ``--profile``);
            validation follows it.
    Raises:
        ConfigError: the file is not UTF-8 JSON5, not an object, or fails validation.
        OSError: the file cannot be read.
    """
    if path is None:
        return OpenClawConfig({}, profile=profile)
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
        validate(raw, str(path), profile)
    return OpenClawConfig(raw, profile=profile)
