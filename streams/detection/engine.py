"""The engine: one event in, one verdict out, OpenClaw's tool cycle step by step.

``Engine.process(event, state)`` applies one event to the state of its
partition key and returns the verdict record. It is deterministic, does no
I/O and changes nothing but ``state``. The Faust worker, the offline replay and
the conformance runner all call it.

Event shapes (Spec §10, the conformance vectors' schema):

* ``tool_call``: ``run_id``, ``session_id``, optional ``session_key``
  (defaults to ``session_id``; explicit null = no session key), optional
  ``agent_id``, ``tool_call_id``, ``tool_name``, ``args`` (absent =
  JavaScript undefined), ``result`` (null = returned nothing), ``error``
  (string = thrown Error message; other non-null = thrown value), optional
  ``outcome_follows``;
* ``tool_result``: ``run_id``, ``session_id``, ``tool_call_id``, ``result``, ``error``;
* ``compaction_retry``: ``run_id``, ``session_id``, optional ``agent_id``.

Verdict records carry the fields of the vectors' ``expected`` entries plus
``verdict`` (allow, warn, block, abort or ignore: what the runner should do)
and ``evidence`` (the ``ref`` values of the records behind a detection).
"""

from __future__ import annotations

from typing import Any, Mapping

from .canonical import UNDEFINED, NotJSONData
from .config import LoopDetectionSettings, OpenClawConfig
from .detectors import CRITICAL, Detection, detect, is_known_poll
from .fingerprint import args_hash, js_trim, normalize_tool_name, outcome_hash, outcome_profile, unknown_tool_name
from .policies import Policies, build as build_policies
from .post_compaction_guard import abort_evidence, arm, guard_status, observe
from .state import CallRecord, PendingCall, RunState, SessionState, hash_key

__all__ = ["Engine", "EventError", "EVENT_TYPES", "validate_event", "state_key", "BLOCKED_RESULT_IGNORED",
           "UNKNOWN_CALL_IGNORED"]

EVENT_TYPES = ("tool_call", "tool_result", "compaction_retry")

BLOCKED_RESULT_IGNORED = "tool call was blocked; no tool result exists in OpenClaw"
UNKNOWN_CALL_IGNORED = "no pending tool call with this tool_call_id (never seen, already answered, or expired)"

# What a result that cannot be matched to its call is reported as: OpenClaw's
# defaults for a missing tool name and missing args.
_NO_CALL_TOOL = "tool"
_NO_CALL_ARGS_HASH = args_hash(_NO_CALL_TOOL, UNDEFINED)

_NOT_RECORDED = {"recorded": False, "result_hash": None, "unknown_tool_name": None}


class EventError(ValueError):
    """An event that does not fit the schema; ``str()`` says which field and why."""


_STRING_FIELDS = ("session_id", "session_key", "run_id", "agent_id", "tool_call_id", "tool_name", "event_id")


def _check_envelope(event: Mapping[str, Any]) -> None:
    """Field types every event kind shares, and a session to belong to.

    Raises EventError. Absent and null are allowed where OpenClaw has a default
    (Spec §10: ``session_key`` null = no session key; a missing tool name is
    ``tool``), but an event with neither session id nor session key belongs
    to no session at all and is rejected.
    """
    get = event.get
    for field in _STRING_FIELDS:
        value = get(field)
        if value is not None and type(value) is not str:
            raise EventError(f"{field} must be a string or null, got {type(value).__name__}")
    if not (get("session_id") or get("session_key")):
        raise EventError("an event needs a session_id (or a session_key)")
    ts = get("ts")
    if ts is not None and (type(ts) is bool or not isinstance(ts, (int, float))):
        raise EventError(f"ts must be epoch milliseconds (a number), got {type(ts).__name__}")
    follows = get("outcome_follows")
    if follows is not None and type(follows) is not bool:
        raise EventError(f"outcome_follows must be true or false, got {type(follows).__name__}")


