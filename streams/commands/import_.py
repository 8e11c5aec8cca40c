"""``loopwatch import``: recorded agent sessions -> loopwatch events (JSON Lines or msgpack).

The conversion itself lives in :mod:`streams.importers` (which files, which format:
:mod:`streams.importers.inputs`); this module only parses options, writes the events and prints a
summary (files, events by type, runs, format errors; per format with ``--format auto``) to stderr.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import click

from streams.wire.codecs import encode_json, encode_msgpack
from streams.detection.events import EVENT_TYPES, EventError, validate_event
from streams.importers import AUTO, FORMATS, ConfigFile, FileNotRead, SessionFormatError, read_files

from .bad_input import LeftOut, SkipReport, exit_without_events, session_paths
from .progress import file_progress, progress_option

__all__ = ["import_"]

_LISTED = 10  # sub-agents read from progress records named one by one


@click.command(
    "import",
    epilog="""\b
Examples:
  loopwatch import ~/fleet > events.jsonl          # every runner's sessions, each file's format sniffed
  loopwatch import ~/.codex/sessions ~/.claude/projects -o events.jsonl
  loopwatch import --format openclaw ~/.openclaw/agents > events.jsonl
  loopwatch import --format codex --msgpack -o events.msgpack run.codex_stdout.jsonl
