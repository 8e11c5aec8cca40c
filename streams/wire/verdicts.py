"""The verdict record: what the worker publishes on the verdicts topic for one event, and what offline
replay writes for it (so a replayed file and a topic's records read the same).

The event's identifiers come first (``event_id``, ``key``, ``run_id``, ``session_id``,
``tool_call_id``; then ``event_ts``, ``deadline``, ``source``, ``agent_id``, ``runner``, ``model``,
``usage`` when the event has them), then every field of the engine's verdict (docs/events-and-verdicts.md lists them).
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["verdict_record", "PROBE_RUN", "is_probe"]

PROBE_RUN = "loopwatch-gateway-readyz"
"""The run and session of the gateway's ``/readyz`` probe events (a ``compaction_retry`` sent while no
verdict proves readiness: :class:`streams.runners.gateway.health.Readiness`): no agent's work, so
``loopwatch tail`` hides their records unless ``--show-probes`` and reports leave them out."""


def is_probe(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` (an event or its verdict record) is a gateway's ``/readyz`` probe (run or
    session :data:`PROBE_RUN`)."""
    return record.get("run_id") == PROBE_RUN or record.get("session_id") == PROBE_RUN


def verdict_record(verdict: dict[str, Any], event: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The published verdict: identifiers of the event first, then the engine's verdict."""
    record: dict[str, Any] = {
        "event_id": event.get("event_id"),
        "key": key,
        "run_id": event.get("run_id"),
        "session_id": event.get("session_id"),
        "tool_call_id": event.get("tool_call_id"),
    }
    if "ts" in event:
        record["event_ts"] = event["ts"]
    if "deadline" in event:
        record["deadline"] = event["deadline"]  # the runner's: when it stopped waiting (fail-open)
    if "source" in event:
        record["source"] = event["source"]  # where a recorded session had the call (importers)
    if event.get("agent_id") is not None:
        record["agent_id"] = event["agent_id"]  # whose call: what reports group by
    if "runner" in event:
        record["runner"] = event["runner"]  # which runner's recording (importers), what reports group by
    if event.get("model") is not None:
        record["model"] = event["model"]  # the model that asked for the call (importers), what reports group by
    if isinstance(event.get("usage"), dict):
        record["usage"] = event["usage"]  # tokens of the model turn that asked for it: reports' wasted tokens
    record.update(verdict)
    return record