def validate_event(event: Any) -> str:
    """Check ``event`` against the schema as :meth:`Engine.process` does, and return its type.

    These are all the rules the engine rejects an event by (the worker
    dead-letters such an event with reason class ``schema``): an object,
    ``type`` one of :data:`EVENT_TYPES`, the shared field types and a session
    (see :func:`_check_envelope`), and a ``tool_call_id`` on a ``tool_result``.
    An event that passes is accepted by the engine whatever state it meets.

    Raises:
        EventError: the first rule the event breaks (``str()`` names the field).
    """
    if type(event) is not dict and not isinstance(event, Mapping):
        raise EventError(f"an event must be an object, got {type(event).__name__}")
    kind = event.get("type")
    if kind not in EVENT_TYPES:
        raise EventError(f"type must be one of {', '.join(EVENT_TYPES)}, got {kind!r}")
    _check_envelope(event)
    if kind == "tool_result" and not event.get("tool_call_id"):
        raise EventError("a tool_result needs the tool_call_id (a non-empty string) of its tool_call")
    return kind


def state_key(event: Mapping[str, Any]) -> str | None:
    """OpenClaw's session-state key for an event: the session key, else the session id (Spec §8.1)."""
    key = event["session_key"] if "session_key" in event else event.get("session_id")
    return key or event.get("session_id") or None


