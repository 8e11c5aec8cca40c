"""``loopwatch import``: recorded agent sessions -> loopwatch events (JSON Lines or msgpack).

The conversion itself lives in :mod:`streams.importers`; this module only parses options,
writes the events and prints a summary (files, events by type, runs, format errors) to stderr.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import click

from streams.wire.codecs import encode_json, encode_msgpack
from streams.importers import FORMATS, import_paths, iter_files

from .bad_input import SkipReport, exit_without_events

__all__ = ["import_"]


@click.command(
    "import",
    epilog="""\b
Examples:
  loopwatch import --format openclaw ~/.openclaw/agents > events.jsonl
  loopwatch import --format claude-code ~/.claude/projects/my-proj -o events.jsonl
  loopwatch import --format codex --msgpack -o events.msgpack run.codex_stdout.jsonl
""",
)
@click.option(
    "--format", "fmt", required=True, type=click.Choice(sorted(FORMATS)),
    help="Recording format: OpenClaw transcripts (*.jsonl, *.jsonl.reset.*, *.jsonl.deleted.*, "
         "with their .trajectory.jsonl sidecars), OpenClaw 2026.9 agent databases "
         "(openclaw-agent.sqlite, read-only) and export-trajectory events.jsonl, Claude Code session "
         "logs, `codex exec --json` "
         "output, or SWE-agent .traj files.",
)
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True, allow_dash=True), default="-",
              show_default=True, help="Where to write the events ('-' = stdout).")
@click.option("--msgpack", "use_msgpack", is_flag=True,
              help="Write a stream of msgpack maps instead of JSON Lines (an event holding a lone surrogate "
                   "is reported and skipped: msgpack cannot carry it).")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, allow_dash=True))
def import_(fmt: str, output: str, use_msgpack: bool, paths: tuple[str, ...]) -> None:
    """Convert recorded agent sessions into loopwatch events.

    Each PATH is a session file (read whatever its name) or a directory searched recursively
    for the format's files (see --format). One event is written
    per tool call (with its result, or a tool_result event later when the runner recorded
    other calls in between), per compaction, in session order: the input of `loopwatch
    replay` and of the Kafka producer. A Claude Code sub-agent without its side file is read
    from the main log's progress records, and the summary names it. A malformed line (not UTF-8, not JSON,
    not a record of the format), and an event --msgpack cannot carry (a string holding a
    lone surrogate, which JSON input can), is counted and skipped, and the first 10 are
    reported on stderr with file:line and reason, the rest in one line; the exit status is
    1 when there was any, or when no event was found.
    """
    errors = SkipReport("import", label="")  # the reasons are the importers' errors
    files = list(iter_files(fmt, paths))
    by_type: Counter[str] = Counter()
    runs: set[tuple[Any, Any]] = set()
    from_progress: Counter[tuple[str, Any, Any]] = Counter()  # (file, session, sub-agent) -> events
    encode = _msgpack if use_msgpack else _json_line
    with errors, click.open_file(output, "wb") as sink:
        for event in import_paths(fmt, files, on_error=lambda err: errors(err.path, err.line, err.reason)):
            try:
                sink.write(encode(event))
            except _Unwritable as exc:
                source = event.get("source") or {}
                errors(str(source.get("path", "?")), source.get("line"), str(exc))
                continue
            by_type[event["type"]] += 1
            runs.add((event.get("session_id"), event.get("run_id")))
            source = event.get("source") or {}
            if source.get("via"):
                from_progress[(str(source.get("path")), event.get("session_id"), event.get("agent_id"))] += 1

    types = ", ".join(f"{n} {t}" for t, n in sorted(by_type.items())) or "no events"
    click.echo(f"loopwatch import: {len(files)} file(s), {sum(by_type.values())} event(s) ({types}), "
               f"{len(runs)} run(s), {errors.count} error(s)", err=True)
    for (path, session, agent), count in sorted(from_progress.items(), key=str):
        click.echo(f"loopwatch import: sub-agent {agent} of session {session} has no side file: "
                   f"{count} event(s) read from its progress records in {path}", err=True)
    if not by_type:
        exit_without_events("import", fmt, len(files), paths)
    if errors.count:
        sys.exit(1)


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
