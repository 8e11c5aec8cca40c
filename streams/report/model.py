"""The report's aggregation model: verdict records -> sessions, runs, calls, detections, totals.

:func:`build_report` reads the verdict records that ``loopwatch replay`` writes (or that a
:class:`~streams.offline.replay.Replayer` returns), in order, and groups them:

* a :class:`SessionReport` per ``session_id`` (in order of first appearance), with the files
  its calls came from (``source.path``, importers only);
* in it a :class:`RunReport` per ``run_id``, whose ``items`` is the run's timeline: a
  :class:`Call` per ``tool_call`` record and a :class:`Compaction` per ``compaction_retry``;
* a :class:`DetectionRow` per detection: every ``tool_call`` whose ``detection.stuck`` is
  true (action ``warn`` when the warning was emitted, ``suppressed`` when docs/detection-rules.md §6 dedupe kept
  it back, ``block`` when critical), and every post-compaction abort (detector
  ``compaction_loop_persisted``, level critical, action ``abort``), as
  :class:`~streams.offline.replay.ReplaySummary` counts them;
* :class:`Totals` for the fleet and for each session.

``tool_result`` records add nothing but an abort (attached to the call they answer), and a late
one (``late: true``: the runner ran the call without its verdict) turns the call it answers, when
that call's verdict had refused it, into a call that ran: status ``allow``, not counted as a block,
abort or refusal, its refusing findings counted under action ``late`` (the call is the one the
result's ``corrects`` names, else the run's call of the same tool call id);
``ignore`` verdicts are skipped.

Where a call was recorded (``file:line``) is the record's ``source`` when it has a ``path``
(replayed recorded sessions, and event files replayed by ``loopwatch report --format
events``), else its ``event_source`` (the worker's verdicts keep the event's own ``source``
there and put the Kafka position in ``source``).

A verdict the worker published again after a crash (docs/worker.md: byte for byte the same) is counted once: :class:`Repeats` recognises a record whose ``source`` is a Kafka
position ``{topic, partition, offset}`` already seen with the same content. Records without a
Kafka position (``loopwatch replay``'s) are never merged: each is one event the engine applied,
and an event file holding the same event twice gives two identical verdict records.

Size: the report's whole data model (a dataclass per level, the aggregation, the repeat
filter) stays in one module so that the text and HTML renderers read one model.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from streams.detection.decision import findings
from streams.detection.fleet import FleetCorrelator, FleetSettings, observation

__all__ = [
    "STATUSES",
    "Call",
    "Compaction",
    "DetectionRow",
    "RunReport",
    "SessionReport",
    "Totals",
    "Report",
    "Repeats",
    "build_report",
    "call_status",
    "file_position",
    "kafka_position",
    "plural",
    "where",
]

# Timeline colours, worst last: what happened to a call.
STATUSES = ("allow", "suppressed", "warn", "block", "abort")

ABORT_DETECTOR = "compaction_loop_persisted"
NO_RUN = "(no run id)"
NO_SESSION = "(no session id)"


def where(source: Mapping[str, Any] | None, relative_to: str | None = None, basename: bool = False) -> str:
    """``file:line`` of a source position (``file:line step N`` for a step of a ``.traj`` file).

    The path is shown relative to ``relative_to`` (default: the working directory) when it
    lies below it, else as recorded; only its last component with ``basename``. ``"-"`` when
    there is no source.
    """
    if not source or not source.get("path"):
        return "-"
    path = str(source["path"])
    if basename:
        shown = os.path.basename(path)
    else:
        base = relative_to if relative_to is not None else os.getcwd()
        try:
            rel = os.path.relpath(path, base)
        except ValueError:  # another drive (Windows)
            rel = path
        shown = path if rel.startswith("..") else rel
    text = f"{shown}:{source.get('line', '?')}"
    if source.get("step") is not None:
        text += f" step {source['step']}"
    return text


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def file_position(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where the record's event was recorded (``{path, line, ...}``): ``source``, else ``event_source``; or None."""
    for name in ("source", "event_source"):
        value = record.get(name)
        if isinstance(value, dict) and value.get("path"):
            return value
    return None


