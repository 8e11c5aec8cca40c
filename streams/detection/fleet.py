"""Fleet loops: the same failing call in many runs, counted in hopping windows of event time.

Pure (no I/O, no Kafka, no Faust). The Faust worker (:mod:`streams.worker.fleet`),
``loopwatch replay`` and ``loopwatch report`` all run this code; the worker
keeps the window aggregates in a Faust windowed table, offline they live in a dict.

Settings (loopwatch's own ``options.fleet`` block of the config file, never
OpenClaw's ``tools.loopDetection``): :class:`FleetSettings`.

Signatures (:func:`observation`)
--------------------------------
Each verdict record the engine produced is looked at once. It is an
*observation* of a signature when its call failed or looped:

* ``unknown_tool``: the call threw an unknown-tool error (``outcome.unknown_tool_name``);
  signature = that name, whatever the args;
* ``error``: the call threw (``outcome.result_hash`` starts with ``error:``, the
  engine's mark of a thrown value, distinct from a returned error-looking result);
  signature = tool, args hash and the thrown value's hash;
* ``detector``: a detector fired on the call at level critical (a block, or
  a 2026.9.6 terminal block); signature = detector, tool, args hash. A
  warning (level ``warning``, emitted or suppressed) is not an observation:
  the call was allowed, so a warning seen in many runs never makes a fleet
  loop and never blocks fleet-wide (docs/detection-rules.md §12.4);
* ``result`` (only with ``count: "all"``): any recorded outcome; signature = tool,
  args hash, result hash.

With ``signature: "tool"`` the args (and, for ``error``, the thrown value) are
left out: a tool broken whatever it is asked. Records the fleet breaker
decided (``fleet.blocked``) are not observations. A record without an
event time (``event_ts``, epoch ms) is not either: windows are event time.

Windows (:class:`FleetCorrelator`)
----------------------------------
Hopping windows of ``windowSeconds``, one every ``stepSeconds``, aligned on
the epoch exactly as Faust's ``HoppingWindow`` (:func:`window_ranges`): an
observation at ``t`` s is added to every window ``[start, start + size - 0.1]``
with ``start`` a multiple of the step in ``(t - size, t]``. Each window of
a signature keeps the distinct runs seen (up to ``max(minRuns, examples)``,
each with its session, agent, first time and evidence), the count of
observations and the first and last time.

A window whose distinct runs reach ``minRuns`` publishes one ``fleet_loop``
record (:func:`fleet_loop_record`), unless a window of the same signature that
overlaps it has published already: the signature then reports at most once
per window length while the loop goes on, never once per step, and repeats
within a window add nothing. Windows older than ``expiresSeconds`` behind the
latest event time seen are dropped (the worker's Faust table expires them the
same way), so memory is bounded by signatures x (size / step) windows x the
run cap.
"""

from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, MutableMapping

__all__ = [
    "FleetSettings",
    "fleet_settings",
    "validate_fleet",
    "FLEET_DETECTOR",
    "observation",
    "window_ranges",
    "FleetCorrelator",
    "fleet_loop_record",
]

FLEET_DETECTOR = "fleet_loop"
"""The detector name of the fleet breaker's blocks (loopwatch's own, not one of OpenClaw's)."""

_KEYS = ("enabled", "minRuns", "windowSeconds", "stepSeconds", "expiresSeconds", "signature", "count",
         "examples", "breaker", "holdSeconds")
_CHOICES = {"signature": ("call", "tool"), "count": ("failing", "all"), "breaker": ("off", "shadow", "block")}


@dataclass(frozen=True)
class FleetSettings:
    """``options.fleet`` of the config file, with defaults.

    Attributes (config key in brackets):
        enabled [enabled]: correlate at all (default true; it changes no verdict).
        min_runs [minRuns]: distinct runs in one window that make a fleet loop (default 5, >= 2).
        window_s [windowSeconds]: window size, whole seconds (default 600).
        step_s [stepSeconds]: hop between windows, whole seconds, <= window (default 60).
        expires_s [expiresSeconds]: how long a window is kept after its start (default 2 x window).
        signature [signature]: ``call`` (tool, args and outcome; default) or ``tool`` (tool only).
        count [count]: ``failing`` (thrown errors, unknown tools, detections; default) or ``all``
            (every recorded outcome as well).
        examples [examples]: runs listed per fleet loop (default 10); also the runs kept per window
            (at least ``min_runs``).
        breaker [breaker]: ``off`` (default: every verdict is OpenClaw's), ``shadow`` (publish what
            would be blocked) or ``block``.
        hold_s [holdSeconds]: the breaker blocks a fleet loop's calls until this long after its last
            observation (default: the window size).
    """

    enabled: bool = True
    min_runs: int = 5
    window_s: int = 600
    step_s: int = 60
    expires_s: int | None = None
    signature: str = "call"
    count: str = "failing"
    examples: int = 10
    breaker: str = "off"
    hold_s: int | None = None

    @property
    def expires(self) -> int:
        return self.expires_s if self.expires_s is not None else 2 * self.window_s

    @property
    def hold(self) -> int:
        return self.hold_s if self.hold_s is not None else self.window_s

    @property
    def run_cap(self) -> int:
        return max(self.min_runs, self.examples)


