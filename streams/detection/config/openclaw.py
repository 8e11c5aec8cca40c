"""The loop-detection part of an OpenClaw config, looked up per agent: :class:`OpenClawConfig`
(docs/detection-rules.md §2.4; 2026.9.6's roster ``agents.entries``: §11.2.4).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..fingerprint import js_trim
from ..fleet import FleetSettings, fleet_settings
from ..profiles import OPENCLAW_2026_9_6, PROFILES, check_profile
from .js import js_key_order
from .resolve import merge_blocks, merge_blocks_2026_9, normalize_agent_id, profiles_of, resolve, resolve_2026_9
from .settings import LoopDetectionSettings

__all__ = ["OpenClawConfig", "SETTINGS_CACHE_SIZE"]

# Resolved settings kept per agent id (and event profile); beyond it the cache starts again empty.
SETTINGS_CACHE_SIZE = 4096

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
    Settings per agent id are computed once and cached, for up to
    :data:`SETTINGS_CACHE_SIZE` ids at a time.
    """

    __slots__ = ("raw", "channel_send_tools", "fleet", "profile", "_agent_profiles", "_global", "_agents",
                 "_entries", "settings_cache")

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
            for key in js_key_order(entries):
                if isinstance(entries[key], dict):
                    self._entries.setdefault(normalize_agent_id(key), entries[key])
        options = raw.get("options")
        # the default profile (``profile`` overrides ``options.profile``: a conformance scenario's) and per agent
        self.profile, self._agent_profiles = profiles_of(options)
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
        # for_agent's answers by agent id, or (profile, agent id) for an event's own profile: read-only outside.
        # Agent ids come from events (a runner may name each sub-agent by its thread id), so it is bounded.
        self.settings_cache: dict[Any, LoopDetectionSettings] = {}

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
            return self.settings_cache[key]
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
        if len(self.settings_cache) >= SETTINGS_CACHE_SIZE:
            self.settings_cache.clear()  # rebuilt from the config at a few microseconds per agent id
        settings = self.settings_cache[key] = (resolve_2026_9 if is_2026_9 else resolve)(block)
        return settings

    def _agent_block_2026_9(self, agent_id: str) -> Any:
        """docs/detection-rules.md §11.2.4: with ``agents.entries`` present, its entry for the id (or none);
        without it, ``agents.list`` as in 2026.7."""
        if self._entries is None:
            return self._agent_block(agent_id)
        entry = self._entries.get(normalize_agent_id(agent_id))
        return _entry_block(entry) if entry is not None else None