class Engine:
    """OpenClaw's ``tools.loopDetection`` and post-compaction guard as a pure function.

    Arguments:
        config: the loop-detection config (:func:`~streams.detection.config.load_config`);
            default: OpenClaw's defaults (rolling detectors off, guard on).
    """

    __slots__ = ("config", "policies")

    def __init__(self, config: OpenClawConfig | None = None) -> None:
        self.config = config or OpenClawConfig({})
        # loopwatch's own opt-in rules (the file's ``policies`` section); None: OpenClaw's verdicts only
        self.policies: Policies | None = build_policies(self.config.raw)

    def process(self, event: Mapping[str, Any], state: SessionState, ref: Any = None) -> dict[str, Any]:
        """Apply one event to ``state`` and return its verdict record.

        Arguments:
            event: a decoded event (see the module docstring).
            state: the state of the event's partition key; changed in place.
            ref: an opaque, msgpack-serialisable reference to this event (e.g.
                ``[event_id, partition, offset]``) kept with the record it adds
                and reported as evidence when that record contributes to a
                detection.
        Returns:
            The verdict record (a new dict).
        Raises:
            EventError: the event does not fit the schema (:func:`validate_event`),
                or its args, result or thrown value are nested too deeply for
                Python to hash (about 1,000 levels; JavaScript goes deeper) or
                hold a value that is not JSON data (a msgpack extension type).
                Either way ``state`` is unchanged: both are hashed before any change.
        """
        kind = validate_event(event)
        policies = self.policies
        try:
            if policies is not None:
                event = policies.prepare(event)
            if kind == "tool_call":
                verdict = self._tool_call(event, state, ref)
            elif kind == "tool_result":
                verdict = self._tool_result(event, state, ref)
            else:
                verdict = self._compaction_retry(event, state)
        except RecursionError:
            raise EventError("args or result nested too deeply to hash") from None
        except NotJSONData as exc:  # e.g. a msgpack timestamp or other extension type
            raise EventError(f"args, result or error hold a value that is not JSON data ({exc})") from None
        if policies is not None:
            policies.decide(verdict, state.policy_runs, event.get("run_id"))
        return verdict

    # ---------------------------------------------------------------- event kinds

    def _context(self, event: Mapping[str, Any]) -> tuple[LoopDetectionSettings, str | None, str | None]:
        """Settings of the event's agent, and its raw and trimmed run id."""
        raw_run = event.get("run_id")
        settings = self.config.for_agent(event.get("agent_id"))
        run_id = (js_trim(raw_run) or None) if raw_run else None
        return settings, raw_run, run_id

    @staticmethod
    def _run(state: SessionState, raw_run: str | None, settings: LoopDetectionSettings) -> RunState:
        """The run's state, created on first sight (a change to ``state``)."""
        return state.run(raw_run or "", settings.guard_enabled, settings.window_size)

    def _tool_call(self, event: Mapping[str, Any], state: SessionState, ref: Any) -> dict[str, Any]:
        call_id = event.get("tool_call_id")
        settings, raw_run, run_id = self._context(event)
        tool = normalize_tool_name(event.get("tool_name"))
        args = event.get("args", UNDEFINED)
        call_hash = args_hash(tool, args)  # may raise RecursionError: before any change to state
        call_key = hash_key(call_hash)
        session_id = event.get("session_id")
        has_session_key = bool(event["session_key"] if "session_key" in event else session_id)

        detection: Detection | None = None
        marks: dict[str, Any] = {}  # loopwatch's perTool policy: what decided, or would have (policies)
        if has_session_key and settings.detectors_enabled:
            known_poll = is_known_poll(tool, args)
            if self.policies is None:
                detection = detect(state, run_id, tool, call_hash, known_poll, settings, call_key)
            else:
                detection, mark, shadow = self.policies.detect_for_tool(
                    tool, settings, lambda s: detect(state, run_id, tool, call_hash, known_poll, s, call_key))
                marks = {"policy": mark} if mark else {"shadow": [shadow]} if shadow else {}
        follows = event.get("outcome_follows") is True

        if detection is not None and detection.level == CRITICAL:
            # Spec §3 step 3: blocked; nothing is recorded, so the block is sticky.
            if follows and call_id:
                state.remember_call(call_id, PendingCall(tool, call_hash, run_id, 0, blocked=True))
            run = self._run(state, raw_run, settings)
            return {
                "type": "tool_call", "tool_name": tool, "args_hash": call_hash, "decision": "block",
                "detection": detection.as_dict(), "warning": None, "blocked": True,
                "block_reason": detection.message, "recorded_call": False, "outcome": dict(_NOT_RECORDED),
                "guard": guard_status(run), "run_aborted": run.aborted, "verdict": "block",
                "evidence": _evidence(detection.evidence), **marks,
            }

        profile = outcome_profile(tool, args, self.config.channel_send_tools)
        # hashed before the state changes: a result too deep to hash (RecursionError) leaves it as it was
        can_record = not follows and (has_session_key or bool(session_id))
        outcome = _outcome(profile, event.get("result"), event.get("error")) if can_record else None
        run = self._run(state, raw_run, settings)
        warning = None
        decision = "allow"
        if detection is not None:
            warning = self._dedupe(state, raw_run, detection)
            if warning["emitted"]:
                decision = "warn"
        recorded_call = has_session_key and settings.records_calls
        if recorded_call:
            state.append(CallRecord(tool, call_hash, call_id, run_id, None, None, ref, args_key=call_key),
                         settings.history_size)
        verdict: dict[str, Any] = {
            "type": "tool_call", "tool_name": tool, "args_hash": call_hash, "decision": decision,
            "detection": detection.as_dict() if detection is not None else {"stuck": False},
            "warning": warning, "blocked": False, "recorded_call": recorded_call,
        }
        if follows:
            if call_id:
                state.remember_call(call_id, PendingCall(tool, call_hash, run_id, profile, blocked=False))
            verdict["outcome"] = {"deferred": True}
            verdict["guard"] = guard_status(run)
            verdict["run_aborted"] = run.aborted
            verdict["verdict"] = decision
        else:
            self._record_outcome(verdict, state, settings, run, tool, call_hash, call_id, run_id, outcome, ref)
            verdict["verdict"] = "abort" if verdict["guard"]["abort"] else decision
        if "evidence" not in verdict:
            verdict["evidence"] = _evidence(detection.evidence) if detection is not None else []
        if marks:
            verdict.update(marks)
        return verdict

    def _tool_result(self, event: Mapping[str, Any], state: SessionState, ref: Any) -> dict[str, Any]:
        call_id = event.get("tool_call_id")  # non-empty: validate_event
        settings, raw_run, _ = self._context(event)
        call = state.calls.get(call_id)
        if call is None or call.blocked:
            state.calls.pop(call_id, None)
            run = self._run(state, raw_run, settings)
            return {
                "type": "tool_result", "tool_name": _NO_CALL_TOOL, "args_hash": _NO_CALL_ARGS_HASH,
                "ignored": BLOCKED_RESULT_IGNORED if call is not None else UNKNOWN_CALL_IGNORED,
                "run_aborted": run.aborted, "verdict": "ignore", "evidence": [],
            }
        outcome = _outcome(call.profile, event.get("result"), event.get("error")) if state_key(event) else None
        del state.calls[call_id]
        run = self._run(state, raw_run, settings)
        verdict: dict[str, Any] = {"type": "tool_result", "tool_name": call.tool, "args_hash": call.args_hash}
        self._record_outcome(verdict, state, settings, run, call.tool, call.args_hash, call_id, call.run_id,
                             outcome, ref)
        verdict["verdict"] = "abort" if verdict["guard"]["abort"] else "allow"
        verdict.setdefault("evidence", [])
        return verdict

    def _compaction_retry(self, event: Mapping[str, Any], state: SessionState) -> dict[str, Any]:
        settings, raw_run, _ = self._context(event)
        run = self._run(state, raw_run, settings)
        arm(run)
        return {
            "type": "compaction_retry",
            "guard": {"enabled": run.guard_enabled, "window_size": run.window_size,
                      "armed": run.remaining > 0, "remaining": run.remaining},
            "verdict": "allow", "evidence": [],
        }

    # ------------------------------------------------------------------- helpers

    @staticmethod
    def _dedupe(state: SessionState, raw_run: str | None, detection: Detection) -> dict[str, Any]:
        """Spec §6: emit a warning only when its bucket (count // 10) rises."""
        key = f"{raw_run}:{detection.warning_key}" if raw_run else detection.warning_key
        bucket = detection.count // 10
        emitted = bucket > state.warning_buckets.get(key, 0)
        if emitted:
            state.store_warning_bucket(key, bucket)
        return {"emitted": emitted, "key": key, "bucket": bucket}

    @staticmethod
    def _record_outcome(verdict: dict[str, Any], state: SessionState, settings: LoopDetectionSettings,
                        run: RunState, tool: str, call_hash: str, call_id: str | None, run_id: str | None,
                        outcome: tuple[str, str | None] | None, ref: Any) -> None:
        """Spec §3 steps 6-7: attach or append the outcome (:func:`_outcome`; None: none recorded), feed the guard."""
        if outcome is None:
            verdict["outcome"] = dict(_NOT_RECORDED)
            verdict["guard"] = guard_status(run)
            verdict["run_aborted"] = run.aborted
            return
        result_hash, unknown = outcome
        call_key = hash_key(call_hash)
        for record in reversed(state.history):
            if (record.result_key is None and record.run_id == run_id and record.tool == tool
                    and record.args_key == call_key and (not call_id or record.call_id == call_id)):
                record.set_result(result_hash, unknown, ref)
                break
        else:
            state.append(CallRecord(tool, call_hash, None, run_id, result_hash, unknown, ref), settings.history_size)
        verdict["outcome"] = {"recorded": True, "result_hash": result_hash, "unknown_tool_name": unknown}
        verdict["guard"] = observe(run, tool, call_hash, result_hash, ref)
        verdict["run_aborted"] = run.aborted
        if verdict["guard"]["abort"]:
            verdict["evidence"] = abort_evidence(run, tool, call_hash, result_hash)


def _outcome(profile: int, result: Any, error: Any) -> tuple[str, str | None] | None:
    """``(result hash, unknown tool name)`` of an outcome (Spec §4.3, §4.4); None when nothing is recorded.

    Raises RecursionError for a result or thrown value nested too deeply to hash.
    """
    result_hash = outcome_hash(profile, result, error)
    if result_hash is None:
        return None
    return result_hash, unknown_tool_name(error) if error is not None else None


def _evidence(records: list[CallRecord]) -> list[Any]:
    return [record.ref for record in records if record.ref is not None]
