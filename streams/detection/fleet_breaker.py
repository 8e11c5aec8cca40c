"""The fleet breaker: calls that match an active fleet loop are blocked (or, in shadow, flagged).

Pure (no I/O). Opt-in through ``options.fleet.breaker`` (:class:`~streams.detection.fleet.FleetSettings`):

* ``off`` (default): :func:`decide` is the engine's verdict, unchanged, byte for byte;
* ``shadow``: the engine decides; a call that matches an active fleet loop gets
  ``fleet: {would_block: true, signature, window, runs, reason}`` and a shadow
  finding of kind ``fleet`` in its ``decided_by`` (action ``would_block``);
* ``block``: such a call is not given to the engine at all (nothing is
  recorded in its run's state, as for OpenClaw's own blocks) and gets a
  ``block`` verdict with detector ``fleet_loop``, level critical, a message
  saying the loop is fleet-wide and why, ``fleet: {blocked: true, ...}`` and
  ``decided_by.kind`` ``fleet``.

What decided is said by ``decided_by`` (:mod:`streams.detection.decision`), as for
every other verdict; :func:`decide` sets it again once it has added the fleet part.

A fleet loop (a ``fleet_loop`` record, :func:`streams.detection.fleet.fleet_loop_record`)
is active from when the breaker learns of it (:meth:`FleetBreaker.add`) until
``holdSeconds`` after its last observation, in event time: a call matches when its
``ts`` (else the latest time the breaker has seen) is before that. A call matches by
its ``match``: tool and args hash (tool alone for unknown tools or ``signature: tool``).
A result for a blocked call with ``outcome_follows`` is later ignored by the engine
(no pending call).

A call whose own run shows progress on it is neither blocked nor flagged
(:func:`run_progress`): the loop is elsewhere in the fleet, and this run's own
history says the call works here. A breaker cleared by hand
(:meth:`FleetBreaker.clear`, ``loopwatch fleet clear``) stays off until its
loop is published again.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from .canonical import UNDEFINED
from .fingerprint import args_hash, js_trim, normalize_tool_name
from .events import validate_event
from .decision import set_decided_by
from .state import hash_key
from .run_end import refuse
from .fleet import FLEET_DETECTOR, FleetSettings

__all__ = ["FleetBreaker", "decide", "block_verdict", "run_progress"]

_EVIDENCE_KEPT = 10


class FleetBreaker:
    """The active fleet loops, indexed by what a call is matched on.

    Arguments:
        settings: the fleet settings (``breaker`` and ``hold_s`` are used here).
    """

    def __init__(self, settings: FleetSettings) -> None:
        self.settings = settings
        self.mode = settings.breaker
        self._by_tool: dict[str, dict[str | None, tuple[float, dict[str, Any]]]] = {}
        self.now = 0.0  # the latest event time seen, epoch ms (for events without ts)

    @property
    def on(self) -> bool:
        return self.mode in ("shadow", "block")

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._by_tool.values())

    def add(self, loop: Mapping[str, Any]) -> None:
        """Activate a ``fleet_loop`` record (a later record of the same match extends it)."""
        tool, call = loop["match"]
        until = float(loop["last_seen"]) + self.settings.hold * 1000.0
        self.now = max(self.now, float(loop["last_seen"]))
        self.prune()
        entries = self._by_tool.setdefault(tool, {})
        current = entries.get(call)
        if current is None or current[0] <= until:
            entries[call] = (until, dict(loop))

    def learn(self, record: Mapping[str, Any]) -> None:
        """Apply one record of the fleet-events topic: a ``fleet_loop`` activates its loop
        (:meth:`add`), a ``fleet_clear`` clears its signature (:meth:`clear`); others are not the breaker's."""
        kind = record.get("type")
        if kind == "fleet_loop" and isinstance(record.get("match"), list):
            self.add(record)
        elif kind == "fleet_clear" and isinstance(record.get("signature"), str):
            self.clear(record["signature"])

    def clear(self, signature: str) -> int:
        """Forget the active loops of ``signature`` (a breaker cleared by hand; ``"*"``: every one); how many."""
        gone = 0
        for tool in list(self._by_tool):
            entries = self._by_tool[tool]
            for call in [call for call, (_, loop) in entries.items() if signature in ("*", loop["signature"])]:
                del entries[call]
                gone += 1
            if not entries:
                del self._by_tool[tool]
        return gone

    def active(self, now_ms: float | None = None) -> list[tuple[float, dict[str, Any]]]:
        """``(until, fleet_loop record)`` of every loop still held at ``now_ms`` (default: the latest event
        time seen), the one held longest last."""
        now = self.now if now_ms is None else now_ms
        return sorted(((until, loop) for entries in self._by_tool.values() for until, loop in entries.values()
                       if until > now), key=lambda item: (item[0], item[1]["signature"]))

    def prune(self) -> int:
        """Forget the loops held long enough by the latest event time seen; how many."""
        gone = 0
        for tool in list(self._by_tool):
            entries = self._by_tool[tool]
            for call in [call for call, (until, _) in entries.items() if until <= self.now]:
                del entries[call]
                gone += 1
            if not entries:
                del self._by_tool[tool]
        return gone

    def match(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        """The active fleet loop a ``tool_call`` event matches, or None (also for other events)."""
        ts = event.get("ts")
        if type(ts) in (int, float) and 0 < ts < 1e15:
            self.now = max(self.now, ts)
        else:
            ts = self.now
        if not self._by_tool or event.get("type") != "tool_call":
            return None
        tool = normalize_tool_name(event.get("tool_name"))
        entries = self._by_tool.get(tool)
        if not entries:
            return None
        found = self._live(entries, None, ts)
        if found is None:
            try:
                call = args_hash(tool, event.get("args", UNDEFINED))
            except RecursionError:  # the engine rejects it; not ours to decide
                return None
            found = self._live(entries, call, ts)
        if not entries:
            del self._by_tool[tool]
        return found

    @staticmethod
    def _live(entries: dict, call: str | None, ts: float) -> dict[str, Any] | None:
        entry = entries.get(call)
        if entry is None:
            return None
        if ts >= entry[0]:
            del entries[call]  # held long enough: the loop is over unless a new record comes
            return None
        return entry[1]


def block_verdict(event: Mapping[str, Any], loop: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict of a call the fleet breaker blocks (the engine's block shape, detector ``fleet_loop``)."""
    tool = normalize_tool_name(event.get("tool_name"))
    message = (f"{loop['message']} loopwatch's fleet breaker blocks this call for every run until the loop "
               "stops: do not retry it; try another approach or report the failure.")
    return {
        "type": "tool_call", "tool_name": tool, "args_hash": args_hash(tool, event.get("args", UNDEFINED)),
        "decision": "block",
        "detection": {"stuck": True, "level": "critical", "detector": FLEET_DETECTOR, "count": loop["runs"],
                      "message": message, "warning_key": f"{FLEET_DETECTOR}:{loop['signature']}"},
        "warning": None, "blocked": True, "block_reason": message, "recorded_call": False,
        "outcome": {"recorded": False, "result_hash": None, "unknown_tool_name": None},
        "run_aborted": False, "verdict": "block", "evidence": list(loop["evidence"][:_EVIDENCE_KEPT]),
        "fleet": _fleet_field(loop, shadow=False),
    }


def _fleet_field(loop: Mapping[str, Any], shadow: bool) -> dict[str, Any]:
    return {"signature": loop["signature"], "window": loop["window"], "runs": loop["runs"],
            "reason": loop.get("message"), "would_block" if shadow else "blocked": True}


def run_progress(history: Iterable[Any], event: Mapping[str, Any], loop: Mapping[str, Any]) -> bool:
    """Whether the event's own run shows progress on the fleet loop's call (docs/detection-rules.md §12.5).

    Arguments:
        history: the session's call records (:class:`~streams.detection.state.CallRecord`), oldest first.
        event: the ``tool_call`` the breaker matched.
        loop: the ``fleet_loop`` record it matched (``kind``, ``match``, ``result_hash``).
    Returns:
        True when the run's latest outcome of that call (same tool, and args unless the loop is
        tool-wide) is not the loop's failure: for ``error`` and ``unknown_tool`` loops a result that is
        not a thrown error; for ``detector`` loops a result other than the one before it (the
        outcomes change); for ``result`` loops another result than the loop's. False when the run
        has no outcome of the call yet.
    """
    raw_run = event.get("run_id")
    run_id = (js_trim(raw_run) or None) if raw_run else None
    tool, call = loop["match"]
    call_key = hash_key(call) if call else None
    outcomes = [record.result_key for record in history
                if record.run_id == run_id and record.tool == tool and record.result_key is not None
                and (call_key is None or record.args_key == call_key)]
    if not outcomes:
        return False
    kind = loop.get("kind")
    if kind in ("error", "unknown_tool"):
        return not outcomes[-1].startswith("error:")
    if kind == "detector":
        return len(outcomes) >= 2 and outcomes[-1] != outcomes[-2]
    failing = loop.get("result_hash")
    return failing is not None and outcomes[-1] != hash_key(failing)


def decide(breaker: FleetBreaker | None, event: Mapping[str, Any], process: Callable[[], dict[str, Any]],
           history: Callable[[], Iterable[Any]] | None = None,
           run_end: Callable[[], tuple[str, str | None, Any] | None] | None = None) -> dict[str, Any]:
    """The verdict of ``event``: ``process()`` (the engine) unless the fleet breaker blocks it.

    With no breaker or mode ``off``, exactly ``process()``. See the module docstring for the others.
    ``history`` gives the call records of the event's session state (read only when a loop matches);
    a call whose run shows progress on it (:func:`run_progress`) is left to the engine, unflagged.
    The verdict's ``decided_by`` is set again when the breaker adds to it. ``run_end`` gives the end of
    the event's run (:meth:`~streams.detection.engine.Engine.run_end`): a call of an ended run that the
    breaker blocks is refused as the engine refuses it (``abort``, ``run_ended``).
    """
    if breaker is None or not breaker.on:
        return process()
    loop = breaker.match(event)
    if loop is not None:
        validate_event(event)  # an event the engine would reject is rejected here too (EventError)
        if history is not None and run_progress(history(), event, loop):
            loop = None  # this run's own outcomes say the call works here
    if loop is not None and breaker.mode == "block":
        verdict = block_verdict(event, loop)
        ended = run_end() if run_end is not None else None
        return set_decided_by(refuse(verdict, ended) if ended is not None else verdict)
    verdict = process()
    if loop is not None:
        verdict["fleet"] = _fleet_field(loop, shadow=True)
        set_decided_by(verdict)
    return verdict
