"""Loop detection, exactly as OpenClaw's ``tools.loopDetection`` and
post-compaction guard decide it. Pure: no I/O, no Kafka, no Faust.

Entry points: :class:`Engine` (one event against one state),
:class:`SessionStore` (many sessions in one process), :func:`load_config`.
"""

from .canonical import UNDEFINED, digest, stable_stringify
from .config import ConfigError, LoopDetectionSettings, OpenClawConfig, load_config, validate
from .engine import Engine
from .events import EVENT_TYPES, EventError, state_key
from .sessions import SessionStore
from .state import SessionState

__all__ = [
    "UNDEFINED",
    "digest",
    "stable_stringify",
    "ConfigError",
    "LoopDetectionSettings",
    "OpenClawConfig",
    "load_config",
    "validate",
    "EVENT_TYPES",
    "Engine",
    "EventError",
    "state_key",
    "SessionStore",
    "SessionState",
]
