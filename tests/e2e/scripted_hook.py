"""A command hook that gives one scripted answer, for measuring what a runner does with each hook answer.

Reads the hook JSON on stdin, appends it to ``$SCRIPTED_HOOK_LOG`` (JSON Lines), and from the
``$SCRIPTED_HOOK_FROM``-th call (default 3) of the event named in ``$SCRIPTED_HOOK_ANSWER``
(``<event>:<answer>``) gives that answer; every other call exits 0 with no output (no opinion).
Answers: ``deny`` (``hookSpecificOutput.permissionDecision: "deny"``), ``deny+continue`` (the same
with ``continue: false``), ``continue`` (``{"continue": false, "stopReason": ...}`` alone), ``decision``
(``{"decision": "block", "reason": ...}``), ``exit2`` (exit status 2, the reason on stderr), ``exit1``,
``garbage`` (output that is not JSON). Every reason is :data:`REASON`.
"""

from __future__ import annotations

import json
import os
import sys

REASON = "SCRIPTED-HOOK-REASON"


def answer(event: str, kind: str) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of answer ``kind`` to a call of ``event``."""
    deny = {"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "deny",
                                   "permissionDecisionReason": REASON}}
    outputs = {"deny": deny, "deny+continue": {**deny, "continue": False, "stopReason": REASON},
               "continue": {"continue": False, "stopReason": REASON}, "decision": {"decision": "block", "reason": REASON}}
    if kind in outputs:
        return 0, json.dumps(outputs[kind]), ""
    if kind == "exit2":
        return 2, "", REASON
    if kind == "exit1":
        return 1, "", REASON
    if kind == "garbage":
        return 0, "not json", ""
    raise ValueError(f"unknown answer {kind!r}")


def main() -> int:
    payload = json.loads(sys.stdin.read())
    log = os.environ["SCRIPTED_HOOK_LOG"]
    with open(log, "a") as handle:
        handle.write(json.dumps(payload) + "\n")
    event, _, kind = os.environ.get("SCRIPTED_HOOK_ANSWER", "").partition(":")
    name = payload.get("hook_event_name")
    with open(log) as handle:
        seen = sum(1 for line in handle if json.loads(line).get("hook_event_name") == name)
    if name != event or seen < int(os.environ.get("SCRIPTED_HOOK_FROM", "3")):
        return 0
    status, out, err = answer(name, kind)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status


if __name__ == "__main__":
    sys.exit(main())
