"""The project's own 2026.9.6 scenarios past the first block, expected by that release's embedded-runner code.

Writes the scenarios of :func:`scenarios` into tests/fixtures/vectors-2026.9-own.jsonl with the expectations of
OpenClaw 2026.9.6's own code run by ``bench/openclaw_oracle.mjs --runner`` (its agent loop with the recovery flag,
recovery and terminal blocks and the run's end, its batch admission, tool wrapper and post-compaction guard; each
description ends "expected: OpenClaw 2026.9.6's embedded runner"). The file's other scenarios (hand-written from
the spec) are kept as they are. Each scenario pins what happens after a critical detection: the veto records, the
recovery block, the terminal block and the calls after it, deferred results of blocked calls, new attempts after a
compaction retry.

    python bench/own_vectors_2026_9.py --openclaw DIR9 [--node NODE] [--out tests/fixtures/vectors-2026.9-own.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.difffuzz import Oracle, runner_decides  # noqa: E402
from bench.own_vectors_2026_7 import ON, Events, res, write_expected  # noqa: E402

FROM_RUNNER = "expected: OpenClaw 2026.9.6's embedded runner (bench/openclaw_oracle.mjs --runner)"
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "vectors-2026.9-own.jsonl"


def scenarios() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(name: str, description: str, events: Events | list[dict[str, Any]], config: dict[str, Any] = ON) -> None:
        out.append({"name": f"own9-runner-{name}", "description": f"{description}. {FROM_RUNNER}",
                    "profile": "openclaw-2026.9.6", "config": config,
                    "events": events.events if isinstance(events, Events) else events})

    notes = {"path": "/src/notes.md"}
    add("retries-through-terminal-to-global-breaker",
        "§3.1 step 3/§3.3/§5.2: a read retried 32 times: warning at 10, recovery block at 20, terminal at 21; every "
        "veto is recorded, so the count keeps growing and the global circuit breaker takes over at 30",
        Events("r1", "s1").call("read", notes, res("same contents"), times=32))
    add("recovery-switch-args-then-back-is-terminal",
        "§3.3: after the recovery block the model changes args (allowed) and comes back to the blocked action: the "
        "second critical of the attempt is terminal, and the run stays terminated for the calls after",
        Events("r1", "s1").call("read", notes, res("same contents"), times=21)
        .call("read", {"path": "/src/other.md"}, res("other"), times=2)
        .call("read", notes, res("same contents"), times=2))
    add("compaction-retry-new-attempt-and-guard",
        "§3.3/§7: a compaction retry after the recovery block starts a new attempt (the next critical is a recovery "
        "block again) and arms the guard, which vetoes do not feed; three identical outcomes after it abort",
        Events("r1", "s1").call("read", notes, res("same contents"), times=21).compaction()
        .call("read", notes, res("same contents"))
        .call("grep", {"pattern": "TODO"}, res("3 hits"), times=3))
    poll = Events("r1", "s1")
    for _ in range(22):
        poll.call("process", {"action": "poll", "sessionId": "p1"}, outcome_follows=True)
        poll.result(f"c{poll.serial}", res("still running", status="running"))
    add("deferred-poll-blocked-results-ignored",
        "§3.1/§9: deferred polls (the tool_result follows each call): the note of the warning at 10 is on the call, "
        "the vetoed 20th and 21st calls never run and their results are ignored",
        poll)
    two = Events("r1", "s1").call("read", notes, res("same contents"), times=21)
    two.events += Events("r2", "s1").call("read", notes, res("same contents"), times=22).events
    add("two-runs-own-recovery-flags",
        "§3.3/§8: two runs of one session: each run's detection sees its own records (r1's leave the 30-record "
        "history as r2's come in) and each run has its own recovery flag: r2's first critical is a recovery block "
        "after r1's, its second terminal",
        [{**event, "tool_call_id": f"c{index}"} for index, event in enumerate(two.events)])
    pingpong = Events("r1", "s1")
    for turn in range(24):
        pingpong.call("read", {"path": f"/{'ab'[turn % 2]}.md"}, res("AB"[turn % 2]))
    add("ping-pong-past-its-blocks",
        "§5.1/§5.2: a ping-pong with stable outcomes: warning at 10, critical at 20 (recovery); the veto joins the "
        "alternation but spoils its no-progress evidence, so the alternations after it only warn", pingpong)
    add("unknown-tool-veto-breaks-the-streak",
        "§5.1: a missing tool retried: critical unknown_tool_repeat at 10 (recovery); its veto ends the streak, so "
        "the retries after it are allowed (the streak starts again; only the generic repeat warns)",
        Events("r1", "s1").call("ghost_tool", {"q": 1}, error="Unknown tool: ghost_tool", times=14))
    failing = Events("r1", "s1")
    for attempt in range(24):
        output = f"FAILED tests/test_api.py after {attempt % 7 + 1}.{attempt}s (pid {4000 + attempt})"
        failing.call("exec", {"command": f"pytest -k {'a' if attempt < 12 else 'b'}"},
                     res(output, status="failed", exitCode=1, aggregated=output, timedOut=False))
    add("exec-failure-walk-past-blocks",
        "§4.3 rule 5/§5.1: pytest failing alike under -k a, then -k b (durations and pids masked): the "
        "terminal-failure walk carries the streak from the b calls back across the a calls to a recovery block "
        "and then a terminal one", failing)
    add("empty-call-id-gets-the-trigger-text",
        "§3.1 step 3: a call whose id is empty equals the id the block recorded (\"\"), so it gets the message with "
        "the recovery and then the terminal paragraph",
        [{**event, "tool_call_id": ""} for event in
         Events("r1", "s1").call("read", notes, res("same contents"), times=22).events])
    blank = Events(None, "s1").call("read", notes, res("same contents"), times=21)
    blank.events += Events(" ", "s1").call("read", notes, res("same contents"), times=2).events
    add("blank-run-ids-share-the-session-flag",
        "§3.3/§7: a run-less call and a blank run id share the session's run identity and so its recovery flag: "
        "after the run-less recovery block, the blank run's criticals are terminal",
        [{**event, "tool_call_id": f"c{index}"} for index, event in enumerate(blank.events)])
    add("thrown-errors-no-progress-to-global",
        "§4.3 rule 1/§5.2: the same thrown error 31 times is no progress: generic critical at 20 (recovery), "
        "terminal at 21, global circuit breaker at 30",
        Events("r1", "s1").call("web_fetch", {"url": "https://example.org/down"}, error="HTTP 503", times=31))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--openclaw", default=os.environ.get("LOOPWATCH_OPENCLAW_9_DIR"))
    parser.add_argument("--node", default=None)
    parser.add_argument("--out", type=Path, default=OUT)
    options = parser.parse_args()
    if not options.openclaw:
        parser.error("--openclaw: an OpenClaw 2026.9.x package directory (or LOOPWATCH_OPENCLAW_9_DIR)")
    kept = [line for line in options.out.read_text(encoding="utf-8").split("\n")
            if line.strip() and FROM_RUNNER not in json.loads(line)["description"]]
    made = scenarios()
    for scenario in made:
        if not runner_decides(scenario):
            raise SystemExit(f"{scenario['name']}: not a scenario the runner decides")
    with Oracle(options.openclaw, options.node, runner=True) as oracle:
        return write_expected(made, oracle.expected, options.out, kept)

if __name__ == "__main__":
    sys.exit(main())