def kafka_position(record: Mapping[str, Any]) -> tuple[Any, Any, Any] | None:
    """``(topic, partition, offset)`` of the input event a worker's verdict answers, or None (replay output)."""
    source = record.get("source")
    if isinstance(source, dict) and all(k in source for k in ("topic", "partition", "offset")):
        return source["topic"], source["partition"], source["offset"]
    return None


# Fields ``loopwatch tail --json`` puts before each record: the verdict's own position and time
# on the verdicts topic, which differ when the worker publishes the same verdict again.
TAIL_FIELDS = ("partition", "offset", "timestamp")


class Repeats:
    """Recognises a verdict published again: same Kafka ``source`` and same content as an earlier record.

    The content is the whole record but :data:`TAIL_FIELDS`. ``repeated`` counts the records
    recognised; ``conflicting`` those with the Kafka position of an earlier record but other
    content (two workers, or a configuration changed across a restart): they are not repeats
    and are counted as events.
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[Any, Any, Any], set[bytes]] = {}
        self.repeated = 0
        self.conflicting = 0

    def is_repeat(self, record: Mapping[str, Any]) -> bool:
        position = kafka_position(record)
        if position is None:
            return False
        content = {k: v for k, v in record.items() if k not in TAIL_FIELDS}
        digest = hashlib.blake2b(json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                                 .encode("utf-8", "surrogatepass"), digest_size=16).digest()  # JSON has lone ones
        seen = self._seen.setdefault(position, set())
        if digest in seen:
            self.repeated += 1
            return True
        if seen:
            self.conflicting += 1
        seen.add(digest)
        return False


def call_status(record: Mapping[str, Any]) -> str:
    """What happened to a tool call, one of :data:`STATUSES` (abort first, then the detection)."""
    if record.get("verdict") == "abort":
        return "abort"
    if record.get("verdict") == "block":  # OpenClaw's block, a loopwatch policy's or the fleet breaker's
        return "block"
    for finding in findings(record):
        if finding["enforced"] and finding["action"] in ("warn", "suppressed"):
            return finding["action"]
    return "allow"


@dataclass
class DetectionRow:
    """One detection: what fired, what it led to, and where the call was recorded."""

    session_id: str
    run_id: str
    tool: str
    detector: str
    level: str
    action: str  # warn, suppressed, block, abort; would_* for a shadow finding; late: a block or abort the runner
    # did not wait for (the call ran: its result came back ran_without_verdict)
    count: int | None
    message: str
    source: dict[str, Any] | None
    event_id: str | None
    kind: str = "detection"  # what decided (streams.detection.decision.KINDS)
    enforced: bool = True  # False: a shadow finding
    rule: str | None = None  # the loopwatch rule's name or the fleet loop's signature

    def where(self, relative_to: str | None = None, basename: bool = False) -> str:
        return where(self.source, relative_to, basename)


@dataclass
class Call:
    """A tool call on a run's timeline."""

    event_id: str | None
    tool_call_id: str | None
    tool: str
    status: str  # one of STATUSES
    verdict: str
    detection: dict[str, Any] | None  # the engine's detection when stuck, else None
    source: dict[str, Any] | None
    abort: dict[str, Any] | None = None  # the finding that aborted the run (decided_by), when the call aborted

    kind = "call"

    @property
    def count(self) -> int | None:
        if self.abort is not None and self.status == "abort":
            return self.abort.get("count")
        return self.detection.get("count") if self.detection else None

    @property
    def message(self) -> str:
        if self.abort is not None and self.status == "abort":
            return str(self.abort.get("message") or "")
        return str(self.detection.get("message") or "") if self.detection else ""

    @property
    def label(self) -> str:
        """``block generic_repeat/critical`` style: the status and, if any, what fired."""
        if self.status == "abort" and self.abort is None and self.detection:  # 2026.9.6's terminal block
            return f"abort {self.detection.get('detector')}/{self.detection.get('level')}"
        if self.status == "abort":
            return f"abort {(self.abort or {}).get('detector') or ABORT_DETECTOR}/critical"
        if self.detection:
            return f"{self.status} {self.detection.get('detector')}/{self.detection.get('level')}"
        return self.status


