"""``loopwatch report``: what loop detection found, per session and for the fleet; backtesting."""

from __future__ import annotations

import json
import sys
from typing import Any, Iterator

import click

from ..detection import Engine, EventError
from ..importers import FORMATS
from ..keys import KEY_BY
from ..replay import Replayer
from ..report import build_report, compare, render_comparison_text, render_html, render_text
from .replay import config_option, event_records, load_config_or_exit, reject_folders

__all__ = ["report"]

_SESSION_FORMATS = tuple(sorted(FORMATS))


def _verdict_records(paths: tuple[str, ...], bad: list[int]) -> Iterator[dict[str, Any]]:
    """Verdict records from JSON Lines files (``-`` = stdin); a bad line is reported, counted, skipped."""
    reject_folders(paths, "verdict")
    for path in paths:
        with click.open_file(path, "r", encoding="utf-8") as stream:
            for lineno, line in enumerate(stream, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    reason = f"not JSON: {exc}"
                else:
                    if isinstance(record, dict) and "verdict" in record:
                        yield record
                        continue
                    reason = "not a verdict record (an object with a 'verdict' field)"
                bad[0] += 1
                click.echo(f"loopwatch report: {path}:{lineno}: skipped: {reason}", err=True)


def _load_events(fmt: str, paths: tuple[str, ...], bad: list[int]) -> list[tuple[str, int, dict]]:
    records = event_records(fmt, paths)
    out = []
    try:  # importers raise while iterating, for a path of the wrong kind
        for path, position, event, error in records:
            if event is None:
                bad[0] += 1
                click.echo(f"loopwatch report: {path}:{position}: skipped: {error}", err=True)
            else:
                out.append((path, position, event))
    except (ValueError, FileNotFoundError) as exc:
        raise click.UsageError(str(exc)) from None
    return out


def _replay(events: list[tuple[str, int, dict]], config_path: str | None, key_by: str,
            bad: list[int], report_errors: bool = True) -> list[dict[str, Any]]:
    replayer = Replayer(Engine(load_config_or_exit(config_path)), key_by=key_by)
    records = []
    for path, position, event in events:
        ref = event.get("event_id") or f"{path}:{position}"
        try:
            record = replayer.apply(event, ref)
        except EventError as exc:
            if report_errors:
                bad[0] += 1
                click.echo(f"loopwatch report: {path}:{position}: skipped: invalid event: {exc}", err=True)
            record = {"event_id": event.get("event_id"), "type": "invalid", "verdict": "ignore"}
        records.append(record)
    return records


@click.command(
    epilog="""\b
Examples:
  loopwatch replay --config openclaw.json -o verdicts.jsonl events.jsonl
  loopwatch report verdicts.jsonl
  loopwatch report --format openclaw --config ~/.openclaw/openclaw.json ~/.openclaw/agents
  loopwatch report --format claude-code --html report.html ~/.claude/projects/myproj
  loopwatch report --format openclaw --config current.json --compare stricter.json ~/.openclaw/agents
""",
)
@config_option
@click.option("--format", "fmt", default="verdicts", show_default=True,
              type=click.Choice(["verdicts", "events", *_SESSION_FORMATS]),
              help="Input: verdict JSON Lines written by `loopwatch replay`; or loopwatch event files, "
                   "or recorded sessions read through an importer, which are replayed here.")
@click.option("--compare", "compare_path", type=click.Path(exists=True, dir_okay=False),
              help="Backtest: replay the same events under this second openclaw.json (B) and show the "
                   "counts under --config (A) and B side by side, with every call whose verdict differs. "
                   "Needs --format events or a session format.")
@click.option("--key-by", type=click.Choice(KEY_BY), default="session", show_default=True,
              help="State scoping when replaying (see `loopwatch replay`).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, writable=True),
              help="Also write the report as one self-contained HTML page (summary and per-run timelines).")
@click.option("-q", "--quiet", is_flag=True, help="No text report on stdout (with --html).")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, allow_dash=True))
def report(config_path: str | None, fmt: str, compare_path: str | None, key_by: str, html_path: str | None,
           quiet: bool, files: tuple[str, ...]) -> None:
    """Report the loops loop detection finds, per session and for the fleet.

    Per session: its runs and calls, and its detections by detector and
    level; each detection with the tool, count, message, what it led to
    (warn = warning emitted, suppressed = warning kept back by OpenClaw's
    dedupe, block, abort) and the source line of the call (file:line).
    Then a fleet summary: sessions, runs, calls, warnings emitted and
    suppressed, blocks and aborts, and detections per detector.

    FILES are verdict JSON Lines from `loopwatch replay` (default), or, with
    --format, event files or recorded sessions that are replayed here under
    --config. The text report goes to stdout. Exit status 0, or 2 for bad
    usage or an invalid configuration.
    """
    bad = [0]
    comparison = None
    if fmt == "verdicts":
        if config_path or compare_path:
            raise click.UsageError("--config and --compare replay events: give --format events or a session "
                                   "format (verdict files are already decided)")
        records = list(_verdict_records(files, bad))
        if not records and bad[0]:
            raise click.UsageError("no verdict records in FILES; to replay events or recorded sessions "
                                   "give --format events (or openclaw, claude-code, codex, swe-agent)")
        result = build_report(records)
    else:
        events = _load_events(fmt, files, bad)
        records = _replay(events, config_path, key_by, bad)
        label_a = config_path or "OpenClaw defaults"
        if compare_path:
            records_b = _replay(events, compare_path, key_by, bad, report_errors=False)
            comparison = compare(records, records_b, label_a, compare_path)
            result = comparison.a
        else:
            result = build_report(records, label_a)
    result.bad_records = bad[0]
    if not quiet:
        out = render_text(result)
        if comparison is not None:
            out += "\n" + render_comparison_text(comparison)
        sys.stdout.write(out)
        sys.stdout.flush()
    if html_path:
        try:
            with open(html_path, "w", encoding="utf-8") as fh:
                fh.write(render_html(result, comparison))
        except OSError as exc:
            raise click.ClickException(f"cannot write {html_path}: {exc.strerror or exc}") from None
        click.echo(f"loopwatch report: wrote {html_path}", err=True)
