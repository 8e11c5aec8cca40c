"""What a tool call or its result leaves in the session: outcome records, the guard's observation, warning
buckets, pending and blocked calls (docs/detection-rules.md §3 steps 4-7, §6, §9, §11.3.1).

Functions of :class:`~streams.detection.engine.Engine`'s tool cycle that change a
:class:`~streams.detection.state.SessionState` or read what it remembers; pure, no I/O.
"""

from __future__ import annotations

from typing import Any, Mapping

from .config import LoopDetectionSettings
from .detectors import Detection
from .events import blocked_key, has_session
from .canonical import plain_outcome_hex as _plain_outcome_hex
from .fingerprint import PROFILE_PLAIN, PROFILE_WRITE, outcome_hash, unknown_tool_name
from .outcomes_2026_9 import KIND_VETO, MARKER_NEEDLE, OUTCOME_KINDS, Outcome, outcome_2026_9
from .post_compaction_guard import abort_evidence, guard_status, observe
from .state import CallRecord, PendingCall, RunState, SessionState, hash_key

__all__ = ["NOT_RECORDED", "REFUSALS", "dedupe", "record_outcome", "outcome_of", "unveto", "rebind_pending",
           "answered_call", "note_refusal", "correction", "evidence_refs"]

NOT_RECORDED = {"recorded": False, "result_hash": None, "unknown_tool_name": None}


def dedupe(state: SessionState, raw_run: str | None, detection: Detection) -> dict[str, Any]:
    """docs/detection-rules.md §6: emit a warning only when its bucket (count // 10) rises."""
    key = f"{raw_run}:{detection.warning_key}" if raw_run else detection.warning_key
    bucket = detection.count // 10
    emitted = bucket > state.warning_buckets.get(key, 0)
    if emitted:
        state.store_warning_bucket(key, bucket)
    return {"emitted": emitted, "key": key, "bucket": bucket}

def record_outcome(verdict: dict[str, Any], state: SessionState, settings: LoopDetectionSettings,
                    run: RunState, tool: str, call_hash: str, call_id: str | None, run_id: str | None,
                    outcome: Outcome | None, ref: Any, append_call_id: str | None = None,
                    call_key: str | None = None, fresh: bool = False) -> dict[str, Any]:
    """docs/detection-rules.md §3 steps 6-7: attach or append the outcome (:func:`outcome_of`; None: none recorded), feed the guard.

    Sets the verdict's ``outcome``, ``guard`` and ``run_aborted`` (and ``evidence`` of a guard abort); returns
    the ``guard`` field.

    ``append_call_id`` is the call id a record appended here carries (a
    result with no pending call keeps the event's, docs/detection-rules.md §9). The history is
    trimmed to ``settings.history_size`` either way (docs/detection-rules.md §8.1). A record with an
    outcome kind is never matched, and only an outcome with a result hash is
    observed by the guard (docs/detection-rules.md §11.3.1 steps 6-7; under 2026.7 every
    recorded outcome has a hash and no kind). ``fresh``: the call itself is recorded now, with this
    outcome (the record it would attach to is its own, newest of all); ``call_key`` is ``hash_key(call_hash)``.
    """
    if outcome is None:
        verdict["outcome"] = dict(NOT_RECORDED)
        guard = verdict["guard"] = guard_status(run)
        verdict["run_aborted"] = run.aborted
        return guard
    result_hash, unknown, kind, no_progress, failure_hash = outcome
    if call_key is None:
        call_key = hash_key(call_hash)
    if fresh:
        state.append(CallRecord(tool, call_hash, None, run_id, result_hash, unknown, ref, call_key, None, kind,
                                no_progress, hash_key(failure_hash) if failure_hash is not None else None),
                     settings.history_size)
    else:
        _attach_or_append(state, settings, tool, call_hash, call_key, call_id, run_id, outcome, ref,
                          append_call_id)
    shown = verdict["outcome"] = {"recorded": True, "result_hash": result_hash, "unknown_tool_name": unknown}
    if no_progress:
        shown["no_progress"] = True
    if kind:
        shown["outcome_kind"] = OUTCOME_KINDS[kind]
    if failure_hash is not None:
        shown["failure_identity_hash"] = failure_hash
    # observe() of an unarmed guard is its status: asked only of an armed one
    guard = verdict["guard"] = observe(run, tool, call_hash, result_hash, ref) \
        if result_hash is not None and run.remaining > 0 else guard_status(run)
    verdict["run_aborted"] = run.aborted
    if guard["abort"]:
        verdict["evidence"] = abort_evidence(run, tool, call_hash, result_hash)
    return guard


def _attach_or_append(state: SessionState, settings: LoopDetectionSettings, tool: str, call_hash: str,
                      call_key: str, call_id: str | None, run_id: str | None, outcome: Outcome, ref: Any,
                      append_call_id: str | None) -> None:
    """docs/detection-rules.md §3 step 6: the outcome attaches to the newest pending record of the same run, tool,
    args (and call id, when the outcome has one) without an outcome kind, else it is appended as a record of its own."""
    result_hash, unknown, kind, no_progress, failure_hash = outcome
    for record in reversed(state.history):
        if (record.result_key is None and record.run_id == run_id and record.tool == tool
                and record.args_key == call_key and (not call_id or record.call_id == call_id)
                and not record.kind):
            record.set_result(result_hash, unknown, ref, kind, no_progress, failure_hash)
            # trimmed after an attached outcome too: after a merge, or under a smaller cap
            if len(state.history) > settings.history_size:
                state.trim(settings.history_size)
            break
    else:
        state.append(CallRecord(tool, call_hash, append_call_id, run_id, result_hash, unknown, ref, kind=kind,
                                no_progress=no_progress,
                                failure_key=hash_key(failure_hash) if failure_hash is not None else None),
                     settings.history_size)


