"""Conformance scenarios: event sequences with the verdict OpenClaw gives each event.

A scenario file is JSON Lines, one scenario per line (docs/detection-rules.md §10):
``{"name", "description", "config", "events", "expected"}`` where
``expected[i]`` is OpenClaw's outcome for ``events[i]``, and an optional
``profile`` names the OpenClaw behaviour (absent: ``openclaw-2026.7``;
:mod:`~streams.detection.profiles`). Every scenario starts from empty state. :func:`run_scenario` replays one through the engine and
returns the first difference, if any.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from streams.wire.codecs import json_loads
from streams.detection import Engine, OpenClawConfig, SessionStore

__all__ = ["SPEC_FIELDS", "Mismatch", "load_scenarios", "scenario_lines", "scenario_config", "run_scenario",
           "spec_view"]

# The verdict fields a scenario's ``expected`` entries pin (docs/detection-rules.md §10; the 2026.9.6 profile's, docs/detection-rules.md §11.9/10).
SPEC_FIELDS = frozenset({
    "type", "tool_name", "args_hash", "decision", "detection", "warning", "blocked", "block_reason",
    "recorded_call", "outcome", "guard", "run_aborted", "ignored",
    "block_text", "tool_loop_recovery", "veto_recorded", "run_terminated",
})


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The first event of a scenario whose verdict differs from the expected one."""

    scenario: str
    event: int
    field: str
    expected: Any
    actual: Any

    def __str__(self) -> str:
        return (f"{self.scenario}: event {self.event}: {self.field}: expected "
                f"{json.dumps(self.expected, ensure_ascii=False)}, got {json.dumps(self.actual, ensure_ascii=False)}")


def spec_view(verdict: dict[str, Any]) -> dict[str, Any]:
    """The part of a verdict record that scenarios compare."""
    return {key: value for key, value in verdict.items() if key in SPEC_FIELDS}


def load_scenarios(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the scenarios of a file. Raises ``ValueError`` naming the line of a bad one."""
    for number, scenario, error in scenario_lines(path):
        if scenario is None:
            raise ValueError(f"{path}:{number}: {error}")
        yield scenario


def scenario_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """Yield ``(line, scenario, None)`` per scenario of a file, or ``(line, None, reason)`` for a bad line."""
    with open(path, "rb") as handle:  # bytes: a line that is not UTF-8 is one bad line, not the file's end
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                scenario = json_loads(line)
            except ValueError as exc:
                yield number, None, f"not JSON: {exc}"
                continue
            if not isinstance(scenario, dict):
                yield number, None, f"a scenario must be an object, got {type(scenario).__name__}"
                continue
            missing = {"name", "events", "expected"} - set(scenario)
            if missing:
                yield number, None, f"scenario lacks {', '.join(sorted(missing))}"
                continue
            yield number, scenario, None


def _first_difference(expected: Any, actual: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            if key not in actual or key not in expected or expected[key] != actual[key]:
                sub = _first_difference(expected.get(key), actual.get(key), f"{path}.{key}" if path else key)
                if sub is not None:
                    return sub
        return None
    return None if expected == actual else (path, expected, actual)


def scenario_config(scenario: dict[str, Any]) -> OpenClawConfig:
    """The config a scenario is replayed with: its ``config``, judged by its ``profile`` (absent: the default).

    Raises ``ValueError`` for a profile name loopwatch does not know.
    """
    return OpenClawConfig(scenario.get("config") or {}, profile=scenario.get("profile"))


def run_scenario(scenario: dict[str, Any]) -> Mismatch | None:
    """Replay one scenario from empty state; the first mismatch, or None if all events agree."""
    try:
        config = scenario_config(scenario)
    except ValueError as exc:
        return Mismatch(scenario["name"], 0, "(profile)", "a known profile", str(exc))
    store = SessionStore(Engine(config))
    events, expected = scenario["events"], scenario["expected"]
    name = scenario["name"]
    if len(events) != len(expected):
        return Mismatch(name, min(len(events), len(expected)), "(length)", len(expected), len(events))
    for index, (event, want) in enumerate(zip(events, expected)):
        try:
            got = spec_view(store.process(event))
        except ValueError as exc:
            return Mismatch(name, index, "(error)", "a verdict", str(exc))
        want = {key: value for key, value in want.items() if key != "event"}
        difference = _first_difference(want, got, "")
        if difference is not None:
            return Mismatch(name, index, *difference)
    return None
