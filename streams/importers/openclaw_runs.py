"""How an OpenClaw transcript's entries are cut into runs (see :mod:`streams.importers.openclaw`).

A run is one agent invocation; OpenClaw's detectors scope their history by it (docs/detection-rules.md §8.2) and
its post-compaction guard belongs to it (docs/detection-rules.md §7). The transcript carries no run id on its
messages (``shared/realdata/openclaw/SOURCE.md``, "Runs and runId"), so runs come from:

1. the trajectory sidecar, when there is one (:class:`Sidecar`, :func:`sidecar_runs`): each run's
   ``context.compiled`` names the transcript leaf it started from;
2. otherwise (:func:`segment_runs`): a user message starts a run, and an
   ``openclaw:prompt-error`` / ``openclaw:bootstrap-context:full`` entry names the run it closes
   (``data.runId``), except a model-fallback retry (:func:`fallback_markers`), which goes on
   with the same run.

Each function takes the live entries as ``[(line, entry)]`` in file order and gives or fills a
``{line: run_id}`` map.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any

from .events import ErrorHandler, iso_to_ms, read_jsonl

__all__ = ["Sidecar", "segment_runs", "sidecar_runs", "message_runs", "fallback_markers", "FALLBACK_GAP_MS"]

# custom entries written at the end of the run whose id they carry (SOURCE.md "Runs and runId")
_RUN_CLOSERS = frozenset({"openclaw:prompt-error", "openclaw:bootstrap-context:full"})
# A fallback model's snapshot follows the failed attempt's prompt-error within this many
# milliseconds (recorded: 0.4-4 s); the next heartbeat's snapshot comes minutes later.
FALLBACK_GAP_MS = 30_000
_NO_PROMPT = object()


class Sidecar:
    """What loopwatch needs from a trajectory sidecar: run leaves, session key, agent id."""

    def __init__(self) -> None:
        self.runs: list[tuple[str | None, str]] = []  # (transcriptLeafId, runId), run order
        self.session_key: str | None = None
        self.agent_id: str | None = None

    @classmethod
    def load(cls, path: Path, on_error: ErrorHandler | None) -> Sidecar:
        car = cls()
        seen: set[str] = set()
        for _lineno, rec in read_jsonl(path, on_error):
            run_id = rec.get("runId")
            data = rec.get("data") if isinstance(rec.get("data"), dict) else {}
            if car.session_key is None and isinstance(rec.get("sessionKey"), str) and rec["sessionKey"]:
                car.session_key = rec["sessionKey"]
            if rec.get("type") == "session.started" and car.agent_id is None:
                car.agent_id = data.get("agentId") if isinstance(data.get("agentId"), str) else None
            if rec.get("type") == "context.compiled" and isinstance(run_id, str) and run_id not in seen:
                seen.add(run_id)
                leaf = data.get("transcriptLeafId")
                car.runs.append((leaf if isinstance(leaf, str) else None, run_id))
        return car


def _is_user(entry: dict[str, Any]) -> bool:
    return entry.get("type") == "message" and (entry.get("message") or {}).get("role") == "user"


def fallback_markers(entries: list[tuple[int, dict[str, Any]]]) -> set[int]:
    """Lines of ``openclaw:prompt-error`` entries after which OpenClaw retried the run on a fallback model.

    OpenClaw's model fallback runs the same run again on the next model: the failed attempt's
    ``openclaw:prompt-error`` entry, a ``model-snapshot`` of the fallback model within
    ``FALLBACK_GAP_MS``, then the same prompt again (only non-message entries, such as a
    compaction, in between). The retry's own run closer carries the same ``runId``. A new run
    (the next heartbeat) takes a fresh snapshot minutes later.
    """
    markers: set[int] = set()
    prompt: Any = _NO_PROMPT  # content of the last user message
    for i, (lineno, entry) in enumerate(entries):
        if _is_user(entry):
            prompt = entry["message"].get("content")
        if not (entry.get("type") == "custom" and entry.get("customType") == "openclaw:prompt-error"):
            continue
        if i + 1 >= len(entries):
            continue
        snapshot = entries[i + 1][1]
        if snapshot.get("type") != "custom" or snapshot.get("customType") != "model-snapshot":
            continue
        t0, t1 = iso_to_ms(entry.get("timestamp")), iso_to_ms(snapshot.get("timestamp"))
        if t0 is None or t1 is None or not 0 <= t1 - t0 <= FALLBACK_GAP_MS:
            continue
        following = next((e for _, e in entries[i + 2:] if e.get("type") == "message"), None)
        if following is not None and _is_user(following) and following["message"].get("content") == prompt:
            markers.add(lineno)
    return markers


def segment_runs(session_id: str, entries: list[tuple[int, dict[str, Any]]]) -> dict[int, str]:
    """Run id per line from user messages and run-closing custom entries (no sidecar)."""
    run_of: dict[int, str] = {}
    segment: list[int] = []
    has_user = False
    named: str | None = None
    retrying = False  # a fallback retry of the run is under way: its repeated prompt starts no run
    fallbacks = fallback_markers(entries)

    def close() -> None:
        nonlocal segment, has_user, named
        if segment:
            rid = named or f"{session_id}#L{segment[0]}"
            for ln in segment:
                run_of[ln] = rid
        segment, has_user, named = [], False, None

    for lineno, entry in entries:
        if _is_user(entry):
            if has_user and not retrying:
                close()
            retrying = False
        segment.append(lineno)
        has_user = has_user or _is_user(entry)
        data = entry.get("data")
        if entry.get("type") == "custom" and entry.get("customType") in _RUN_CLOSERS and isinstance(data, dict):
            if isinstance(data.get("runId"), str) and data["runId"].strip():
                named = data["runId"]
                if lineno in fallbacks:
                    retrying = True
                else:
                    close()
    close()
    return run_of


def sidecar_runs(car: Sidecar, entries: list[tuple[int, dict[str, Any]]], run_of: dict[int, str]) -> None:
    """Overwrite ``run_of`` with the sidecar's runs from its first known leaf onwards."""
    line_of = {e.get("id"): ln for ln, e in entries}
    starts: list[tuple[int, str]] = []
    for leaf, run_id in car.runs:
        if leaf is None:
            starts.append((0, run_id))  # run started on an empty transcript
        elif leaf in line_of:
            starts.append((line_of[leaf], run_id))
    if not starts:
        return
    starts.sort(key=lambda s: s[0])
    keys = [s[0] for s in starts]
    for ln, _entry in entries:
        i = bisect.bisect_left(keys, ln) - 1  # last run whose leaf is strictly before this line
        if i >= 0:
            run_of[ln] = starts[i][1]


def _run_of_entry(entry: dict[str, Any]) -> str | None:
    message = entry.get("message")
    meta = message.get("__openclaw") if isinstance(message, dict) else None
    run_id = meta.get("runId") if isinstance(meta, dict) else None
    return run_id if isinstance(run_id, str) and run_id.strip() else None


def message_runs(session_id: str, live: list[tuple[int, dict[str, Any]]]) -> dict[int, str]:
    """Run id per line from the ``__openclaw.runId`` OpenClaw 2026.9.x writes on every message of a run.

    An entry without one (a compaction, a custom entry) belongs to the run of the next message that
    has one (a compaction retries the prompt of the run that follows it), else of the last one before
    it; with no run id at all the session is cut as :func:`segment_runs` cuts it.
    """
    own = [(line, _run_of_entry(entry)) for line, entry in live]
    if not any(run for _, run in own):
        return segment_runs(session_id, live)
    run_of: dict[int, str] = {}
    following: str | None = None
    for line, run in reversed(own):
        following = run or following
        if following is not None:
            run_of[line] = following
    preceding: str | None = None
    for line, run in own:
        preceding = run or preceding
        if line not in run_of and preceding is not None:
            run_of[line] = preceding
    return run_of