@dataclass
class Compaction:
    """A compaction followed by a retry (arms the post-compaction guard)."""

    event_id: str | None
    source: dict[str, Any] | None

    kind = "compaction"


@dataclass
class Totals:
    """Counts for a session or the fleet."""

    sessions: int = 0
    runs: int = 0
    calls: int = 0
    warnings_emitted: int = 0
    warnings_suppressed: int = 0
    blocks: int = 0
    aborts: int = 0
    compactions: int = 0
    refused: int = 0  # events of a run that had already ended (run_ended), not counted in aborts
    late: int = 0  # results of calls the runner ran without their verdict (late: true)
    # (detector, level, action) -> count
    detections: Counter = field(default_factory=Counter)
    # what decided: (kind, rule or "", action, enforced) -> findings (decided_by, shadow included)
    decisions: Counter = field(default_factory=Counter)
    # (dimension: tool, agent or runner; its value; status) -> tool calls (status: one of STATUSES, or
    # "refused" for a call of an ended run); agent and runner only for records that carry them
    by: Counter = field(default_factory=Counter)

    @property
    def detection_count(self) -> int:
        return sum(self.detections.values())

    def by_detector(self) -> list[tuple[str, str, Counter]]:
        """``(detector, level, Counter(action -> n))`` sorted by detector then level."""
        grouped: dict[tuple[str, str], Counter] = {}
        for (detector, level, action), n in self.detections.items():
            grouped.setdefault((detector, level), Counter())[action] += n
        return [(d, lvl, c) for (d, lvl), c in sorted(grouped.items())]

    def add_record(self, record: Mapping[str, Any], rows: list[DetectionRow]) -> None:
        kind = record.get("type")
        if kind == "tool_call":
            self.calls += 1
            if record.get("verdict") == "block":
                self.blocks += 1
            status = call_status(record)
            shown = "refused" if "run_ended" in record else status
            self.by[("tool", str(record.get("tool_name") or "tool"), shown)] += 1
            for dimension, name in (("agent", "agent_id"), ("runner", "runner")):
                if record.get(name) is not None:
                    self.by[(dimension, str(record[name]), shown)] += 1
            if status == "warn":
                self.warnings_emitted += 1
            elif status == "suppressed":
                self.warnings_suppressed += 1
        elif kind == "compaction_retry":
            self.compactions += 1
        if "run_ended" in record:
            self.refused += 1
        elif record.get("verdict") == "abort":
            self.aborts += 1
        if record.get("late"):
            self.late += 1
        for row in rows:
            self.detections[(row.detector, row.level, row.action)] += 1
            self.decisions[(row.kind, row.rule or "", row.action, row.enforced)] += 1

    def ran_late(self, call: "Call", result: Mapping[str, Any], rows: list[DetectionRow]) -> None:
        """Count ``call`` (refused by its verdict, status ``block`` or ``abort``) as run: its ``result`` came
        back ``late`` (docs/events-and-verdicts.md, Late calls). Its findings that refused it (in
        ``rows``, the run's) count under action ``late`` instead; agent and runner are the result's."""
        refused = bool(call.abort) and call.abort.get("kind") == "run_end"
        if refused:
            self.refused -= 1
        elif call.status == "abort":
            self.aborts -= 1
        else:
            self.blocks -= 1
        shown = "refused" if refused else call.status
        for dimension, value in (("tool", call.tool), ("agent", result.get("agent_id")),
                                 ("runner", result.get("runner"))):
            if value is not None and self.by[(dimension, str(value), shown)] > 0:
                self.by[(dimension, str(value), shown)] -= 1
                self.by[(dimension, str(value), "allow")] += 1
        for row in rows:
            if row.event_id == call.event_id and row.enforced and row.action in ("block", "abort"):
                self.detections[(row.detector, row.level, row.action)] -= 1
                self.detections[(row.detector, row.level, "late")] += 1
                self.decisions[(row.kind, row.rule or "", row.action, True)] -= 1
                self.decisions[(row.kind, row.rule or "", "late", True)] += 1
        for counter in (self.by, self.detections, self.decisions):
            for key in [key for key, n in counter.items() if n <= 0]:
                del counter[key]  # a table shows no action nothing took

    def breakdown(self, dimension: str = "tool") -> list[tuple[str, Counter]]:
        """``(tool, agent or runner, Counter(status -> calls))``, the most calls in loops first (then by calls);
        empty for an agent or runner no record named."""
        grouped: dict[str, Counter] = {}
        for (dim, value, status), n in self.by.items():
            if dim == dimension:
                grouped.setdefault(value, Counter())[status] += n
        return sorted(grouped.items(), key=lambda item: (-sum(n for st, n in item[1].items() if st != "allow"),
                                                         -sum(item[1].values()), item[0]))

    @property
    def wasted_calls(self) -> dict[str, int]:
        """Calls the loops cost: ``ran`` (run while a detector flagged them: warned or suppressed), ``blocked``
        (tried and blocked), ``refused`` (tried after their run had ended)."""
        counts: Counter = Counter()
        for (dim, _, status), n in self.by.items():
            if dim == "tool":
                counts[status] += n
        return {"ran": counts["warn"] + counts["suppressed"], "blocked": counts["block"] + counts["abort"],
                "refused": counts["refused"]}


