"""``loopwatch replay``: event files (or recorded sessions) through the engine, no broker."""

from __future__ import annotations

import os
import reprlib
import sys
from typing import Any, Iterable, Iterator

import click

from streams.wire.codecs import encode_json, read_event_file
from ..detection import ConfigError, Engine, EventError, load_config
from ..detection.config import VALIDATE_BY_DEFAULT, VALIDATE_DESCRIPTION
from ..detection.profiles import DEFAULT_PROFILE, PROFILES
from ..importers import AUTO, FORMATS, FileNotRead, SessionFile, SessionFormatError, read_files
from streams.wire.keys import KEY_BY
from streams.offline.replay import Replayer
from .bad_input import LeftOut, SkipReport, exit_without_events, session_paths
from .config_line import announce_config
from .progress import file_progress, progress_option

__all__ = ["replay", "config_option", "config_validate_option", "profile_option", "load_config_or_exit",
           "session_files"]

_PROGRESS_MIN_BYTES = 5 * 1024 * 1024  # show a progress bar above this much input


def config_option(func):
    return click.option(
        "--config", "config_path", type=click.Path(exists=True, dir_okay=False),
        envvar="LOOPWATCH_CONFIG", show_envvar=True,
        help="OpenClaw config (openclaw.json, JSON5) whose tools.loopDetection and "
             "agents.list[].tools.loopDetection blocks to apply. Default: OpenClaw's defaults "
             "(rolling detectors off, post-compaction guard on).",
    )(func)


def config_validate_option(func):
    """``--config-validate BOOLEAN`` (parameter ``config_validate``): the worker's flag, same name, environment
    variable, default and meaning, so a config the worker runs with validation off can be backtested."""
    return click.option(
        "--config-validate", "config_validate", type=click.BOOL, default=VALIDATE_BY_DEFAULT, show_default=True,
        envvar="LOOPWATCH_CONFIG_VALIDATE", show_envvar=True, help=VALIDATE_DESCRIPTION,
    )(func)


def profile_option(func):
    """``--profile NAME`` (parameter ``profile``): the behaviour profile in place of the config's ``options.profile``."""
    return click.option(
        "--profile", "profile", type=click.Choice(PROFILES), default=None,
        help="Behaviour profile: which OpenClaw release's verdicts to give (default: the config's options.profile, "
             f"else {DEFAULT_PROFILE}). Per-agent options.agentProfiles and an event's own profile field still win.",
    )(func)


def load_config_or_exit(path: str | None, strict: bool = VALIDATE_BY_DEFAULT, profile: str | None = None):
    """``load_config(path, strict=strict, profile=profile)``; an invalid or unreadable file exits with status 2 and
    the reasons."""
    try:
        return load_config(path, strict=strict, profile=profile)
    except ConfigError as exc:
        click.echo(f"loopwatch: invalid configuration:\n{exc}", err=True)
    except OSError as exc:
        click.echo(f"loopwatch: cannot read the configuration: {exc}", err=True)
    sys.exit(2)


def reject_folders(paths: Iterable[str], kind: str) -> None:
    """Raise ``click.UsageError`` when a path is a folder (``kind``: what the files should hold)."""
    folders = [p for p in paths if p != "-" and os.path.isdir(p)]
    if folders:
        raise click.UsageError(f"{folders[0]} is a folder: {kind} files are read one by one (recorded session "
                               "folders need --format auto, or openclaw|claude-code|codex|swe-agent)")


def event_records(fmt: str, paths: Iterable[str] | Iterable[SessionFile], progress: bool | None = None
                  ) -> Iterator[tuple[str, int | None, dict | None, str | None]]:
    """``(path, position, event, error)`` for every record of event files (``fmt`` ``events``) or recorded sessions.

    ``paths``: for ``events`` the files; else the :class:`~streams.importers.SessionFile` list of
    :func:`session_files`. ``event`` is None for a bad record, with ``error`` the reason (without the
    file and line); ``position`` is then None when the whole file is bad (a
    recorded session that cannot be read at all, a file of no known format). ``progress``
    True shows a progress bar on stderr, False never, None on a terminal for large inputs
    (5 MB of event files, :data:`~streams.commands.progress.MIN_FILES` session files). Raises
    ``click.UsageError`` for a folder given as an event file.
    """
    if fmt != "events":
        return _session_events(list(paths), progress)  # type: ignore[arg-type]
    paths = tuple(paths)  # type: ignore[assignment]
    reject_folders(paths, "event")
    if progress is False:
        return _file_events(paths, 0, False)
    return _file_events(paths, sum(os.path.getsize(p) for p in paths if p != "-"), progress)