def unveto(state: SessionState, call_id: str) -> None:
    """2026.9.6: the newest veto record of ``call_id``, still without an outcome, turns into its call's record."""
    for record in reversed(state.history):
        if record.call_id == call_id and record.kind == KIND_VETO and record.result_key is None:
            record.unveto()
            state.maybe_pending = True
            return


def outcome_of(profile: int, result: Any, error: Any, is_2026_9: bool = False) -> Outcome | None:
    """The :class:`~streams.detection.outcomes_2026_9.Outcome` to record (docs/detection-rules.md §4.3, §4.4; docs/detection-rules.md §11.4.3 for
    ``is_2026_9``); None when nothing is recorded.

    Raises RecursionError for a result or thrown value nested too deeply to hash.
    """
    if (profile == PROFILE_PLAIN or profile == PROFILE_WRITE) and error is None and _plain_outcome_hex is not None:
        # (2026.9.6's write: the plain rule unless details.changed is false, which the C call leaves to Python)
        # the usual result in one C call (None: another shape, or 2026.9.6's marker in it: the Python path)
        result_hash = _plain_outcome_hex(result, MARKER_NEEDLE if is_2026_9 else None)
        if result_hash is not None:
            return _new_tuple(Outcome, (result_hash, None, 0, False, None))
    if is_2026_9:
        return outcome_2026_9(profile, result, error)
    result_hash = outcome_hash(profile, result, error)
    if result_hash is None:
        return None
    # tuple.__new__: an Outcome without the named tuple's Python-level __new__ (once per recorded outcome)
    return _new_tuple(Outcome, (result_hash, unknown_tool_name(error) if error is not None else None, 0, False, None))


_new_tuple = tuple.__new__


def rebind_pending(state: SessionState, run_id: str | None, tool: str, call_id: str | None, call_hash: str,
                    call_key: str) -> None:
    """docs/detection-rules.md §11.3.1 step 5(a): before this call's record exists, the run's newest pending record of the same
    tool (no result hash, no outcome kind) and the same call id (any, when this call has none) takes this call's
    args hash. Called only while ``state.maybe_pending``."""
    pending = False
    for record in reversed(state.history):
        if record.result_key is None and not record.kind:
            pending = True
            if record.run_id == run_id and record.tool == tool and (not call_id or record.call_id == call_id):
                if record.args_key != call_key:
                    state.rebind(record, call_hash)
                return
    state.maybe_pending = pending


def answered_call(event: Mapping[str, Any], state: SessionState | None,
                   blocked: Mapping[str, PendingCall]) -> tuple[str | None, PendingCall | None]:
    """What a ``tool_result`` answers (docs/detection-rules.md §9), in OpenClaw's order: ``(None, call)``
    for the pending call of its ``tool_call_id`` in its session's state (none without a call id or a
    session); else ``(blocked key, the blocked call)`` when its run id and call id give the key of a
    remembered blocked call, in whatever session; else ``(None, None)``."""
    call_id = event.get("tool_call_id")
    if not call_id:
        return None, None
    if state is not None and has_session(event):
        pending = state.calls.get(call_id)
        if pending is not None:
            return None, pending
    key = blocked_key(event.get("run_id"), call_id)
    hit = blocked.get(key)
    return (key, hit) if hit is not None else (None, None)


REFUSALS = ("block", "abort")


def note_refusal(event: Mapping[str, Any], state: SessionState | None, blocked: Mapping[str, PendingCall],
                  verdict: Mapping[str, Any]) -> None:
    """Remember on a deferred call's entry that loopwatch refused it (``verdict`` ``block`` or ``abort``).

    The entry is the one this call just made: the blocked call's (by :func:`blocked_key`) when the
    engine blocked it, else the pending call's (by call id) when a loopwatch rule or the run's end
    refused a call OpenClaw allows. A call without an id has neither, and nothing is remembered.
    """
    call_id = event.get("tool_call_id")
    if not call_id:
        return
    if verdict.get("blocked") is True:
        entry = blocked.get(blocked_key(event.get("run_id"), call_id))
    else:
        entry = state.calls.get(call_id) if state is not None else None
    if entry is not None:
        by = verdict.get("decided_by") or {}
        entry.refused = [verdict["verdict"], event.get("event_id"), by.get("detector")]


def correction(refused: list, call_id: Any) -> dict[str, Any]:
    """The ``corrects`` field of a late result whose call loopwatch had refused: which verdict, of which
    call event, did not happen (the runner ran the call). ``refused`` as :class:`PendingCall` keeps it."""
    verdict, event_id, by = refused
    return {"event_id": event_id, "tool_call_id": call_id, "verdict": verdict, "by": by}


def evidence_refs(records: list[CallRecord]) -> list[Any]:
    return [record.ref for record in records if record.ref is not None]