def validate_fleet(block: Any, path: str = "options.fleet") -> list[tuple[str, str]]:
    """The issues of an ``options.fleet`` block, as ``(path, message)`` pairs (empty when valid)."""
    if not isinstance(block, dict):
        return [(path, f"Expected object, received {type(block).__name__}")]
    unknown = [key for key in block if key not in _KEYS]
    issues = [(path, "Unrecognized key(s) in object: " + ", ".join(f"'{key}'" for key in unknown))] if unknown else []
    if "enabled" in block and not isinstance(block["enabled"], bool):
        issues.append((f"{path}.enabled", "Expected boolean"))
    for key, low in (("minRuns", 2), ("windowSeconds", 1), ("stepSeconds", 1), ("expiresSeconds", 1),
                     ("examples", 1), ("holdSeconds", 0)):
        value = block.get(key)
        if key in block and (type(value) is not int or value < low):
            issues.append((f"{path}.{key}", f"Expected an integer >= {low}"))
    for key, choices in _CHOICES.items():
        if key in block and block[key] not in choices:
            issues.append((f"{path}.{key}", "Expected one of " + ", ".join(choices)))
    window, step = block.get("windowSeconds", 600), block.get("stepSeconds", 60)
    if type(window) is int and type(step) is int and step > window:
        issues.append((f"{path}.stepSeconds", "must not exceed windowSeconds"))
    return issues


def fleet_settings(raw_config: Mapping[str, Any] | None) -> FleetSettings:
    """The :class:`FleetSettings` of a parsed config file (its ``options.fleet``; defaults for what is
    missing or invalid -- :func:`validate_fleet` reports those at load time)."""
    options = (raw_config or {}).get("options")
    block = options.get("fleet") if isinstance(options, dict) else None
    if not isinstance(block, dict):
        return FleetSettings()
    bad = {issue[0].rsplit(".", 1)[-1] for issue in validate_fleet(block)}
    given = {key: value for key, value in block.items() if key in _KEYS and key not in bad}
    return FleetSettings(
        enabled=given.get("enabled", True), min_runs=given.get("minRuns", 5),
        window_s=given.get("windowSeconds", 600),
        step_s=min(given.get("stepSeconds", 60), given.get("windowSeconds", 600)),
        expires_s=given.get("expiresSeconds"), signature=given.get("signature", "call"),
        count=given.get("count", "failing"), examples=given.get("examples", 10),
        breaker=given.get("breaker", "off"), hold_s=given.get("holdSeconds"),
    )


# ------------------------------------------------------------------ signatures

def _digest(*parts: Any) -> str:
    return hashlib.blake2b("\x1f".join(str(p) for p in parts).encode("utf-8", "backslashreplace"),
                           digest_size=8).hexdigest()


def _where(record: Mapping[str, Any]) -> Any:
    """The evidence of one observation: the Kafka position of its event, else its file position, else id."""
    for name in ("source", "event_source"):
        source = record.get(name)
        if isinstance(source, dict) and ("offset" in source or source.get("path")):
            if "offset" in source:
                return [source.get("topic"), source.get("partition"), source.get("offset")]
            return f"{source.get('path')}:{source.get('line', '?')}"
    return record.get("event_id")