@dataclass
class RunReport:
    run_id: str
    items: list[Call | Compaction] = field(default_factory=list)
    detections: list[DetectionRow] = field(default_factory=list)

    @property
    def calls(self) -> list[Call]:
        return [item for item in self.items if isinstance(item, Call)]

    def status_counts(self) -> Counter:
        return Counter(call.status for call in self.calls)


@dataclass
class SessionReport:
    session_id: str
    files: list[str] = field(default_factory=list)
    runs: dict[str, RunReport] = field(default_factory=dict)
    totals: Totals = field(default_factory=Totals)

    @property
    def detections(self) -> list[DetectionRow]:
        return [row for run in self.runs.values() for row in run.detections]

    def run(self, run_id: str) -> RunReport:
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = RunReport(run_id)
            self.totals.runs += 1
        return run


@dataclass
class Report:
    """Everything the renderers show."""

    sessions: dict[str, SessionReport] = field(default_factory=dict)
    totals: Totals = field(default_factory=Totals)
    bad_records: int = 0
    config: str | None = None  # what the verdicts were computed under, for the header
    repeated: int = 0  # verdicts published again (same Kafka source, same content), counted once
    without_ts: int = 0  # tool calls and results without an event time: not counted in fleet loops
    conflicting: int = 0  # records with the Kafka source of an earlier, different record (both counted)
    fleet_loops: list = field(default_factory=list)  # fleet_loop records (streams.detection.fleet)

    def worst_sessions(self) -> list[SessionReport]:
        """Sessions worst first: by aborts, then blocks, then emitted warnings, then suppressed ones
        (ties in order of first appearance)."""
        order = {sid: n for n, sid in enumerate(self.sessions)}
        return sorted(self.sessions.values(), key=lambda s: (-s.totals.aborts, -s.totals.blocks,
                                                             -s.totals.warnings_emitted, -s.totals.warnings_suppressed,
                                                             order[s.session_id]))

    def fleet_signatures(self, top: int | None = None) -> list[dict[str, Any]]:
        """The fleet loops grouped by signature, the most runs first, at most ``top``.

        Each: ``{signature, kind, tool, message (its first record's), windows (records: one per window
        length while the loop lasted), runs (distinct runs named by its records' examples), agents,
        events (observations counted when each record was published), first_seen, last_seen}``.
        """
        groups: dict[str, dict[str, Any]] = {}
        for loop in self.fleet_loops:
            group = groups.get(loop["signature"])
            if group is None:
                group = groups[loop["signature"]] = {
                    "signature": loop["signature"], "kind": loop["kind"], "tool": loop["tool"],
                    "message": loop["message"], "windows": 0, "run_ids": set(), "agent_ids": set(), "events": 0,
                    "first_seen": loop["first_seen"], "last_seen": loop["last_seen"]}
            group["windows"] += 1
            group["run_ids"].update(example["run"] for example in loop["examples"])
            group["agent_ids"].update(loop["agents"])
            group["events"] += loop["events"]
            group["first_seen"] = min(group["first_seen"], loop["first_seen"])
            group["last_seen"] = max(group["last_seen"], loop["last_seen"])
        out = []
        for group in groups.values():
            runs, agents = group.pop("run_ids"), group.pop("agent_ids")
            out.append({**group, "runs": len(runs), "agents": sorted(agents), "examples": sorted(runs)[:5]})
        out.sort(key=lambda g: (-g["runs"], -g["windows"], g["first_seen"], g["signature"]))
        return out if top is None else out[:top]

    @property
    def detections(self) -> list[DetectionRow]:
        return [row for session in self.sessions.values() for row in session.detections]

    def base_dir(self) -> str | None:
        """The deepest folder holding every session file (paths are shown relative to it), if any."""
        dirs = {os.path.dirname(path) for session in self.sessions.values() for path in session.files}
        if not dirs:
            return None
        try:
            return os.path.commonpath(sorted(dirs)) or None
        except ValueError:  # relative and absolute paths mixed
            return None

    def input_notes(self) -> list[str]:
        """What was left out of the input, or counted although it looks doubtful, one sentence each."""
        notes = []
        if self.bad_records:
            notes.append(f"{plural(self.bad_records, 'bad record')} skipped")
        if self.repeated:
            notes.append(f"{plural(self.repeated, 'repeated verdict record')} ignored (published again by the "
                         "worker after a restart: same source topic/partition/offset, same content)")
        if self.conflicting:
            notes.append(f"{plural(self.conflicting, 'verdict record')} with the source topic/partition/offset "
                         "of an earlier, different record: counted as well")
        if self.without_ts:
            notes.append(f"{plural(self.without_ts, 'record')} of tool calls and results without an event "
                         "time (ts): not counted in fleet loops (their windows are event time)")
        return notes

    def session_names(self) -> dict[str, str]:
        """Session id -> the name to show: its file's name when it has one file of its own, else its id.

        Sessions replayed from one event file share that file: they are shown by id.
        """
        sharing = Counter(path for session in self.sessions.values() for path in session.files)
        return {sid: session.files[0].rsplit("/", 1)[-1]
                if len(session.files) == 1 and sharing[session.files[0]] == 1 else sid
                for sid, session in self.sessions.items()}

    def add(self, record: Mapping[str, Any]) -> None:
        """Add one verdict record (in stream order)."""
        session_id = str(record.get("session_id") or record.get("key") or NO_SESSION)
        run_id = str(record.get("run_id") or NO_RUN)
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = SessionReport(session_id)
            self.totals.sessions += 1
        before = session.totals.runs
        run = session.run(run_id)
        self.totals.runs += session.totals.runs - before
        source = file_position(record)
        if source and source["path"] not in session.files:
            session.files.append(str(source["path"]))

        rows = _detection_rows(record, session_id, run_id, source)
        kind = record.get("type")
        if kind == "tool_call":
            detection = record.get("detection") or {}
            run.items.append(Call(
                event_id=record.get("event_id"), tool_call_id=record.get("tool_call_id"),
                tool=str(record.get("tool_name") or "tool"), status=call_status(record),
                verdict=str(record.get("verdict")), detection=detection if detection.get("stuck") else None,
                source=source, abort=_abort_of(record),
            ))
        elif kind == "compaction_retry":
            run.items.append(Compaction(record.get("event_id"), source))
        elif kind == "tool_result":
            ran = _ran_after_all(run, record) if record.get("late") else None
            if ran is not None:  # the call ran: not a block, whatever its verdict said
                for totals in (session.totals, self.totals):
                    totals.ran_late(ran, record, run.detections)
                for row in run.detections:
                    if row.event_id == ran.event_id and row.enforced and row.action in ("block", "abort"):
                        row.action = "late"
                ran.status = "allow"
            if record.get("verdict") == "abort" and "run_ended" not in record:
                _attach_abort(run, record, source)
        run.detections.extend(rows)
        session.totals.add_record(record, rows)
        self.totals.add_record(record, rows)


