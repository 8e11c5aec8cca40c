"""``loopwatch conformance``: check the engine against scenario files."""

from __future__ import annotations

import sys

import click

from streams.offline.conformance import run_scenario, scenario_lines


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-v", "--verbose", is_flag=True, help="Also print a line for every passing scenario.")
def conformance(files: tuple[str, ...], verbose: bool) -> None:
    """Replay conformance scenarios and compare every verdict with the expected one.

    Each FILE holds one scenario per line: {"name", "description", "config",
    "events", "expected"}, as produced by running OpenClaw's own code, and an
    optional "profile" naming the OpenClaw release it is judged by
    (openclaw-2026.7 when absent, or openclaw-2026.9.6). For each
    failing scenario one line names the first differing event and field; the
    last line is "N passed, M failed". A line that is not a scenario counts
    as a failure. Exit status 1 if any failed or there was none.

    \b
    Examples:
      loopwatch conformance ../shared/conformance/vectors.jsonl
      loopwatch conformance tests/fixtures/vectors-2026.9-own.jsonl
    """
    passed = failed = 0
    for path in files:
        for line, scenario, error in scenario_lines(path):
            if scenario is None:
                failed += 1
                click.echo(f"FAIL {path}:{line}: {error}")
                continue
            mismatch = run_scenario(scenario)
            if mismatch is None:
                passed += 1
                if verbose:
                    click.echo(f"ok   {scenario['name']}")
            else:
                failed += 1
                click.echo(f"FAIL {mismatch}")
    click.echo(f"{passed} passed, {failed} failed")
    if passed + failed == 0:
        click.echo("loopwatch conformance: no scenarios in the given file(s)", err=True)
        sys.exit(1)
    sys.exit(1 if failed else 0)