def _file_events(paths: tuple[str, ...], total_bytes: int, progress: bool | None
                 ) -> Iterator[tuple[str, int, dict | None, str | None]]:
    from tqdm import tqdm

    show = progress if progress is not None else (total_bytes >= _PROGRESS_MIN_BYTES and sys.stderr.isatty())
    with tqdm(total=total_bytes, unit="B", unit_scale=True, disable=not show, file=sys.stderr,
              desc="replay") as bar:
        for path in paths:
            stream = click.open_file(path, "rb")
            with stream:
                last = 0
                for record in read_event_file(path, stream if path == "-" else None):
                    yield record.path, record.position, record.event, record.error
                    if show and path != "-":
                        try:
                            position = stream.tell()
                        except OSError:
                            position = last
                        bar.update(max(0, position - last))
                        last = position


def _session_events(files: list[SessionFile], progress: bool | None
                    ) -> Iterator[tuple[str, int | None, dict | None, str | None]]:
    errors: list[SessionFormatError] = []
    with file_progress(len(files), progress, "read") as bar:
        for event in read_files(_counted(files, bar), on_error=errors.append):
            while errors:
                err = errors.pop(0)
                yield err.path, err.line, None, _reason(err)
            source = event.get("source") or {}
            yield str(source.get("path", "?")), int(source.get("line", 0) or 0), event, None
        for err in errors:
            yield err.path, err.line, None, _reason(err)


def _reason(err: SessionFormatError) -> str:
    """The error's reason; a :class:`~streams.commands.bad_input.LeftOut` for a file left out whole."""
    return LeftOut(err.reason) if isinstance(err, FileNotRead) else err.reason


def _counted(files: list[SessionFile], bar: Any) -> Iterator[SessionFile]:
    """``files``, the bar counting each once the one before it has been read."""
    for i, item in enumerate(files):
        if i:
            bar.update(1)
        yield item
    if files:
        bar.update(1)


@click.command(
    epilog="""\b
Examples:
  loopwatch replay events.jsonl
  loopwatch replay --config ~/.openclaw/openclaw.json -o verdicts.jsonl events.msgpack
  loopwatch replay --format openclaw ~/.openclaw/agents/main/sessions
  loopwatch replay --format auto ~/fleet           # a mixed fleet: each file's format sniffed
  loopwatch replay --key-by run events.jsonl     # what the worker's default keying gives
""",
)
@config_option
@config_validate_option
@profile_option
@click.option("--format", "fmt", default="events", show_default=True,
              type=click.Choice(["events", AUTO, *sorted(FORMATS)]),
              help="Input format: loopwatch event files (JSON Lines or msgpack, sniffed), or recorded "
                   "sessions read through an importer (see `loopwatch import`); auto: files and folders of "
                   "any runner's sessions and event files, each file's format told from its first bytes.")
