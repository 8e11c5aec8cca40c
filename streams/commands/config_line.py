"""The loop-detection settings a command runs with, as one line on stderr (worker, replay, report).

Detection that is off says nothing by itself: OpenClaw's defaults run the
post-compaction guard only, so a replay without ``--config``, or with a file
whose keys are misspelt, gives verdicts of ``allow`` and no error. Each command
that applies the engine prints :func:`describe_config` at start, and
:func:`unread_warning` when the file holds nothing loop detection reads.
"""

from __future__ import annotations

import difflib

from typing import Any

import click

__all__ = ["describe_config", "unread_warning", "announce_config"]

_READ = ("tools", "agents", "options", "policies")  # the top-level keys the engine reads
_NAMED = 10  # unread keys named in the warning; a real openclaw.json has many


def describe_config(path: Any, engine: Any) -> str:
    """One line: which config is in effect (``path``; None: no --config), its global loop-detection
    settings (docs/detection-rules.md §2.2), the agents whose own blocks overlay them (docs/detection-rules.md §2.4) and loopwatch's own
    policies (:mod:`streams.detection.policies`), for the :class:`streams.detection.Engine` ``engine``
    (None, or ignored, without a path)."""
    from streams.detection.config import DEFAULTS

    if path is None or engine is None:
        where, effective, block = "no --config", DEFAULTS, None
        if engine is not None:  # OpenClaw's defaults, under the profile a --profile chose
            effective = engine.config.for_agent(None)
    else:
        tools = engine.config.raw.get("tools")
        block = tools.get("loopDetection") if isinstance(tools, dict) else None
        where, effective = f"config {path}", engine.config.for_agent(None)
    enabled = {True: "true", False: "false", None: "unset (rolling detectors off, guard on)"}[effective.enabled]
    text = (f"{where}: loopDetection enabled={enabled}, historySize={effective.history_size}, "
            f"warningThreshold={effective.warning_threshold}, criticalThreshold={effective.critical_threshold}, "
            f"unknownToolThreshold={effective.unknown_tool_threshold}, "
            f"globalCircuitBreakerThreshold={effective.global_circuit_breaker_threshold}, "
            f"postCompactionGuard.windowSize={effective.window_size}")
    text += _profiles(engine)
    if path is None or engine is None:
        return text
    if block is None:
        text += " -- the file has no tools.loopDetection block: OpenClaw's defaults apply"
    agents = engine.config.agents_with_blocks
    if agents:  # their events resolve other settings (docs/detection-rules.md §2.4)
        text += f"; agents with their own block, overlaid on it: {', '.join(agents)}"
    policies = engine.policies
    if policies is not None:  # loopwatch's own rules beyond OpenClaw's (streams.detection.policies)
        text += f"; policies: {'; '.join(policies.config.summary)}"
    options = engine.config.raw.get("options")
    if isinstance(options, dict) and "fleet" in options:  # loopwatch's fleet view (streams.detection.fleet)
        fleet = engine.config.fleet
        text += ("; fleet view: off" if not fleet.enabled else
                 f"; fleet view: minRuns={fleet.min_runs} in {fleet.window_s} s windows every {fleet.step_s} s, "
                 f"signature={fleet.signature}, count={fleet.count}, breaker={fleet.breaker}")
    return text


def _profiles(engine: Any) -> str:
    """``; profile ...`` when the engine's default profile is not the default one, or agents have their own
    (streams.detection.profiles); else nothing."""
    from streams.detection.profiles import DEFAULT_PROFILE, OPENCLAW_2026_9_6

    if engine is None:
        return ""
    config = engine.config
    text = ""
    if config.profile != DEFAULT_PROFILE:
        fixed = " (thresholds fixed by that release; only enabled is read)" if config.profile == OPENCLAW_2026_9_6 else ""
        text = f"; profile {config.profile}{fixed}"
    agents = config.agent_profiles
    if agents:
        text += "; agents on their own profile: " + ", ".join(f"{agent} {name}" for agent, name in agents.items())
    return text


def unread_warning(path: Any, engine: Any) -> str | None:
    """A warning when the file at ``path`` holds nothing ``engine`` reads (no ``tools.loopDetection``, no
    agent's own block, no ``options.channelSendTools``, no ``policies``), naming its top-level keys that
    are not read (a typo such as ``tool:`` for ``tools:``); None when it holds something, or without a path."""
    if path is None or engine is None:
        return None
    raw = engine.config.raw
    tools, options = raw.get("tools"), raw.get("options")
    if ((isinstance(tools, dict) and "loopDetection" in tools) or engine.config.agents_with_blocks
            or (isinstance(options, dict) and ("channelSendTools" in options or "fleet" in options
                                               or "profile" in options or "agentProfiles" in options))
            or engine.policies is not None):
        return None
    found = []
    unread = [key for key in raw if key not in _READ]
    if unread:
        found.append(f"its top-level keys not read: {_named(unread)}")
    if isinstance(tools, dict) and tools:
        # a typo one level down (tools.loopDetecton) is the likelier mistake: name it
        close = difflib.get_close_matches("loopDetection", [k for k in tools if isinstance(k, str)], n=3, cutoff=0.6)
        found.append(f"tools.{close[0]} is not tools.loopDetection" if close
                     else f"tools holds {_named(list(tools))} but no loopDetection")
    found = "; ".join(found) or ("it is empty" if not raw else "nothing in it is read")
    return (f"warning: {path} holds nothing loop detection reads (no tools.loopDetection block, no agent with "
            f"its own; {found}): OpenClaw's defaults apply, rolling detectors off")


def _named(keys: list[Any]) -> str:
    """The first few keys, then how many more."""
    shown = ", ".join(map(str, keys[:_NAMED]))
    return shown + (f" and {len(keys) - _NAMED} more" if len(keys) > _NAMED else "")


def announce_config(command: str, path: Any, engine: Any, quiet: bool = False) -> None:
    """Print ``loopwatch <command>: <describe_config line>`` on stderr (not when ``quiet``), then the
    :func:`unread_warning`, if any (also when ``quiet``)."""
    if not quiet:
        click.echo(f"loopwatch {command}: {describe_config(path, engine)}", err=True)
    warning = unread_warning(path, engine)
    if warning:
        click.echo(f"loopwatch {command}: {warning}", err=True)
