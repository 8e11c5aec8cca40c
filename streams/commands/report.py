"""``loopwatch report``: what loop detection found, per session and for the fleet; backtesting."""

from __future__ import annotations

import json
import sys
from typing import Any, Iterator

import click
from click.core import ParameterSource

from streams.wire.codecs import read_event_file
from ..detection import Engine, EventError, OpenClawConfig
from ..detection.fleet import fleet_settings
from ..detection.profiles import DEFAULT_PROFILE, OPENCLAW_2026_9_6, PROFILES
from ..importers import AUTO, FORMATS
from streams.wire.keys import KEY_BY
from streams.offline.replay import Replayer
from ..report import build_report, compare, render_comparison_text, render_html, render_text
from ..report.text import TOP
from .bad_input import SkipReport, exit_without_events
from .config_line import announce_config
from .progress import progress_option
from .replay import (config_option, config_validate_option, event_records, load_config_or_exit, profile_option,
                     existing_files, reject_folders, session_files)

__all__ = ["report"]

_SESSION_FORMATS = (AUTO, *sorted(FORMATS))
_EVENT_TYPES = ("tool_call", "tool_result", "compaction_retry")


# The fields of a verdict record the report reads, by the types they may have (None always may). A
# record of another shape (a file of other JSON, a hand-edited line) is skipped with the field named,
# rather than ending the report in a traceback half-way.
_TEXT = (str,)
_FIELDS: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("type", "tool_name", "run_id", "session_id", "session_key", "key", "event_id",
                     "tool_call_id", "decision", "args_hash", "agent_id", "runner"), _TEXT),
    **dict.fromkeys(("detection", "guard", "warning", "outcome", "source", "policy", "event_source", "decided_by"),
                   (dict,)),
    "blocked": (bool,), "evidence": (list,), "event_ts": (int, float),
}
_NESTED: dict[str, dict[str, tuple[type, ...]]] = {
    "detection": {"stuck": (bool,), "detector": _TEXT, "level": _TEXT, "count": (int,), "message": _TEXT,
                  "warning_key": _TEXT},
    "guard": {"abort": (bool,), "detector": _TEXT, "count": (int,), "message": _TEXT, "tool_name": _TEXT},
    "warning": {"emitted": (bool,)},
    "outcome": {"result_hash": _TEXT, "unknown_tool_name": _TEXT, "recorded": (bool,)},
    "policy": {"verdict": _TEXT},
    "source": {"path": _TEXT, "line": (int,), "step": (int,), "topic": _TEXT, "partition": (int,),
               "offset": (int,)},
}


