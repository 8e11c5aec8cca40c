"""Verdict records (live from the verdicts topic, or from ``loopwatch replay``) as one line per tool call, to compare.

A call's line: its run, the args hash, OpenClaw's pre-call decision and the detection behind it, loopwatch's
verdict on the call (the strictest of its records: a post-compaction abort comes with the outcome), and the
result hash of its outcome. The live hooks always send a call and its outcome apart (two records), an
importer folds an outcome that follows at once into the call (one record): the line is the same either way.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["calls_of", "E2E_CONFIG", "GUARD_CONFIG"]

# The config of the end-to-end loops: warn at 3, block at 5, and two blocks in a row abort the run.
E2E_CONFIG = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}},
              "policies": {"escalation": {"consecutiveBlocks": 2}}}
# The config of the compaction loops: detectors far off (warn at 10), the guard at OpenClaw's default window (3).
GUARD_CONFIG = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 10, "criticalThreshold": 20}}}


_STRICTNESS = {"ignore": 0, "allow": 1, "warn": 2, "block": 3, "abort": 4}


def calls_of(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``tool_call_id`` -> the call's line (see the module docstring), in the order the calls came."""
    calls: dict[str, dict[str, Any]] = {}
    for record in records:
        kind, call_id = record.get("type"), record.get("tool_call_id")
        outcome = record.get("outcome") or {}
        if kind == "tool_call":
            detection = record.get("detection") or {}
            calls[call_id] = {"run_id": record.get("run_id"), "args_hash": record.get("args_hash"),
                              "verdict": record.get("verdict"), "decision": record.get("decision"),
                              "detector": detection.get("detector"), "count": detection.get("count"),
                              "result_hash": outcome.get("result_hash")}
        elif kind == "tool_result" and call_id in calls:
            calls[call_id]["result_hash"] = outcome.get("result_hash")
            if _STRICTNESS.get(record.get("verdict"), 0) > _STRICTNESS.get(calls[call_id]["verdict"], 0):
                calls[call_id]["verdict"] = record.get("verdict")
    return calls