def observation(record: Mapping[str, Any], settings: FleetSettings, agent_id: Any = None
                ) -> dict[str, Any] | None:
    """The observation a verdict record makes (see the module docstring), or None.

    Returns ``{sig, kind, tool, args_hash, result_hash, detector, unknown_tool,
    match: [tool, args_hash or None], ts (epoch ms), run, session, agent,
    event_id, where}``; ``match`` is what the breaker compares a later call
    with (a None args hash: any call of the tool). ``agent_id``: the event's,
    when known (verdict records do not carry it).
    """
    if not settings.enabled or (record.get("fleet") or {}).get("blocked") or record.get("rule") == FLEET_DETECTOR:
        return None  # the breaker's own blocks (``rule``: records of workers before ``decided_by``)
    ts = record.get("event_ts")
    if type(ts) not in (int, float) or not 0 < ts < 1e15:
        return None
    if record.get("type") not in ("tool_call", "tool_result") or record.get("verdict") == "ignore":
        return None
    outcome = record.get("outcome") or {}
    detection = record.get("detection") or {}
    tool = str(record.get("tool_name") or "tool")
    call = str(record.get("args_hash") or "")
    result = outcome.get("result_hash")
    by_tool = settings.signature == "tool"
    detector = unknown = None
    if outcome.get("unknown_tool_name"):
        kind, unknown = "unknown_tool", str(outcome["unknown_tool_name"])
        parts, match = (kind, unknown), [unknown, None]
    elif isinstance(result, str) and result.startswith("error:"):
        kind = "error"
        parts = (kind, tool) if by_tool else (kind, tool, call, result)
        match = [tool, None if by_tool else call]
    elif detection.get("stuck") and detection.get("level") == "critical":  # a warning alone never counts
        kind, detector = "detector", str(detection.get("detector"))
        parts = (kind, detector, tool) if by_tool else (kind, detector, tool, call)
        match = [tool, None if by_tool else call]
    elif settings.count == "all" and outcome.get("recorded"):
        kind = "result"
        parts = (kind, tool, result) if by_tool else (kind, tool, call, result)
        match = [tool, None if by_tool else call]
    else:
        return None
    run = record.get("run_id") or f"(session {record.get('session_id')})"
    return {
        "sig": f"{kind}:{unknown or tool}:{_digest(*parts)}", "kind": kind, "tool": tool,
        "args_hash": None if by_tool and kind != "unknown_tool" else call or None,
        "result_hash": result if kind in ("error", "result") and not (by_tool and kind == "error") else None,
        "detector": detector, "unknown_tool": unknown, "match": match, "ts": ts, "run": str(run),
        "session": record.get("session_id"), "agent": agent_id, "event_id": record.get("event_id"),
        "where": _where(record),
    }


# --------------------------------------------------------------------- windows