""",
)
@click.option(
    "--format", "fmt", default=AUTO, show_default=True, type=click.Choice([AUTO, *sorted(FORMATS)]),
    help="Recording format. auto: each file's own, told from its first bytes (a mixed fleet: OpenClaw "
         "transcripts, agent databases and export-trajectory bundles, Claude Code logs, Codex session files "
         "and `codex exec --json` output, SWE-agent trajectories, loopwatch event files); files of no known "
         "format are listed and left out. Or one format for every file: OpenClaw transcripts (*.jsonl, "
         "*.jsonl.reset.*, *.jsonl.deleted.*, with their .trajectory.jsonl sidecars), OpenClaw 2026.9 agent "
         "databases (openclaw-agent.sqlite, read-only) and export-trajectory events.jsonl, Claude Code session "
         "logs, Codex session files or `codex exec --json` output, or SWE-agent .traj files.",
)
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True, allow_dash=True), default="-",
              show_default=True, help="Where to write the events ('-' = stdout).")
@click.option("--msgpack", "use_msgpack", is_flag=True,
              help="Write a stream of msgpack maps instead of JSON Lines (an event holding a lone surrogate "
                   "is reported and skipped: msgpack cannot carry it).")
@progress_option
@click.argument("paths", nargs=-1, required=True, type=click.Path(allow_dash=True))
def import_(fmt: str, output: str, use_msgpack: bool, progress: bool | None, paths: tuple[str, ...]) -> None:
    """Convert recorded agent sessions into loopwatch events.

    Each PATH is a session file or a directory searched recursively. By
    default (--format auto) each file's format is told from its first bytes,
    so one import takes a whole fleet of runners; a file of no known format,
    or one that cannot be read, is listed with the reason and left out. With
    a --format, the format's files are read (a file named alone whatever its
    name). One event is written
    per tool call (with its result, or a tool_result event later when the runner recorded
    other calls in between), per compaction, in session order, with `runner`: the format
    that read it: the input of `loopwatch
    replay` and of the Kafka producer. A Claude Code sub-agent without its side file is read
    from the main log's progress records, and the summary names it (the first 10, then a count). A malformed line (not UTF-8, not JSON,
    not a record of the format), and an event --msgpack cannot carry (a string holding a
    lone surrogate, which JSON input can), is counted and skipped, and the first 10 are
    reported on stderr with file:line and reason, the rest in one line. So is an event
    replay would skip (of a type other than tool_call, tool_result, compaction_retry, or
    otherwise not in the event schema); the summary counts these and names the unknown types. A file that is
    not a session (no known format, a configuration file) or cannot be opened, and a PATH
    that does not exist while others do, is listed as left out and is no error. The summary
    on stderr has a line per format (files, events, runs). The exit status is 0 when every
    session read was read whole; 1 when a line or record of a session was skipped, a
    session file could be read only in part, or no event was found; 2 for bad usage or
    when no PATH exists (docs/offline.md, "Exit status").
    """
    errors = SkipReport("import", label="")  # the reasons are the importers' errors
    files = session_paths("import", fmt, paths, errors)
    by_type: Counter[str] = Counter()
    runs: set[tuple[Any, Any]] = set()
    per_format: dict[str, _Tally] = {}
    not_read = configs = 0
    from_progress: Counter[tuple[str, Any, Any]] = Counter()  # (file, session, sub-agent) -> events
    invalid: Counter[str | None] = Counter()  # events replay would skip: unknown type -> count; None: others
    encode = _msgpack if use_msgpack else _json_line

    def on_error(err: SessionFormatError) -> None:
        nonlocal not_read, configs
        if isinstance(err, FileNotRead):  # a whole file, no session data lost: listed, not an error
            not_read += 1
            configs += isinstance(err, ConfigFile)
            errors(err.path, err.line, LeftOut(err.reason))
        else:
            errors(err.path, err.line, err.reason)

    with errors, click.open_file(output, "wb") as sink, file_progress(len(files), progress, "import") as bar:
        for item in files:
            tally = per_format.setdefault(item.format, _Tally()) if item.format else None
            for event in read_files([item], on_error):
                try:
                    validate_event(event)
                except EventError as exc:  # replay and report would skip it: not written, named here
                    source = event.get("source") if isinstance(event, dict) else None
                    source = source if isinstance(source, dict) else {}
                    kind = event.get("type") if isinstance(event, dict) else None
                    invalid[kind if isinstance(kind, str) and kind not in EVENT_TYPES else None] += 1
                    errors(str(source.get("path", "?")), source.get("line"), f"invalid event: {exc}")
                    continue
                try:
                    sink.write(encode(event))
                except _Unwritable as exc:
                    source = event.get("source") or {}
                    errors(str(source.get("path", "?")), source.get("line"), str(exc))
                    continue
                by_type[event["type"]] += 1
                run = (event.get("session_id"), event.get("run_id"))
                runs.add(run)
                tally.events += 1
                tally.runs.add(run)
                source = event.get("source") or {}
                if source.get("via"):
                    from_progress[(str(source.get("path")), event.get("session_id"), event.get("agent_id"))] += 1
            if tally is not None:
                tally.files += 1
            bar.update(1)

    types = ", ".join(f"{n} {t}" for t, n in sorted(by_type.items())) or "no events"
    click.echo(f"loopwatch import: {len(files)} file(s), {sum(by_type.values())} event(s) ({types}), "
               f"{len(runs)} run(s), {errors.count} error(s)", err=True)
    if fmt == AUTO:
        for name, tally in sorted(per_format.items()):
            click.echo(f"loopwatch import: {name}: {tally.files} file(s), {tally.events} event(s), "
                       f"{len(tally.runs)} run(s)", err=True)
    if invalid:
        click.echo(f"loopwatch import: {sum(invalid.values())} event(s) left out as invalid, as replay skips them"
                   + _invalid_breakdown(invalid), err=True)
    if not_read or errors.left_out > not_read:
        config_note = f", {configs} of them configuration files" if configs else ""
        click.echo(f"loopwatch import: {not_read} file(s) left out (not sessions, or unreadable{config_note})"
                   + (f", {errors.left_out - not_read} path(s) not found" if errors.left_out > not_read else ""),
                   err=True)
    for (path, session, agent), count in sorted(from_progress.items(), key=str)[:_LISTED]:
        click.echo(f"loopwatch import: sub-agent {agent} of session {session} has no side file: "
                   f"{count} event(s) read from its progress records in {path}", err=True)
    if len(from_progress) > _LISTED:
        click.echo(f"loopwatch import: {len(from_progress) - _LISTED} more sub-agent(s) read from progress "
                   "records not listed", err=True)
    if not by_type:
        exit_without_events("import", fmt, len(files) - not_read, paths)
    if errors.count:
        sys.exit(1)


def _invalid_breakdown(invalid: Counter[str | None]) -> str:
    """``": type 'x' x2, 'y' x1; 3 otherwise invalid"``: the unknown types by name (most frequent first, the
    first 10), then the events invalid in another way."""
    types = sorted(((n, t) for t, n in invalid.items() if t is not None), key=lambda nt: (-nt[0], nt[1]))
    parts = []
    if types:
        named = ", ".join(f"{t!r} x{n}" for n, t in types[:_LISTED])
        more = f", {len(types) - _LISTED} more type(s)" if len(types) > _LISTED else ""
        parts.append(f"of no known type ({', '.join(EVENT_TYPES)}): {named}{more}")
    if invalid[None]:
        parts.append(f"{invalid[None]} otherwise invalid")
    return ": " + "; ".join(parts)


class _Tally:
    """What one format gave in an import: files read, events, runs."""

    __slots__ = ("files", "events", "runs")

    def __init__(self) -> None:
        self.files = 0
        self.events = 0
        self.runs: set[tuple[Any, Any]] = set()


class _Unwritable(ValueError):
    """An event the output format cannot carry; ``str()`` gives the reason."""


def _json_line(event: dict[str, Any]) -> bytes:
    """One JSON Lines record: UTF-8, or ASCII-escaped when the event holds a lone surrogate (JSON input
    can carry one), which reads back as the same event."""
    try:
        return encode_json(event) + b"\n"
    except (TypeError, ValueError, RecursionError) as exc:
        raise _Unwritable(f"cannot be written as JSON: {exc}") from None


def _msgpack(event: dict[str, Any]) -> bytes:
    """One msgpack map. No JSON fallback (as ``record_encoder`` has for Kafka records): a JSON record
    in a msgpack stream would not read back (``read_event_file`` reads a file as one or the other)."""
    try:
        return encode_msgpack(event)
    except UnicodeEncodeError:
        raise _Unwritable("cannot be written as msgpack: a string holds a lone surrogate "
                          "(JSON Lines output keeps it)") from None
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise _Unwritable(f"cannot be written as msgpack: {exc}") from None
