"""The report's aggregation model: verdict records -> sessions, runs, calls, detections, totals.

:func:`build_report` reads the verdict records that ``loopwatch replay`` writes (or that a
:class:`~streams.offline.replay.Replayer` returns), in order, and groups them:

* a :class:`SessionReport` per ``session_id`` (in order of first appearance), with the files
  its calls came from (``source.path``, importers only);
* in it a :class:`RunReport` per ``run_id``, whose ``items`` is the run's timeline: a
  :class:`Call` per ``tool_call`` record and a :class:`Compaction` per ``compaction_retry``;
* a :class:`~.items.DetectionRow` per finding of a record's ``decided_by`` (enforced or shadow;
  an ended run's refusals are counted, not listed), as
  :class:`~streams.offline.replay.ReplaySummary` counts them;
* :class:`~.totals.Totals` for the fleet and for each session;
* the fleet loops (:mod:`.fleet_view`), counted over every observation in their windows.

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

A verdict the worker published again after a crash is counted once (:class:`~.records.Repeats`).

The other modules of the package: :mod:`.records` (how a record is read: positions, status,
repeats), :mod:`.items` (a run's timeline), :mod:`.totals` (the counts), :mod:`.fleet_view`.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from streams.detection.decision import findings
from streams.detection.fleet import FleetCorrelator, FleetSettings, observation
from streams.wire.verdicts import PROBE_RUN, is_probe

from .fleet_view import Observations, fleet_signatures
from .items import Call, Compaction, DetectionRow
from .over_time import OverTime
from .records import (NO_RUN, NO_SESSION, STATUSES, Repeats, call_status, event_time, file_position, kafka_position,
                      plural, where)
from .totals import Totals
from .usage import Usage

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
    probes: int = 0  # verdicts of the gateway's /readyz probes (streams.wire.verdicts.PROBE_RUN): left out
    conflicting: int = 0  # records with the Kafka source of an earlier, different record (both counted)
    fleet_loops: list = field(default_factory=list)  # fleet_loop records (streams.detection.fleet)
    observations: Observations | None = None  # every fleet observation of the records (.fleet_view)
    over_time: OverTime = field(default_factory=OverTime)  # calls per minute of event time (.over_time)
    usage: Usage = field(default_factory=Usage)  # model turns and wasted calls, for wasted tokens (.usage)

    def worst_sessions(self) -> list[SessionReport]:
        """Sessions worst first: by aborts, then blocks, then emitted warnings, then suppressed ones
        (ties in order of first appearance)."""
        order = {sid: n for n, sid in enumerate(self.sessions)}
        return sorted(self.sessions.values(), key=lambda s: (-s.totals.aborts, -s.totals.blocks,
                                                             -s.totals.warnings_emitted, -s.totals.warnings_suppressed,
                                                             order[s.session_id]))

    def fleet_signatures(self, top: int | None = None) -> list[dict[str, Any]]:
        """The fleet loops grouped by signature, the most runs first (:func:`.fleet_view.fleet_signatures`:
        counted over the observations in each published window)."""
        return fleet_signatures(self.fleet_loops, self.observations, top)

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
        if self.probes:
            notes.append(f"{plural(self.probes, 'verdict')} of the gateway's /readyz probes (run {PROBE_RUN}) "
                         "left out: no agent's work")
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
            call = Call(
                event_id=record.get("event_id"), tool_call_id=record.get("tool_call_id"),
                tool=str(record.get("tool_name") or "tool"), status=call_status(record),
                verdict=str(record.get("verdict")), detection=detection if detection.get("stuck") else None,
                source=source, abort=_abort_of(record), ts=event_time(record),
            )
            call.turn = self.usage.add_call(record, call.status != "allow")
            if call.ts is not None:
                self.over_time.add(call.ts, call.status)
            run.items.append(call)
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
                if ran.ts is not None:
                    self.over_time.restatus(ran.ts, ran.status, "allow")
                ran.status = "allow"
            if record.get("verdict") == "abort" and "run_ended" not in record:
                call, before = _attach_abort(run, record, source)
                for totals in (session.totals, self.totals):
                    totals.restatus(record, before, "abort")  # the call it answers: aborted
                if before is None:
                    call.turn = self.usage.add_call(record, True)
                elif before == "allow":
                    self.usage.waste(call.turn)
                if call.ts is not None and before is not None:
                    self.over_time.restatus(call.ts, before, "abort")
                elif call.ts is not None:
                    self.over_time.add(call.ts, "abort")
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
            return item if item.status in ("block", "abort", "refused") else None
    return None


def _attach_abort(run: RunReport, record: Mapping[str, Any], source: dict[str, Any] | None
                  ) -> tuple[Call, str | None]:
    """Mark the call a ``tool_result`` abort answers as aborted (one is added when the run has none of that
    tool call id); the call and its status before (None for an added call)."""
    call_id = record.get("tool_call_id")
    for item in reversed(run.items):
        if isinstance(item, Call) and call_id and item.tool_call_id == call_id:
            before, item.status = item.status, "abort"
            item.abort = _abort_of(record) or {}
            return item, before
    call = Call(event_id=record.get("event_id"), tool_call_id=call_id, tool=str(record.get("tool_name") or "tool"),
                status="abort", verdict="abort", detection=None, source=source, abort=_abort_of(record) or {},
                ts=event_time(record))
    run.items.append(call)
    return call, None


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

    ``fleet``: the fleet view's settings (default: the defaults), with which each record's fleet
    observation is made (:func:`~streams.detection.fleet.observation`; agents as the records name
    them, ``agent_id``). ``fleet_loops``: the fleet loops found while replaying (the replayer's, made
    with the same settings); when None, they are computed here from the observations by the same code
    (:class:`~streams.detection.fleet.FleetCorrelator`). Either way the report counts each loop over
    the observations in its windows (:mod:`.fleet_view`).
    """
    report = Report(config=config, observations=Observations())
    repeats = Repeats()
    settings = fleet or FleetSettings()
    correlator = FleetCorrelator(settings) if fleet_loops is None else None
    found: list[dict[str, Any]] = []
    observed = 0
    for record in records:
        if is_probe(record):  # a gateway's /readyz probe: no agent's work
            report.probes += 1
            continue
        if repeats.is_repeat(record) or record.get("verdict") == "ignore":
            continue
        report.add(record)
        if record.get("type") in ("tool_call", "tool_result") and event_time(record) is None:
            report.without_ts += 1
        obs = observation(record, settings, record.get("agent_id"))
        if obs is None:
            continue
        report.observations.add(obs)
        if correlator is not None:
            found.extend(correlator.observe(obs))
            observed += 1
            if observed % 4096 == 0:
                correlator.expire()
    report.repeated, report.conflicting = repeats.repeated, repeats.conflicting
    report.fleet_loops = found if fleet_loops is None else list(fleet_loops)
    return report
