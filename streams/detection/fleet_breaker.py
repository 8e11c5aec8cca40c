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
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .canonical import UNDEFINED
from .fingerprint import args_hash, normalize_tool_name
from .engine import validate_event
from .decision import set_decided_by
from .fleet import FLEET_DETECTOR, FleetSettings

__all__ = ["FleetBreaker", "decide", "block_verdict"]

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


def decide(breaker: FleetBreaker | None, event: Mapping[str, Any], process: Callable[[], dict[str, Any]]
           ) -> dict[str, Any]:
    """The verdict of ``event``: ``process()`` (the engine) unless the fleet breaker blocks it.

    With no breaker or mode ``off``, exactly ``process()``. See the module docstring for the others.
    The verdict's ``decided_by`` is set again when the breaker adds to it.
    """
    if breaker is None or not breaker.on:
        return process()
    loop = breaker.match(event)
    if loop is not None and breaker.mode == "block":
        validate_event(event)  # an event the engine would reject is rejected here too (EventError)
        return set_decided_by(block_verdict(event, loop))
    verdict = process()
    if loop is not None:
        verdict["fleet"] = _fleet_field(loop, shadow=True)
        set_decided_by(verdict)
    return verdict