def verdict_problem(record: dict[str, Any]) -> str | None:
    """Why ``record`` cannot be reported (a field of a type the report cannot read; content JSON cannot
    hold, such as msgpack bytes, or nesting too deep), or None for a usable verdict record."""
    if not isinstance(record.get("verdict"), str):
        return "not a verdict record (an object with a 'verdict' field)"
    for name, kinds in _FIELDS.items():
        value = record.get(name)
        if value is not None and (not isinstance(value, kinds) or (kinds != (bool,) and isinstance(value, bool))):
            return f"not a verdict record: {name} is a {type(value).__name__}"
        for inner, inner_kinds in _NESTED.get(name, {}).items():
            item = value.get(inner) if isinstance(value, dict) else None
            if item is not None and (not isinstance(item, inner_kinds)
                                     or (inner_kinds != (bool,) and isinstance(item, bool))):
                return f"not a verdict record: {name}.{inner} is a {type(item).__name__}"
    try:  # what the report does with a whole record (telling a republished verdict from a new one)
        json.dumps(record, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"not a verdict record: {type(exc).__name__}: {exc}"
    return None


def _verdict_records(paths: tuple[str, ...], skipped: SkipReport) -> Iterator[dict[str, Any]]:
    """Verdict records from JSON Lines files (``-`` = stdin); a bad line is reported to ``skipped``.

    A file whose first record is an event is a usage error.
    """
    reject_folders(paths, "verdict")
    for path in paths:
        first = True
        stream = click.get_binary_stream("stdin") if path == "-" else None
        for record in read_event_file(path, stream):
            value = record.event
            problem = verdict_problem(value) if value is not None and "verdict" in value else None
            if value is not None and "verdict" in value and problem is None:
                first = False
                yield value
                continue
            if value is not None and first and value.get("type") in _EVENT_TYPES:
                raise click.UsageError(
                    f"{path} holds events, not verdicts (its first record is a {value['type']} event): "
                    "give --format events to replay them (with --config for your loop detection)")
            if value is not None:
                first = False
            reason = (record.error or problem or "not a verdict record (an object with a 'verdict' field)"
                      ).replace("an event must be", "a verdict record must be")
            skipped(path, record.position, reason)


def _load_events(fmt: str, paths: tuple[str, ...], skipped: SkipReport, progress: bool | None = None
                 ) -> list[tuple[str, int, dict]]:
    """The events of event files or (a session ``fmt``) recorded sessions; a bad record is reported to
    ``skipped``. Recorded sessions without any event exit with status 1, as replay and import do."""
    inputs = session_files(fmt, paths, skipped) if fmt != "events" else existing_files("report", paths)
    out = []
    for path, position, event, error in event_records(fmt, inputs, progress):
        if event is None:
            skipped(path, position, error or "unreadable")
        else:
            if fmt == "events" and "source" not in event:  # where the call is: the event file's line
                event = {**event, "source": {"path": "<stdin>" if path == "-" else path, "line": position}}
            out.append((path, position, event))
    if fmt != "events" and not out:  # most likely the wrong --format
        exit_without_events("report", fmt, sum(f.format is not None for f in inputs), paths)
    return out


def _replay(events: list[tuple[str, int, dict]], config_path: str | None, config: OpenClawConfig, key_by: str,
            skipped: SkipReport | None = None, fleet_loops: list | None = None) -> list[dict[str, Any]]:
    """Replay ``events`` under ``config`` (read from ``config_path``); an invalid event is reported to ``skipped``
    (when given). The fleet loops found are appended to ``fleet_loops`` (when given)."""
    engine = Engine(config)
    announce_config("report", config_path, engine)
    replayer = Replayer(engine, key_by=key_by)
    records = []
    for path, position, event in events:
        ref = event.get("event_id") or f"{path}:{position}"
        try:
            record = replayer.apply(event, ref)
        except EventError as exc:
            if skipped is not None:
                skipped(path, position, f"invalid event: {exc}")
            record = {"event_id": event.get("event_id"), "type": "invalid", "verdict": "ignore"}
        records.append(record)
    if fleet_loops is not None:
        fleet_loops.extend(replayer.fleet_loops)
    return records


def _label(path: str | None, config: OpenClawConfig, with_profile: bool) -> str:
    """How the report names a replay: the config file (or OpenClaw's defaults), and its profile when profiles
    are compared or it is not the default."""
    label = path or "OpenClaw defaults"
    return f"{label} [{config.profile}]" if with_profile or config.profile != DEFAULT_PROFILE else label


def _say_ignored_keys(path: str | None, config: OpenClawConfig) -> None:
    """On stderr: the keys of the global block that ``config``'s profile does not read (2026.9.6 reads only
    ``enabled``), so a backtest says what it ignored."""
    if config.profile != OPENCLAW_2026_9_6:
        return
    tools = config.raw.get("tools")
    block = tools.get("loopDetection") if isinstance(tools, dict) else None
    ignored = [key for key in block if key != "enabled"] if isinstance(block, dict) else []
    if ignored:
        click.echo(f"loopwatch report: under {OPENCLAW_2026_9_6} the keys {', '.join(ignored)} of "
                   f"{path}'s tools.loopDetection are ignored (that release fixes them)", err=True)


@click.command(
    epilog="""\b
Examples:
  loopwatch replay --config openclaw.json -o verdicts.jsonl events.jsonl
  loopwatch report verdicts.jsonl
  loopwatch report --format openclaw --config ~/.openclaw/openclaw.json ~/.openclaw/agents
  loopwatch report --format claude-code --html report.html ~/.claude/projects/myproj
  loopwatch report --format auto --config openclaw.json ~/fleet     # a mixed fleet, each file's format sniffed
  loopwatch report --format openclaw --config current.json --compare stricter.json ~/.openclaw/agents
  loopwatch report --format openclaw --config openclaw.json --compare-profile openclaw-2026.9.6 ~/.openclaw/agents
""",
)
@config_option
@config_validate_option
@profile_option
@click.option("--format", "fmt", default="verdicts", show_default=True,
              type=click.Choice(["verdicts", "events", *_SESSION_FORMATS]),
              help="Input: verdict JSON Lines written by `loopwatch replay`; or loopwatch event files, "
                   "or recorded sessions read through an importer (auto: each file's format told from its first "
                   "bytes, a mixed fleet), which are replayed here.")
@click.option("--compare", "compare_path", type=click.Path(exists=True, dir_okay=False),
              help="Backtest: replay the same events under this second openclaw.json (B) and show the "
                   "counts under --config (A) and B side by side, with every event whose verdict differs "
                   "(file:line, tool, run, event id), then the calls whose verdict is the same but whose "
                   "detection differs (e.g. a warning suppressed under A, nothing under B). "
                   "Needs --format events or a session format.")
@click.option("--compare-profile", type=click.Choice(PROFILES),
              help="Backtest two OpenClaw releases: replay the same events under this behaviour profile (B), with "
                   "--compare's config or else the same --config (its threshold keys are ignored under "
                   f"{OPENCLAW_2026_9_6}, as that release ignores them), beside A. Needs --format events or a "
                   "session format.")
@click.option("--key-by", type=click.Choice(KEY_BY), default="session", show_default=True,
              help="State scoping when replaying (see `loopwatch replay`).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, writable=True),
              help="Also write the report as one self-contained HTML page (summary and per-run timelines).")
@click.option("--top", type=click.IntRange(min=0), default=TOP, show_default=True,
              help="Sessions (worst first: by aborts, blocks, emitted warnings) and fleet loops (most runs first) "
                   "shown in detail; 0 = all.")
@click.option("-q", "--quiet", is_flag=True, help="No text report on stdout (with --html).")
@progress_option
@click.argument("files", nargs=-1, required=True, type=click.Path(allow_dash=True))
def report(config_path: str | None, config_validate: bool, profile: str | None, fmt: str, compare_path: str | None,
           compare_profile: str | None, key_by: str, html_path: str | None, top: int, quiet: bool,
           progress: bool | None, files: tuple[str, ...]) -> None:
    """Report the loops loop detection finds, per session and for the fleet.

    Per session: its runs and calls, and its detections by detector and
    level; each detection with the tool, count, message, what it led to
    (warn = warning emitted, suppressed = warning kept back by OpenClaw's
    dedupe, block, abort) and where the call was recorded (file:line): with
    a session format, the recorded session's line; with --format events,
    the event file's line (the record number in a msgpack file), or the
    recorded session's line for events that carry one (`loopwatch import`
    output); in verdict files, the file and line the records carry (replay
    and worker verdicts of recorded sessions), else '-'. A fleet summary:
    sessions, runs, calls, warnings emitted and suppressed, blocks and
    aborts, and detections per detector. The summary comes first
    (totals, fleet loops -- the same failing call in many runs within a
    window, options.fleet of the config, computed in event time as the
    worker does --, detections by detector, sessions worst first), then the
    --top worst sessions in detail.

    FILES are verdict JSON Lines from `loopwatch replay` or `loopwatch tail
    verdicts --json` (default), or, with --format, event files or recorded
    sessions that are replayed here under --config. With verdict files,
    --config gives the fleet view's settings only (options.fleet: give the
    worker's file), the verdicts being already decided. A verdict the worker
    published again after a restart (same source topic/partition/offset,
    same content) is counted once; the report says how many were ignored.
    A bad record is counted and skipped; the first 10 are reported on
    stderr with their file, line and reason, the rest in one line. The text
    report goes to stdout. Exit status 0, 1 when any record was skipped as
    bad (the report then does not cover the whole input) or, with a session
    format, when no event was found (as `loopwatch import`: is --format
    right?), or 2 for bad usage or an invalid configuration.
    """
    with SkipReport("report") as skipped:
        comparison = None
        if fmt == "verdicts":
            # --config only when typed: LOOPWATCH_CONFIG (and LOOPWATCH_CONFIG_VALIDATE) are the worker's
            # settings too, so they may well be set here.
            typed = click.get_current_context().get_parameter_source
            if compare_path or compare_profile or profile:
                raise click.UsageError("--compare replays events (so do --profile and --compare-profile): "
                                       "give --format events or a session format (verdict files are already decided)")
            # verdict files are already decided: --config gives only the fleet view's settings (options.fleet,
            # as the worker that wrote them had), typed on the command line only
            fleet = (fleet_settings(load_config_or_exit(config_path, strict=False).raw)
                     if config_path and typed("config_path") is ParameterSource.COMMANDLINE else None)
            if typed("config_validate") is ParameterSource.COMMANDLINE:
                click.echo("loopwatch report: --config-validate ignored: verdict files are reported as recorded "
                           "(it applies when --format events or a session format replays events)", err=True)
            records = list(_verdict_records(existing_files("report", files), skipped))
            if not records and skipped.count:
                raise click.UsageError("no verdict records in FILES; to replay events or recorded sessions "
                                       "give --format events (or auto, openclaw, claude-code, codex, swe-agent)")
            result = build_report(records, fleet=fleet)
        else:
            events = _load_events(fmt, files, skipped, progress)
            fleet_loops: list = []
            config_a = load_config_or_exit(config_path, strict=config_validate, profile=profile)
            records = _replay(events, config_path, config_a, key_by, skipped, fleet_loops)
            label_a = _label(config_path, config_a, bool(compare_profile))
            if compare_path or compare_profile:
                if compare_path:
                    config_b = load_config_or_exit(compare_path, strict=config_validate,
                                                   profile=compare_profile or profile)
                else:  # the same file, judged as the other release judges it
                    config_b = OpenClawConfig(config_a.raw, profile=compare_profile)
                    _say_ignored_keys(config_path, config_b)
                records_b = _replay(events, compare_path or config_path, config_b, key_by)
                comparison = compare(records, records_b, label_a,
                                     _label(compare_path or config_path, config_b, bool(compare_profile)),
                                     fleet=config_a.fleet)
                result = comparison.a
                result.fleet_loops = fleet_loops
            else:
                result = build_report(records, label_a, fleet_loops=fleet_loops, fleet=config_a.fleet)
        result.bad_records = skipped.count
        if not quiet:
            out = render_text(result, top=top or None)
            if comparison is not None:
                out += "\n" + render_comparison_text(comparison)
            sys.stdout.write(out)
            sys.stdout.flush()
        if html_path:
            try:
                with open(html_path, "w", encoding="utf-8", errors="backslashreplace") as fh:
                    fh.write(render_html(result, comparison, top=top or None))
            except OSError as exc:
                raise click.ClickException(f"cannot write {html_path}: {exc.strerror or exc}") from None
            click.echo(f"loopwatch report: wrote {html_path}", err=True)
    if skipped.count:
        sys.exit(1)
