"""What the detectors and the post-compaction guard use for one agent: :class:`LoopDetectionSettings`
and OpenClaw's defaults (docs/detection-rules.md §2.2, §2.3; 2026.9.6's fixed values §11.2.2).

:func:`streams.detection.config.resolve.resolve` makes one from a merged ``tools.loopDetection`` block.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..profiles import DEFAULT_PROFILE, OPENCLAW_2026_9_6

__all__ = ["LoopDetectionSettings", "DEFAULTS", "DEFAULTS_2026_9", "VALIDATE_BY_DEFAULT", "VALIDATE_DESCRIPTION"]

DEFAULT_HISTORY_SIZE = 30
DEFAULT_WARNING_THRESHOLD = 10
DEFAULT_CRITICAL_THRESHOLD = 20
DEFAULT_UNKNOWN_TOOL_THRESHOLD = 10
DEFAULT_GLOBAL_CIRCUIT_BREAKER_THRESHOLD = 30
DEFAULT_WINDOW_SIZE = 3  # postCompactionGuard.windowSize, tool outcomes

# ``--config-validate`` of the worker (a WorkerSettings field), replay and report: one meaning, one default
VALIDATE_BY_DEFAULT = True
VALIDATE_DESCRIPTION = "Validate the config file as OpenClaw does at load time (false = runtime clamping only)."


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

    # derived from ``enabled`` and ``is_2026_9`` once (the engine reads them for every event)
    detectors_enabled: bool = field(init=False, repr=False, compare=False)
    """Rolling detectors run only when ``enabled`` is exactly true."""
    records_calls: bool = field(init=False, repr=False, compare=False)
    """Calls are recorded before execution unless ``enabled`` is exactly false
    (2026.9.6: only when it is exactly true, docs/detection-rules.md §11.2.3)."""
    guard_enabled: bool = field(init=False, repr=False, compare=False)
    """The post-compaction guard runs unless ``enabled`` is exactly false."""

    def __post_init__(self) -> None:
        enabled = self.enabled
        object.__setattr__(self, "detectors_enabled", enabled is True)
        object.__setattr__(self, "records_calls", enabled is True if self.is_2026_9 else enabled is not False)
        object.__setattr__(self, "guard_enabled", enabled is not False)


DEFAULTS = LoopDetectionSettings()
DEFAULTS_2026_9 = LoopDetectionSettings(profile=OPENCLAW_2026_9_6, is_2026_9=True)