def _abort_of(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The finding that aborted the run (``decided_by`` when its action is abort), else None."""
    for finding in findings(record):
        if finding["enforced"] and finding["action"] == "abort":
            return finding
    return None


def _ran_after_all(run: RunReport, record: Mapping[str, Any]) -> Call | None:
    """A late result (``late: true``): its call ran without its verdict. The call, when its verdict had
    refused it (``block``, ``abort``), else None: the call the result ``corrects`` (by the call's
    event id), or for records of workers before ``corrects`` the run's call of the same tool call id."""
    corrects = record.get("corrects")
    call_id = record.get("tool_call_id")
    for item in reversed(run.items):
        if not isinstance(item, Call):
            continue
        if item.event_id == corrects.get("event_id") if isinstance(corrects, Mapping) else \
                call_id and item.tool_call_id == call_id:
            return item if item.status in ("block", "abort") else None
    return None


def _attach_abort(run: RunReport, record: Mapping[str, Any], source: dict[str, Any] | None) -> None:
    call_id = record.get("tool_call_id")
    for item in reversed(run.items):
        if isinstance(item, Call) and call_id and item.tool_call_id == call_id:
            item.status = "abort"
            item.abort = _abort_of(record) or {}
            return
    run.items.append(Call(
        event_id=record.get("event_id"), tool_call_id=call_id, tool=str(record.get("tool_name") or "tool"),
        status="abort", verdict="abort", detection=None, source=source,
        abort=_abort_of(record) or {},
    ))


def _detection_rows(record: Mapping[str, Any], session_id: str, run_id: str,
                    source: dict[str, Any] | None) -> list[DetectionRow]:
    """One row per finding of the record's ``decided_by`` (:func:`streams.detection.decision.findings`)."""
    tool = str(record.get("tool_name") or "tool")
    return [
        DetectionRow(session_id, run_id, tool, str(f["detector"]), str(f["level"]), f["action"], f["count"],
                     str(f["message"] or ""), source, record.get("event_id"), f["kind"], f["enforced"], f["rule"])
        for f in findings(record) if f["kind"] != "run_end"  # an ended run's later events: counted as refused
    ]


def build_report(records: Iterable[Mapping[str, Any]], config: str | None = None,
                 fleet_loops: list[dict[str, Any]] | None = None, fleet: FleetSettings | None = None) -> Report:
    """Aggregate verdict records (in stream order) into a :class:`Report`; a worker's verdict published
    again counts once (:class:`Repeats`).

    ``fleet_loops``: the fleet loops found while replaying (the replayer's, with agents); when None,
    they are computed here from the records with ``fleet`` settings (default: the defaults), by the
    same code (:class:`~streams.detection.fleet.FleetCorrelator`; agents as the records name them, ``agent_id``).
    """
    report = Report(config=config)
    repeats = Repeats()
    correlator = FleetCorrelator(fleet or FleetSettings()) if fleet_loops is None else None
    found: list[dict[str, Any]] = []
    observed = 0
    for record in records:
        if repeats.is_repeat(record) or record.get("verdict") == "ignore":
            continue
        report.add(record)
        ts = record.get("event_ts")
        if record.get("type") in ("tool_call", "tool_result") and (type(ts) not in (int, float) or not 0 < ts < 1e15):
            report.without_ts += 1
        if correlator is not None:
            obs = observation(record, correlator.settings, record.get("agent_id"))
            if obs is not None:
                found.extend(correlator.observe(obs))
                observed += 1
                if observed % 4096 == 0:
                    correlator.expire()
    report.repeated, report.conflicting = repeats.repeated, repeats.conflicting
    report.fleet_loops = found if fleet_loops is None else list(fleet_loops)
    return report