@click.option("--key-by", type=click.Choice(KEY_BY), default="session", show_default=True,
              help="How state is scoped. 'session' (the default) is OpenClaw's own: one history and warning "
                   "dedupe per session, shared by its runs; the conformance vectors check it. 'run' is one state "
                   "per run, as the worker keys its records by default (Kafka keeps a run's events in order on "
                   "one partition). The two agree when each session's events belong to one run (the hooks' and "
                   "the plugin's usual case; docs/keying.md); to compare with a worker's verdicts, use 'run'.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              show_default=True, help="Where to write verdict records as JSON Lines ('-' = stdout).")
@click.option("--fleet-output", type=click.Path(dir_okay=False, allow_dash=True),
              help="Also write the fleet_loop records (the same failing call in many runs within a window, "
                   "options.fleet of the config) as JSON Lines to this file.")
@click.option("-q", "--quiet", is_flag=True,
              help="No summary on stderr; bad records are still reported (the first 10, then a count).")
@progress_option
@click.argument("files", nargs=-1, required=True, type=click.Path(allow_dash=True))
def replay(config_path: str | None, config_validate: bool, profile: str | None, fmt: str, key_by: str, output: str,
           fleet_output: str | None, quiet: bool, progress: bool | None, files: tuple[str, ...]) -> None:
    """Run events through the detection engine and write one verdict per event.

    FILES are JSON Lines (one event object per line) or a msgpack stream of
    event maps, in the event schema: tool_call, tool_result and
    compaction_retry records with run_id, session_id, tool_call_id,
    tool_name, args, result, error (optional event_id and ts). With --format,
    FILES are recorded sessions instead.

    Each verdict record (JSON Lines) carries the event's ids and the
    engine's verdict: verdict (allow, warn, block, abort, ignore), decision,
    detection, warning, outcome, guard, evidence. A bad record is counted and
    skipped; the first 10 are reported on stderr with their file, line and
    reason, the rest in one line. A summary (events, runs, detections by
    detector and level, blocks, aborts, fleet loops) goes to stderr, after
    the line of loop-detection settings in effect (as the worker prints it;
    a warning when the config holds nothing loop detection reads). The
    verdicts of event files carry their event's file and line in `source`
    (`loopwatch report` shows them). Exit status 0, 1
    when any record was skipped as bad (the verdicts then do not cover the
    whole input) or, with --format, when no event was found (as `loopwatch
    import`: is --format right?), or 2 for an invalid configuration.
    """
    skipped = SkipReport("replay")
    inputs = session_files(fmt, files, skipped) if fmt != "events" else existing_files("replay", files)
    engine = Engine(load_config_or_exit(config_path, strict=config_validate, profile=profile))
    announce_config("replay", config_path, engine, quiet)
    replayer = Replayer(engine, key_by=key_by)
    records = event_records(fmt, inputs, progress)
    read = 0
    with skipped, click.open_file(output, "wb") as sink:
        for path, position, event, error in records:
            if event is not None:
                read += 1
                if fmt == "events" and "source" not in event:  # where the call is: the event file's line
                    event = {**event, "source": {"path": "<stdin>" if path == "-" else path, "line": position}}
                ref = event.get("event_id") or f"{path}:{position}"
                try:
                    record = replayer.apply(event, ref)
                except EventError as exc:
                    error = f"invalid event: {exc}"
                else:
                    sink.write(json_line(record))
                    continue
            if not isinstance(error, LeftOut):
                replayer.skip()
            skipped(path, position, error or "unreadable")
    if fleet_output:
        with click.open_file(fleet_output, "wb") as sink:
            for loop in replayer.fleet_loops:
                sink.write(encode_json(loop) + b"\n")
    if not quiet:
        for line in replayer.summary.lines():
            click.echo(line, err=True)
    if fmt != "events" and not read:  # as import: most likely the wrong --format
        exit_without_events("replay", fmt, sum(f.format is not None for f in inputs), files)
    if replayer.summary.bad:
        sys.exit(1)


def json_line(record: dict) -> bytes:
    """A verdict record as one line of JSON. The event's own ``source``, the one field a verdict copies
    unchecked, goes as its shortened repr text when JSON cannot carry it (msgpack bytes or extension
    types, non-text map keys, nesting past Python's ~1,000 levels)."""
    try:
        return encode_json(record) + b"\n"
    except (TypeError, ValueError, RecursionError):
        if "source" not in record:
            raise
        return encode_json({**record, "source": reprlib.repr(record["source"])}) + b"\n"


def session_files(fmt: str, paths: tuple[str, ...], skipped: SkipReport) -> list[SessionFile]:
    """The session files under ``paths`` with their formats (replay's and report's FILES with a session --format
    or ``auto``: :func:`streams.commands.bad_input.session_paths`: a path that does not exist is left out, listed
    on ``skipped``, unless none exists); ``-`` (recorded sessions are files) is a usage error."""
    if "-" in paths:
        raise click.UsageError("recorded sessions are read from files or folders, not standard input")
    return session_paths(skipped.command, fmt, paths, skipped)


def existing_files(command: str, paths: tuple[str, ...]) -> tuple[str, ...]:
    """``paths`` (event or verdict files; ``-`` is standard input) when each exists; else the command says
    which does not in one line and exits with status 2."""
    absent = [p for p in paths if p != "-" and not os.path.exists(p)]
    if absent:
        click.echo(f"loopwatch {command}: no such file or directory: {', '.join(absent)}", err=True)
        sys.exit(2)
    return paths