def window_ranges(ts_s: float, size: int, step: int) -> list[tuple[float, float]]:
    """The hopping windows holding ``ts_s`` (seconds), oldest first, as Faust's ``HoppingWindow.ranges``:
    ``(start, start + size - 0.1)`` for each step-aligned ``start`` in ``(ts_s - size, ts_s]``."""
    first = (ts_s // step) * step - size + step
    return [(float(start), float(start) + size - 0.1) for start in range(int(first), int(ts_s) + 1, int(step))]


def _overlapping(window: tuple[float, float], size: int, step: int) -> Iterator[tuple[float, float]]:
    start = int(window[0])
    for other in range(start - size + step, start + size, step):
        if other != start:
            yield (float(other), float(other) + size - 0.1)


Store = MutableMapping[tuple[str, tuple[float, float]], dict]


def merge(aggregate: dict | None, obs: Mapping[str, Any], run_cap: int) -> dict:
    """One window's aggregate with ``obs`` added (a new dict: table values are not changed in place).

    Shape: ``{desc: {...}, runs: {run: [session, agent, ts, event_id, where]}, count, first, last,
    published}``; at most ``run_cap`` runs are kept (``dropped`` counts the observations of runs
    past the cap).
    """
    if aggregate is None:
        aggregate = {"desc": {name: obs[name] for name in ("kind", "tool", "args_hash", "result_hash",
                                                            "detector", "unknown_tool", "match")},
                     "runs": {}, "count": 0, "first": obs["ts"], "last": obs["ts"], "published": False,
                     "dropped": 0}
    out = {**aggregate, "runs": dict(aggregate["runs"]), "count": aggregate["count"] + 1,
           "first": min(aggregate["first"], obs["ts"]), "last": max(aggregate["last"], obs["ts"])}
    run = obs["run"]
    if run not in out["runs"]:
        if len(out["runs"]) < run_cap:
            out["runs"][run] = [obs["session"], obs["agent"], obs["ts"], obs["event_id"], obs["where"]]
        else:
            out["dropped"] = out.get("dropped", 0) + 1
    return out


def fleet_loop_record(sig: str, window: tuple[float, float], aggregate: Mapping[str, Any],
                      settings: FleetSettings) -> dict[str, Any]:
    """The ``fleet_loop`` record of a window that reached ``minRuns`` distinct runs.

    ``{type: fleet_loop, id (signature@window start: the same for a record published again), signature, kind, tool, args_hash, result_hash, detector, unknown_tool,
    match, window: {start, end (epoch ms), size_s, step_s}, runs (distinct runs kept, at least
    minRuns), more_runs (observations of runs past the cap), agents, sessions, events,
    first_seen, last_seen (epoch ms), examples: [{run, session, agent, ts, event_id, where}],
    evidence: [where of each example], min_runs, message}``.
    """
    desc = aggregate["desc"]
    runs = aggregate["runs"]
    examples = [{"run": run, "session": s, "agent": a, "ts": ts, "event_id": e, "where": w}
                for run, (s, a, ts, e, w) in list(runs.items())[:settings.examples]]
    agents = sorted({str(a) for (_, a, _, _, _) in runs.values() if a is not None})
    what = {"unknown_tool": f"unknown tool {desc['unknown_tool']!r}",
            "error": f"{desc['tool']} threw" + ("" if desc["result_hash"] is None else " the same error"),
            "detector": f"{desc['detector']} fired on {desc['tool']}",
            "result": f"{desc['tool']} returned the same result"}[desc["kind"]]
    size = settings.window_s
    span = f"{size / 3600:g} h" if size % 3600 == 0 else f"{size / 60:g} min" if size % 60 == 0 else f"{size} s"
    message = (f"Fleet-wide loop: {what} in {len(runs)} runs"
               + (f" of {len(agents)} agent{'s' if len(agents) != 1 else ''}" if agents else "")
               + f" within {span} (at least {settings.min_runs} runs make a fleet loop).")
    return {
        "type": "fleet_loop", "id": f"{sig}@{int(window[0] * 1000)}", "signature": sig, **{k: desc[k] for k in ("kind", "tool", "args_hash", "result_hash",
                                                                         "detector", "unknown_tool", "match")},
        "window": {"start": int(window[0] * 1000), "end": int(round(window[1] + 0.1)) * 1000,
                   "size_s": settings.window_s, "step_s": settings.step_s},
        "runs": len(runs), "more_runs": aggregate.get("dropped", 0), "agents": agents,
        "sessions": len({s for (s, _, _, _, _) in runs.values()}), "events": aggregate["count"],
        "first_seen": aggregate["first"], "last_seen": aggregate["last"], "examples": examples,
        "evidence": [example["where"] for example in examples], "min_runs": settings.min_runs,
        "message": message,
    }


class FleetCorrelator:
    """Counts observations per signature and hopping window; returns the ``fleet_loop`` records to publish.

    Arguments:
        settings: the fleet settings.
        store: where the window aggregates live, keyed ``(signature, (start, end))`` (seconds);
            default a dict. The worker passes its Faust windowed table.
        ranges: the windows of a time in seconds; default :func:`window_ranges` (the worker passes
            its table's ``HoppingWindow.ranges``, which it equals).
    """

    def __init__(self, settings: FleetSettings, store: Store | None = None,
                 ranges: Callable[[float], list[tuple[float, float]]] | None = None) -> None:
        self.settings = settings
        self.store: Store = {} if store is None else store
        self._ranges = ranges or (lambda ts: window_ranges(ts, settings.window_s, settings.step_s))
        self.latest = 0.0  # the latest event time seen, seconds (expiry of the dict store)
        self._expiry: list[tuple[float, str]] = []  # heap of (window start, signature), for expire()

    def observe(self, obs: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Add one observation (:func:`observation`); the ``fleet_loop`` records it completes (0 or 1)."""
        s = self.settings
        ts = obs["ts"] / 1000.0
        sig = obs["sig"]
        store = self.store
        out = []
        for window in self._ranges(ts):
            aggregate = merge(store.get((sig, window)), obs, s.run_cap)
            if (not aggregate["published"] and len(aggregate["runs"]) >= s.min_runs
                    and not any((store.get((sig, other)) or {}).get("published")
                                for other in _overlapping(window, s.window_s, s.step_s))):
                aggregate["published"] = True
                out.append(fleet_loop_record(sig, window, aggregate, s))
            store[(sig, window)] = aggregate
            if aggregate["count"] == 1:
                heapq.heappush(self._expiry, (window[0], sig))
        self.latest = max(self.latest, ts)
        return out

    def expire(self) -> int:
        """Drop the windows that started ``expires`` seconds or more before the latest event time; how many.

        For the dict store (offline); the worker's Faust table expires its own windows.
        """
        horizon = self.latest - self.settings.expires
        expiry, dropped = self._expiry, 0
        while expiry and expiry[0][0] <= horizon:
            start, sig = heapq.heappop(expiry)
            if self.store.pop((sig, (start, start + self.settings.window_s - 0.1)), None) is not None:
                dropped += 1
        return dropped
