"""The engine: one event in, one verdict out, OpenClaw's tool cycle step by step.

``Engine.process(event, state)`` applies one event to the state of its
partition key and returns the verdict record. It is deterministic, does no
I/O and changes nothing but ``state``. The Faust worker, the offline replay and
the conformance runner all call it.

Event shapes and the schema: :mod:`~streams.detection.events`; what an event leaves in the
session (outcome records, warning buckets, pending and blocked calls): :mod:`~streams.detection.recording`.

Guards (docs/detection-rules.md §7) are not part of a session's state: :meth:`Engine.process`
takes the map of guards apart from the state, keyed by :func:`guard_key`
(the raw run id, or for a blank run id the session key, else the session id).
The stream processor passes none and keeps them in ``state.runs`` of the
record key; :class:`~streams.detection.sessions.SessionStore` keeps one map for
all sessions. Blocked deferred calls (docs/detection-rules.md §9) are remembered the same way:
by :func:`blocked_key` (run id as sent and call id), in a map the caller passes
(the store: one for all sessions) or else in ``state.blocked``.

Verdict records carry the fields of the vectors' ``expected`` entries plus
``verdict`` (allow, warn, block, abort or ignore: what the runner should do),
``evidence`` (the ``ref`` values of the records behind a detection) and
``decided_by`` (what decided, :mod:`streams.detection.decision`).

Profiles (:mod:`~streams.detection.profiles`): an event's optional ``profile``
field, else the config, picks the OpenClaw release whose verdicts it gets. Each
2026.9.6 rule (docs/detection-rules.md §11.3) branches on ``settings.is_2026_9`` where the
2026.7 rule stands: a critical verdict is a recorded veto with a recovery or
terminal block (:meth:`Engine._veto`), an emitted warning carries the note the
model sees, outcomes carry kind, no-progress and failure identity. Those
verdicts add ``block_text``, ``tool_loop_recovery`` (a terminal block's
``verdict`` is ``abort``: the run ends), ``veto_recorded``, ``warning.note``,
``detection.liveness_signal``, ``run_terminated`` and the outcome fields.

What the runner really did (loopwatch's fields, docs/events-and-verdicts.md):

* a run that ended (guard or policy abort, terminal block) stays over: every
  later event of it gets ``verdict: "abort"`` and ``run_ended``
  (:mod:`~streams.detection.run_end`); OpenClaw's fields stay as computed;
* ``tool_call.deadline`` (epoch ms): when a fail-open runner stops waiting
  and runs the call without a verdict. Informational here (the verdict does
  not depend on any clock); copied to the verdict record;
* ``tool_result.ran_without_verdict: true``: the runner ran the call without
  its verdict (it gave up waiting and failed open). The call is applied as
  executed: a call the rules had blocked is recorded with its outcome and
  fed to the guard instead of being ignored; the verdict gets ``late: true``, and when loopwatch
  had refused the call (its verdict ``block`` or ``abort``), ``corrects``: ``{event_id,
  tool_call_id, verdict, by}`` of that call's verdict, which the runner did not wait for. What
  the call was told is kept with its pending or blocked entry (:class:`PendingCall` ``refused``),
  so replay and the worker agree;
* ``tool_result.judged: false`` (optional ``blocked_by``): loopwatch never
  judged the call (another plugin or the runner's own detector refused it
  first): not applied, as OpenClaw treats a result of a call it blocked
  (docs/detection-rules.md §9); ``verdict: "ignore"``.

Size: the tool cycle of one event (the three event kinds, the 2026.9.6 veto, the run-end refusal) reads
top to bottom in one class; the schema and the session bookkeeping live in events.py and recording.py.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, MutableMapping

from .canonical import UNDEFINED, NotJSONData, digest
from .config import LoopDetectionSettings, OpenClawConfig
from .decision import set_decided_by
from .detectors import CRITICAL, POLL_TOOLS, Detection, detect, is_known_poll
from .events import EventError, blocked_key, guard_key, has_session, run_identity, validate_event
from .fingerprint import PROFILE_PLAIN, PROFILED_TOOLS, TOOL_NAMES, args_hash, normalize_tool_name, outcome_profile
from .outcomes_2026_9 import KIND_VETO
from .policies import Policies, build as build_policies
from .post_compaction_guard import arm, guard_status
from .recording import (NOT_RECORDED, REFUSALS, answered_call, correction, dedupe, evidence_refs, note_refusal,
                        outcome_of, rebind_pending, record_outcome, unveto)
from .recovery import block_text, warning_note
from .run_end import ending, refuse
from .state import CallRecord, PendingCall, RunState, SessionState, remember_blocked

__all__ = ["Engine", "BLOCKED_RESULT_IGNORED", "UNJUDGED_RESULT_IGNORED"]

BLOCKED_RESULT_IGNORED = "tool call was blocked; no tool result exists in OpenClaw"
UNJUDGED_RESULT_IGNORED = "loopwatch never judged this tool call (judged: false); its result is not applied"
_NO_MARKS: Mapping[str, Any] = MappingProxyType({})


class Engine:
    """OpenClaw's ``tools.loopDetection`` and post-compaction guard as a pure function.

    Arguments:
        config: the loop-detection config (:func:`~streams.detection.config.load_config`);
            default: OpenClaw's defaults (rolling detectors off, guard on).
    """

    __slots__ = ("config", "policies", "_profiled_tools")

    def __init__(self, config: OpenClawConfig | None = None) -> None:
        self.config = config or OpenClawConfig({})
        # tools whose outcome rule may not be the plain one (fingerprint.outcome_profile): the others skip it
        self._profiled_tools = PROFILED_TOOLS | self.config.channel_send_tools
        # loopwatch's own opt-in rules (the file's ``policies`` section); None: OpenClaw's verdicts only
        self.policies: Policies | None = build_policies(self.config.raw)

    def process(self, event: Mapping[str, Any], state: SessionState | None, ref: Any = None,
                guards: MutableMapping[str, RunState] | None = None,
                blocked: MutableMapping[str, PendingCall] | None = None) -> dict[str, Any]:
        """Apply one event to ``state`` and return its verdict record.

        Arguments:
            event: a decoded event (see the module docstring).
            state: the state of the event's partition key; changed in place.
                May be None, when ``guards`` and ``blocked`` are given, for a
                ``compaction_retry`` and a ``tool_result`` without session id
                or key: they touch no session state (docs/detection-rules.md §8.1).
            ref: an opaque, msgpack-serialisable reference to this event (e.g.
                ``[event_id, partition, offset]``) kept with the record it adds
                and reported as evidence when that record contributes to a
                detection.
            guards: the post-compaction guards by :func:`guard_key`, created
                on first sight; default ``state.runs`` (at most
                :data:`~streams.detection.state.MAX_RUNS`, idle ones evicted first).
            blocked: the blocked deferred calls by :func:`blocked_key`
                (docs/detection-rules.md §9), in insertion order; default ``state.blocked``.
        Returns:
            The verdict record (a new dict).
        Raises:
            EventError: the event does not fit the schema (:func:`validate_event`),
                or its args, result or thrown value are nested too deeply for
                Python to hash (about 1,000 levels; JavaScript goes deeper) or
                hold a value that is not JSON data (a msgpack extension type).
                Either way ``state`` is unchanged: both are hashed before any change.
        """
        return self.process_valid(validate_event(event), event, state, ref, guards, blocked)

    def process_valid(self, kind: str, event: Mapping[str, Any], state: SessionState | None, ref: Any = None,
                      guards: MutableMapping[str, RunState] | None = None,
                      blocked: MutableMapping[str, PendingCall] | None = None) -> dict[str, Any]:
        """:meth:`process` of an event :func:`validate_event` accepted, ``kind`` being what it returned
        (for a caller that validated the event already: it is not checked again)."""
        policies = self.policies
        if blocked is None:
            blocked = state.blocked
        runs = guards if guards is not None else state.runs
        raw_run, run_id, own_key = run_identity(event)
        answered = None  # a tool_result's blocked or pending call: (blocked key or None, call or None)
        if kind == "tool_result":
            answered = answered_call(event, state, blocked)
            # a result applied as its call's belongs to the call's run (docs/detection-rules.md §9): a pending call's, or a
            # blocked call's that ran without its verdict
            applied = answered[1] is not None and event.get("judged") is not False and (
                answered[0] is None or (event.get("ran_without_verdict") is True and has_session(event)))
            run_key = answered[1].guard if applied else own_key
        else:
            run_key = own_key
        run = runs.get(own_key)
        ended = run.ended if run is not None else None  # before this event (Engine.run_end)
        try:
            if policies is not None:
                event = policies.prepare(event)
            if kind == "tool_call":
                verdict = self._tool_call(event, state, ref, guards, blocked, run_key, raw_run, run_id, run)
            elif kind == "tool_result":
                verdict = self._tool_result(event, state, ref, guards, blocked, *answered, run_key, run_id)
            else:
                verdict = self._compaction_retry(event, state, guards, run_key)
        except RecursionError:
            raise EventError("args or result nested too deeply to hash") from None
        except NotJSONData as exc:  # e.g. a msgpack timestamp or other extension type
            raise EventError(f"args, result or error hold a value that is not JSON data ({exc})") from None
        if policies is not None:
            # a compaction_retry from the offline store comes without a session state; the run
            # rules count tool calls and outcomes only, so it needs no policy memory
            policies.decide(verdict, state.policy_runs if state is not None else {}, event.get("run_id"))
        if kind == "tool_result" and event.get("ran_without_verdict") is True:
            verdict["late"] = True
            if applied and answered[1].refused:  # the call's block or abort did not stop it: say so
                verdict["corrects"] = correction(answered[1].refused, event.get("tool_call_id"))
        if ended is not None:
            verdict = refuse(verdict, ended)
        else:
            end = ending(verdict)
            if end is not None and run_key is not None:  # every path above created the run's state
                runs[run_key].ended = (*end, ref)
        set_decided_by(verdict)  # what decided, in one field (streams.detection.decision)
        if kind == "tool_call" and verdict["verdict"] in REFUSALS and event.get("outcome_follows") is True:
            note_refusal(event, state, blocked, verdict)
        return verdict

    @staticmethod
    def run_end(event: Mapping[str, Any], state: SessionState | None,
                guards: Mapping[str, RunState] | None = None) -> tuple[str, str | None, Any] | None:
        """``(by, reason, ref)`` when the run of ``event`` has ended (:mod:`~streams.detection.run_end`), else
        None. Reads only; ``guards`` as :meth:`process` takes them (default ``state.runs``)."""
        run = (guards if guards is not None else state.runs).get(guard_key(event))
        return run.ended if run is not None else None

    # ---------------------------------------------------------------- event kinds

    def _settings(self, event: Mapping[str, Any]) -> LoopDetectionSettings:
        """Settings of the event's agent and profile (cached by the config)."""
        return self.config.for_agent(event.get("agent_id"), event.get("profile"))

    @staticmethod
    def _run(state: SessionState | None, guards: MutableMapping[str, RunState] | None,
             settings: LoopDetectionSettings, key: str | None) -> RunState:
        """The guard of identity ``key`` (docs/detection-rules.md §7: :func:`guard_key`, or a pending call's), created
        on first sight with its agent's guard config. No identity (a sessionless result): a fresh guard nothing keeps."""
        if key is None:
            return RunState(settings.guard_enabled, settings.window_size)
        if guards is None:
            return state.run(key, settings.guard_enabled, settings.window_size)
        run = guards.get(key)
        if run is None:
            run = guards[key] = RunState(settings.guard_enabled, settings.window_size)
        return run

    def _tool_call(self, event: Mapping[str, Any], state: SessionState, ref: Any,
                   guards: MutableMapping[str, RunState] | None,
                   blocked: MutableMapping[str, PendingCall], run_key: str | None, raw_run: str | None,
                   run_id: str | None, run: RunState | None) -> dict[str, Any]:
        """``raw_run`` and ``run_id``: the event's run id as sent and trimmed (:func:`run_identity`); ``run``: the
        guard of ``run_key`` if it exists already (else None: created here)."""
        get = event.get
        call_id = get("tool_call_id")
        agent, behaviour = get("agent_id"), get("profile")
        # config.for_agent and normalize_tool_name, their caches looked up first (hot)
        settings = self.config.settings_cache.get(agent if behaviour is None else (behaviour, agent))
        if settings is None:
            settings = self.config.for_agent(agent, behaviour)
        is_2026_9 = settings.is_2026_9
        name = get("tool_name")
        tool = TOOL_NAMES[is_2026_9].get(name) if type(name) is str else None
        if tool is None:
            tool = normalize_tool_name(name, is_2026_9)
        args = get("args", UNDEFINED)
        call_hash = digest(args, tool + ":")  # args_hash, inlined (hot); may raise RecursionError: before any change
        call_key = call_hash[:-32]  # hash_key, inlined (hot)
        session_id = get("session_id")
        keyed = bool(event["session_key"] if "session_key" in event else session_id)  # has_session_key, inlined

        detection: Detection | None = None
        marks: Mapping[str, Any] = _NO_MARKS  # loopwatch's perTool policy: what decided, or would have (policies)
        if keyed and settings.detectors_enabled:
            known_poll = tool in POLL_TOOLS and is_known_poll(tool, args)
            if self.policies is None:
                detection = detect(state, run_id, tool, call_hash, known_poll, settings, call_key)
            else:
                detection, mark, shadow = self.policies.detect_for_tool(
                    tool, settings, lambda s: detect(state, run_id, tool, call_hash, known_poll, s, call_key))
                marks = {"policy": mark} if mark else {"shadow": [shadow]} if shadow else {}
        follows = event.get("outcome_follows") is True

        if detection is not None and detection.level == CRITICAL:
            key = blocked_key(raw_run, call_id) if follows else None
            if key is not None:  # its result is ignored when it comes (docs/detection-rules.md §9)
                profile = outcome_profile(tool, args, self.config.channel_send_tools, is_2026_9)
                remember_blocked(blocked, key, PendingCall(tool, call_hash, run_id, profile, run_key,
                                                           event.get("agent_id"), event.get("profile")))
            if run is None:
                run = self._run(state, guards, settings, run_key)
            if is_2026_9:  # docs/detection-rules.md §11.3.1 step 3: a recorded veto, with one recovery chance per attempt
                return self._veto(event, state, settings, run, detection, tool, call_hash, call_key, run_id, ref,
                                  marks)
            # docs/detection-rules.md §3 step 3: blocked; nothing is recorded, so the block is sticky.
            return {
                "type": "tool_call", "tool_name": tool, "args_hash": call_hash, "decision": "block",
                "detection": detection.as_dict(), "warning": None, "blocked": True,
                "block_reason": detection.message, "recorded_call": False, "outcome": dict(NOT_RECORDED),
                "guard": guard_status(run), "run_aborted": run.aborted, "verdict": "block",
                "evidence": evidence_refs(detection.evidence), **marks,
            }

        profile = outcome_profile(tool, args, self.config.channel_send_tools, is_2026_9) \
            if tool in self._profiled_tools else PROFILE_PLAIN
        # hashed before the state changes: a result too deep to hash (RecursionError) leaves it as it was
        can_record = not follows and (keyed or bool(session_id))
        outcome = outcome_of(profile, get("result"), get("error"), is_2026_9) if can_record else None
        if run is None:
            run = self._run(state, guards, settings, run_key)
        warning = None
        decision = "allow"
        if detection is not None:
            warning = dedupe(state, raw_run, detection)
            if warning["emitted"]:
                decision = "warn"
                if is_2026_9 and call_id is not None:  # docs/detection-rules.md §11.3.1 step 4: the model sees a note
                    warning["note"] = warning_note(detection.count)
        if is_2026_9 and state.maybe_pending and settings.enabled is True and (keyed or session_id):
            rebind_pending(state, run_id, tool, call_id, call_hash, call_key)
        recorded_call = keyed and settings.records_calls
        # the call's record with its outcome at once: what attaching the outcome to it would leave
        fresh = recorded_call and not follows and outcome is not None
        if recorded_call and not fresh:
            state.append(CallRecord(tool, call_hash, call_id, run_id, None, None, ref, args_key=call_key),
                         settings.history_size)
            state.maybe_pending = True  # the record stays pending (for now)
        verdict: dict[str, Any] = {
            "type": "tool_call", "tool_name": tool, "args_hash": call_hash, "decision": decision,
            "detection": detection.as_dict() if detection is not None else {"stuck": False},
            "warning": warning, "blocked": False, "recorded_call": recorded_call,
        }
        if follows:
            if call_id:  # its result is recorded as this call's: run, agent, guard (docs/detection-rules.md §9)
                state.remember_call(call_id, PendingCall(tool, call_hash, run_id, profile, run_key,
                                                         event.get("agent_id"), event.get("profile")))
            verdict["outcome"] = {"deferred": True}
            verdict["guard"] = guard_status(run)
            verdict["run_aborted"] = run.aborted
            verdict["verdict"] = decision
        else:
            guard = record_outcome(verdict, state, settings, run, tool, call_hash, call_id, run_id, outcome, ref,
                                   call_key=call_key, fresh=fresh)
            verdict["verdict"] = "abort" if guard["abort"] else decision
        if is_2026_9:
            verdict["run_terminated"] = run.terminated
        if "evidence" not in verdict:
            verdict["evidence"] = evidence_refs(detection.evidence) if detection is not None else []
        if marks:
            verdict.update(marks)
        return verdict

    def _tool_result(self, event: Mapping[str, Any], state: SessionState | None, ref: Any,
                     guards: MutableMapping[str, RunState] | None, blocked: MutableMapping[str, PendingCall],
                     blocked_hit: str | None, call: PendingCall | None, run_key: str | None,
                     run_id: str | None) -> dict[str, Any]:
        """docs/detection-rules.md §9: a result for a blocked call, for a pending call, or for no pending call.

        ``blocked_hit`` and ``call`` are what :func:`answered_call` found; ``run_id`` the event's trimmed run id. A
        pending call (by ``tool_call_id``, in the session's state) gets its
        outcome recorded as that call's: its run id, agent config, tool, args
        and guard, whatever run id the result carries. Else a result whose run
        id and call id give the key of a remembered blocked call is ignored and
        uses the entry up, in whatever session it comes. Otherwise the
        outcome is recorded with the event's own tool name, args and run id,
        attaching to the newest matching pending record (compared by call id
        only when the result has one). A result with neither session id
        nor key records nothing and reads no session state (docs/detection-rules.md §8.1).

        A result the runner ran without loopwatch's verdict (``ran_without_verdict``) of a call the
        rules blocked is applied as the result of a call that ran; one of a call loopwatch never
        judged (``judged: false``) is not applied (the module docstring).
        """
        call_id = event.get("tool_call_id")
        if event.get("judged") is False:
            return self._unjudged_result(event, state, guards, self._settings(event), run_key)
        sessionful = has_session(event)
        if blocked_hit is not None:
            del blocked[blocked_hit]  # the first such result uses the entry up
            if not (event.get("ran_without_verdict") is True and sessionful):
                # blocked: OpenClaw never ran it. The event's own tool name and args (absent: "tool" and undefined)
                settings = self._settings(event)
                tool = normalize_tool_name(event.get("tool_name"), settings.is_2026_9)
                call_hash = args_hash(tool, event.get("args", UNDEFINED))
                run = self._run(state, guards, settings, run_key)
                ignored = {
                    "type": "tool_result", "tool_name": tool, "args_hash": call_hash,
                    "ignored": BLOCKED_RESULT_IGNORED, "run_aborted": run.aborted, "verdict": "ignore",
                    "evidence": [],
                }
                if settings.is_2026_9:
                    ignored["run_terminated"] = run.terminated
                return ignored
            # ran without its verdict: applied as the blocked call's result, as a pending call's
        if call is None:
            # No pending call (never seen, already answered, or its state expired): the
            # event's own tool name and args (absent: "tool" and undefined), hashed before
            # any change to the state (RecursionError); recorded as step 6 records any
            # outcome, carrying the event's call id.
            settings, record_run = self._settings(event), run_id
            is_2026_9 = settings.is_2026_9
            tool = normalize_tool_name(event.get("tool_name"), is_2026_9)
            args = event.get("args", UNDEFINED)
            call_hash = args_hash(tool, args)
            profile = outcome_profile(tool, args, self.config.channel_send_tools, is_2026_9)
            run = self._run(state, guards, settings, run_key)
        else:
            settings = self.config.for_agent(call.agent, call.behaviour)
            is_2026_9 = settings.is_2026_9
            tool, call_hash, record_run, profile = call.tool, call.args_hash, call.run_id, call.profile
            run = self._run(state, guards, settings, run_key)
        outcome = outcome_of(profile, event.get("result"), event.get("error"), is_2026_9) if sessionful else None
        if call is not None and blocked_hit is None:
            del state.calls[call_id]
        elif blocked_hit is not None and is_2026_9:  # ran without its verdict: its veto record becomes its record
            unveto(state, call_id)
        verdict: dict[str, Any] = {"type": "tool_result", "tool_name": tool, "args_hash": call_hash}
        record_outcome(verdict, state, settings, run, tool, call_hash, call_id, record_run, outcome, ref,
                             append_call_id=(call_id or None) if call is None else None)
        verdict["verdict"] = "abort" if verdict["guard"]["abort"] else "allow"
        verdict.setdefault("evidence", [])
        if is_2026_9:
            verdict["run_terminated"] = run.terminated
        return verdict

    def _unjudged_result(self, event: Mapping[str, Any], state: SessionState,
                         guards: MutableMapping[str, RunState] | None,
                         settings: LoopDetectionSettings, run_key: str | None) -> dict[str, Any]:
        """A result of a call loopwatch never judged: not applied (docs/detection-rules.md §9, as for a blocked call)."""
        tool = normalize_tool_name(event.get("tool_name"), settings.is_2026_9)
        call_hash = args_hash(tool, event.get("args", UNDEFINED))  # before any change (RecursionError)
        run = self._run(state, guards, settings, run_key)
        by = event.get("blocked_by")
        ignored = {
            "type": "tool_result", "tool_name": tool, "args_hash": call_hash,
            "ignored": UNJUDGED_RESULT_IGNORED + (f" (blocked by {by})" if by else ""),
            "run_aborted": run.aborted, "verdict": "ignore", "evidence": [],
        }
        if settings.is_2026_9:
            ignored["run_terminated"] = run.terminated
        return ignored

    def _compaction_retry(self, event: Mapping[str, Any], state: SessionState | None,
                          guards: MutableMapping[str, RunState] | None, run_key: str | None) -> dict[str, Any]:
        """Arms the event's guard (docs/detection-rules.md §7); no session state is read or changed (docs/detection-rules.md §8.1).

        Under 2026.9.6 the retry is a new attempt: it clears the run's recovery flag (docs/detection-rules.md §11.3.3).
        """
        settings = self.config.for_agent(event.get("agent_id"), event.get("profile"))
        run = self._run(state, guards, settings, run_key)
        arm(run)
        if settings.is_2026_9:
            run.recovery = False
        return {
            "type": "compaction_retry",
            "guard": {"enabled": run.guard_enabled, "window_size": run.window_size,
                      "armed": run.remaining > 0, "remaining": run.remaining},
            "verdict": "allow", "evidence": [],
        }

    @staticmethod
    def _veto(event: Mapping[str, Any], state: SessionState, settings: LoopDetectionSettings, run: RunState,
              detection: Detection, tool: str, call_hash: str, call_key: str, run_id: str | None, ref: Any,
              marks: dict[str, Any]) -> dict[str, Any]:
        """docs/detection-rules.md §11.3.1 step 3 and §3.3: a critical call under 2026.9.6.

        A veto record joins the history (counts keep growing through blocks);
        the run's recovery flag picks the block: clear -> ``recovery`` (the flag
        is set, the run goes on, loopwatch verdict ``block``); set -> ``terminal``
        (the run ends: ``run_terminated``, loopwatch verdict ``abort``).
        """
        call_id = event.get("tool_call_id")
        state.append(CallRecord(tool, call_hash, call_id, run_id, None, None, ref, args_key=call_key, kind=KIND_VETO),
                     settings.history_size)
        terminal = run.recovery
        if terminal:
            run.terminated = True
        else:
            run.recovery = True
        return {
            "type": "tool_call", "tool_name": tool, "args_hash": call_hash, "decision": "block",
            "detection": detection.as_dict(), "warning": None, "blocked": True,
            "block_reason": detection.message,
            "block_text": block_text(detection.message, terminal, call_id is not None),
            "tool_loop_recovery": "terminal" if terminal else "recovery", "veto_recorded": True,
            "recorded_call": False, "outcome": dict(NOT_RECORDED), "guard": guard_status(run),
            "run_aborted": run.aborted, "run_terminated": run.terminated, "verdict": "abort" if terminal else "block",
            "evidence": evidence_refs(detection.evidence), **marks,
        }
