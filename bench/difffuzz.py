"""Differential check: loopwatch's engine against OpenClaw's own loop-detection code, on random scenarios.

Generates seeded random conformance scenarios (the format of docs/offline.md) inside the domain OpenClaw's
``tools.loopDetection`` decides, has OpenClaw's code expect them (``bench/openclaw_oracle.mjs`` in node, over an
OpenClaw install), replays them through loopwatch (:func:`streams.offline.conformance.run_scenario`) and
prints every scenario whose verdicts differ, minimised (events and config keys dropped while it still differs).

    python bench/difffuzz.py --openclaw DIR [--node NODE] [--count 500] [--seed 1]
    python bench/difffuzz.py --openclaw DIR --check ../shared/conformance/vectors.jsonl   # the oracle vs a file
    python bench/difffuzz.py --openclaw DIR --expect scenarios.jsonl > expected.jsonl     # expectations only

``DIR`` is OpenClaw's package directory (``.../node_modules/openclaw``; env ``LOOPWATCH_OPENCLAW_DIR``), node 22+
(env ``LOOPWATCH_OPENCLAW_NODE``, else ``node`` on ``PATH``). Exit status 1 when anything differs.

What the scenarios hold, and what they leave out: random tool names (known poll tools, send tools, exec and its
alias, names in other cases and with blanks, blank names, unicode), args (nested, unicode keys and values, key
orders, -0, 1e21, integers past 2^53, floats), results (plain, exec and process poll/log details, send results
with volatile ids, the detector's own veto shape, strings, numbers, arrays, nothing) and thrown errors
(unknown-tool texts with JavaScript and non-JavaScript whitespace, non-string values); several runs (blank and
padded run ids) and sessions (absent, null and empty session keys, aliases of one session id); deferred calls
and their results (also under another run id or other session fields, a blank call id), results of calls never
seen or blocked; compaction retries; random thresholds (also invalid ones and integers past 2^53), detector
flags, ``enabled`` values and per-agent blocks; with ``--wide``, long scenarios past OpenClaw's bounds (256
warning keys, 1,024 blocked calls, many runs). Left out, because the oracle would decide them by its own glue
rather than by OpenClaw's code (bench/openclaw_oracle.mjs): ``options.channelSendTools`` (channel plugins), a
result without any session for a deferred call, and two deferred calls pending under one ``tool_call_id``.

``--profile openclaw-2026.9.6`` with a 2026.9.x install compares what that release's module decides alone: tool
calls carrying their outcomes (repeats, ping-pongs, argument churn with no-progress outcomes), detection and
warning dedupe and result hashes, up to each scenario's first critical detection. With ``--runner`` as well, the
scenarios run through 2026.9.6's embedded-runner code itself (its agent loop with the critical-tool-loop recovery
flag, recovery and terminal blocks and the run's end, its batch admission with the veto records, its tool wrapper
with the outcome records and warning notes, its post-compaction guard fed by the wrapper's outcome observations;
bench/openclaw_oracle.mjs ``--runner``), and every tool call is
compared whole, past each block (:func:`generate_2026_9_runner`); ``--check FILE --runner``
compares a file's 2026.9.6 scenarios the runner decides (:func:`runner_decides`) with what it gives. Left out of
the runner scenarios: multi-call batches (an event is one call), calls without an id (2026.9.6's agent loop fails
on them before the tool runs), non-object args and results (not what a registered tool takes and returns), a
deferred call's result in other session fields than its call's or after another event of its run (the run's loop
waits for its running tool), channel plugins.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streams.wire.codecs import json_loads  # noqa: E402
from streams.offline.conformance import Mismatch, load_scenarios, run_scenario  # noqa: E402

_HERE = Path(__file__).resolve().parent
ORACLE = _HERE / "openclaw_oracle.mjs"


class Oracle:
    """``bench/openclaw_oracle.mjs`` over one OpenClaw install, kept running: one scenario in, its expectations out.

    Raises ``RuntimeError`` when node ends or the oracle reports an error for a scenario.
    """

    def __init__(self, openclaw: str | Path, node: str | None = None, detector_only: bool = False,
                 runner: bool = False) -> None:
        node = node or os.environ.get("LOOPWATCH_OPENCLAW_NODE") or shutil.which("node")
        if not node:
            raise RuntimeError("no node executable (set LOOPWATCH_OPENCLAW_NODE)")
        extra = ["--runner"] if runner else ["--detector-only"] if detector_only else []
        self.process = subprocess.Popen([node, str(ORACLE), str(openclaw), *extra], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def expected(self, scenario: dict[str, Any]) -> list[dict[str, Any]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(scenario) + "\n")  # ASCII: no U+2028 etc. for node's line reader
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the oracle ended (exit status {self.process.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the oracle failed on {scenario['name']}: {answer['error']}")
        return answer["expected"]

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)

    def __enter__(self) -> "Oracle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------------------------
# Generation

TOOLS = ["read", "read", "exec", "bash", " Bash ", "READ", "write", "process", "process", "command_status",
         "message", "sessions_send", "apply-patch", "apply_patch", "web_fetch", "mystery_tool", "Weather.Get",
         "", "   ", "tool", "\u30c4\u30fc\u30eb", "update_plan", "APPLY-PATCH", "Bash\t", "\u00a0bash", "\ufeffread",
         "\u0085read", "\u001cread", "read\u2028", "Command_Status"]
STRINGS = ["", " ", "a", "A", "/workspace/notes.md", "caf\u00e9", "\U0001f600", "\uffff", "line\nbreak", "tab\t",
           "quote\"back\\slash", "\u2028", "\u0001", "10", "2", "b", "B", "\u00e9", "z", "\ud800", "x\udc00",
           "\U0001f600\uffff", "\x7f", "undefined", "null"]
NUMBERS: list[Any] = [0, 1, -1, 2, 10, 1.0, 1.5, -0.0, 1e21, 1e-7, 123456789.125, 9007199254740993,
                      9007199254740992, 2**64, -(2**53) - 3, 5e-324, 1.7976931348623157e308, 1e16, 1.5e300,
                      2.5e-5, 1.2345678901234568e20, 0.1 + 0.2, 1 / 3, 1e-6, 123e-20, -1e21, 10**21, 10**22 + 1]
FAILURE_OUTPUTS = ["Error at {} (pid {}) after {}", "attempt {}: connection refused {} {}", "{} FAILED {} {}",
                   "build failed in {}; retry{} ppid={}"]
VOLATILE_PARTS = ["2026-12-03T10:00:00Z", "2026-12-03 10:00:01.123456+01:00", "2026-12-03t10:00:02", "10:00:00",
                  "9:59:59.1234567", "12ms", "1.5 s", "3 seconds", "2 hours", "40us", "5\u00a0ms", "7 \u017f",
                  "8 \u212as", "ATTEMPT 3", "Retry#4", "retry=5", "pid:77", "PID 78", "ppid=9", "\u0661\u0662 ms",
                  "12msx", "x12ms", "\u212apid 4", "pid\u212a 4", "42", "#", "", "attempt\u00a0\u00a06"]
WHITESPACE = [" ", "\t", "\u00a0", "\u3000", "\ufeff", "\u0085", "\u001c", "\u2028", "\n"]
SEND_IDS = ["messageId", "message_id", "ts", "timestamp", "runId", "receipt", "id", "conversationId"]


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 2 or roll < 0.35:
        return rng.choice(STRINGS)
    if roll < 0.6:
        return rng.choice(NUMBERS)
    if roll < 0.68:
        return rng.choice([True, False, None])
    if roll < 0.8:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return _object(rng, depth + 1)


def _object(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    keys = rng.sample(STRINGS + ["path", "query", "n", "__proto__", "constructor", "toJSON", "0", "-1", "01"],
                      rng.randrange(1, 4))
    return {key: _value(rng, depth) for key in keys}


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys re-inserted in a random order (OpenClaw hashes them sorted)."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    return value


def _args(rng: random.Random, tool: str) -> Any:
    name = tool.strip().lower()
    if name == "process":
        return {"action": rng.choice(["poll", "poll", "log", "list", "Poll"]), "sessionId": rng.choice(["p1", "p2"])}
    if name == "message":
        return {"action": rng.choice(["send", "reply", "poll", "read", " send", "sendWithEffect"]),
                "to": rng.choice(["#ops", "@bob"]), "text": rng.choice(["hi", "retry"])}
    roll = rng.random()
    if roll < 0.5:
        return {"path": rng.choice(["/a", "/b", "/workspace/notes.md"])}
    if roll < 0.55:
        return rng.choice([None, "plain", 3, [1, 2], [], {}])
    return _object(rng)


def _result(rng: random.Random, tool: str) -> Any:
    name = tool.strip().lower()
    text = rng.choice(["same", "same", "other", " same ", ""])
    content = [{"type": rng.choice(["text", "text", "image"]), "text": text}]
    roll = rng.random()
    if name in ("exec", "bash") and roll < 0.6:
        status = rng.choice(["running", "completed", "failed", "approval-pending", "weird", None])
        details: dict[str, Any] = {"status": status, "pid": rng.randrange(1000), "durationMs": rng.randrange(99),
                                   "exitCode": rng.choice([0, 1, None, "1"]), "tail": rng.choice(["42%", None]),
                                   "aggregated": rng.choice(["out", "  ", None, " out "]),
                                   "timedOut": rng.choice([True, False, "yes"])}
        return {"content": content, "details": details}
    if name == "process" and roll < 0.6:
        if rng.random() < 0.2:
            return {"content": content, "details": {"exitCode": 0}}  # no status: the bare word undefined
        return {"content": content, "details": {"status": rng.choice(["running", "exited", None]),
                                                "exitCode": rng.choice([0, None]), "aggregated": rng.choice(["x", None]),
                                                "totalLines": rng.choice([3, 4]), "pid": rng.randrange(99)}}
    if name in ("message", "sessions_send") and roll < 0.6:
        details = {key: rng.choice(["m1", "m2", 7]) for key in rng.sample(SEND_IDS, 3)}
        details["ok"] = True
        if rng.random() < 0.3:
            details["delivered"] = {"id": rng.choice(["d1", "d2"]), "text": "hi", "direction": "out"}
        return {"content": content, "details": details}
    if roll < 0.04:
        return {"content": content, "details": {"status": "blocked", "deniedReason": "tool-loop", "reason": "x"}}
    if roll < 0.07:
        return rng.choice([{"content": [{"type": "text", "text": 5}, {"text": "x"}, "str", None, {"type": "t", "text": "y"}]},
                           {"details": {"status": "blocked", "deniedReason": "policy"}}, {"content": []},
                           {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": " b "}], "details": []}])
    if roll < 0.1:
        return rng.choice(["plain text", 0, -0.0, [], [1, "a"], True, {"content": "not a list"}])
    return {"content": content, "details": rng.choice([{"ok": True}, {"ok": False}, {}, "not an object", None])}


def _error(rng: random.Random) -> Any:
    roll = rng.random()
    ws = rng.choice(WHITESPACE)
    name = rng.choice(["foo_bar", "Zeta", "weather.get", "maps"])
    if roll < 0.5:
        return rng.choice([f"Unknown tool:{ws}{name}", f"unknown tool {ws}'{name}'", f"Tool {ws}\"{name}\" not found",
                           f"tool {name}{ws}is not available", f"{ws}unknown tool: {name}{ws}", "unknown toolbox failure"])
    if roll < 0.85:
        return rng.choice(["HTTP 503", "ENOENT", "", " ", "boom"])
    return rng.choice([0, 42, True, False, {"code": 1}, [1], -0.0, 1e21, {"message": "Unknown tool: ghost"},
                       {"name": "Error", "message": ""}, [None]])


def _positive(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.85:
        return rng.choice([rng.randrange(1, 6), rng.randrange(1, 13), rng.randrange(1, 31)])
    return rng.choice([0, -2, 2.5, "7", 5.0, 9007199254740993, 1e21, None, True])


def _block(rng: random.Random) -> dict[str, Any]:
    block: dict[str, Any] = {}
    for key in ("historySize", "warningThreshold", "criticalThreshold", "globalCircuitBreakerThreshold",
                "unknownToolThreshold"):
        if rng.random() < 0.6:
            block[key] = _positive(rng)
    if rng.random() < 0.85:
        block["enabled"] = rng.choice([True] * 12 + [False, 1, 0, "false", "", None, [], {}])
    if rng.random() < 0.5:
        block["detectors"] = {key: rng.choice([True, False, False, None, 0, 1])
                              for key in rng.sample(["genericRepeat", "knownPollNoProgress", "pingPong"],
                                                    rng.randrange(1, 4))}
    if rng.random() < 0.4:
        block["postCompactionGuard"] = {"windowSize": _positive(rng)}
    return block


AGENT_IDS = ["ops", "Ops", " ops ", "main", "Sales Team!", "", " ", None, "x" * 70, "\u00c4gent", "a.b", "-ops-",
             "y" * 64, "\u00a0ops"]


def _config(rng: random.Random) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if rng.random() < 0.9:
        config["tools"] = {"loopDetection": _block(rng)}
        if rng.random() < 0.05:
            config["tools"]["loopDetection"] = rng.choice([None, [], "on"])
        elif rng.random() < 0.08:
            config["tools"]["loopDetection"][rng.choice(["detectors", "postCompactionGuard"])] = rng.choice(
                [None, [], "xy", 3])
    if rng.random() < 0.4:
        entries: list[Any] = []
        for _ in range(rng.randrange(1, 4)):
            roll = rng.random()
            if roll < 0.1:
                entries.append(rng.choice([None, "ops", 3, []]))
                continue
            entry: dict[str, Any] = {"id": rng.choice(AGENT_IDS)}
            if rng.random() < 0.8:
                entry["tools"] = {"loopDetection": _block(rng)}
            elif rng.random() < 0.3:
                entry["tools"] = rng.choice([None, {"loopDetection": None}, {}])
            entries.append(entry)
        config["agents"] = {"list": entries} if rng.random() < 0.95 else rng.choice([{"list": {"0": entries[0]}},
                                                                                      {"list": None}, None])
    return config


def _shape(rng: random.Random, mode: str, shapes: list[Any], serial: int, noise: float) -> Any:
    """The call shape (tool, args, results) of the ``serial``-th call: the first one over and over ("repeat"),
    the first two in turn ("alternate"), or any; a share ``noise`` of any shape in every mode."""
    if mode == "random" or rng.random() < noise:
        return rng.choice(shapes)
    if mode == "repeat":
        return shapes[0]
    return shapes[serial % 2 if len(shapes) > 1 else 0]


def generate(rng: random.Random, name: str) -> dict[str, Any]:
    """One random scenario (name, description, config, events) of the 2026.7 line."""
    config = _config(rng)
    shapes = []
    for _ in range(rng.randrange(1, 5)):
        tool = rng.choice(TOOLS)
        args = _args(rng, tool)
        shapes.append((tool, args, [_result(rng, tool) for _ in range(rng.randrange(1, 3))]))
    runs = rng.sample(["r1", "r2", " r1 ", "", None, "r3", "\u00a0r1", "\u0085r1", " "], rng.randrange(1, 3))
    sessions = rng.sample([("s1", "absent"), ("s1", "k1"), ("s2", "absent"), ("s1", None), ("s1", ""),
                           (None, "k1"), ("s2", "k1"), (None, None)], rng.randrange(1, 3))
    agents = rng.sample(AGENT_IDS, 2) if "agents" in config else [None]
    events: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    answered: list[str] = []
    serial = 0
    used_ids: set[str] = set()
    mode = rng.choice(["random", "repeat", "alternate", "alternate"])  # loops need repeats or a ping-pong
    calls = 0
    for _ in range(rng.randrange(10, 120)):
        run = rng.choice(runs)
        session_id, session_key = rng.choice(sessions)
        base: dict[str, Any] = {"run_id": run, "session_id": session_id}
        if session_key != "absent":
            base["session_key"] = session_key
        roll = rng.random()
        if session_id is None and session_key in (None, "absent") and not (pending and 0.04 <= roll < 0.25):
            base = {"run_id": run, "session_id": "s1"}  # only a tool_result may come without any session
        if roll < 0.04:
            event = {"type": "compaction_retry", **base}
            if rng.random() < 0.5:
                event["agent_id"] = rng.choice(agents)
            events.append(event)
            continue
        if pending and roll < 0.2:
            call = pending.pop(rng.randrange(len(pending)))
            result = {"type": "tool_result", "run_id": call["run_id"], "session_id": call["session_id"],
                      "tool_call_id": call["tool_call_id"]}
            if "session_key" in call:
                result["session_key"] = call["session_key"]
            if rng.random() < 0.15:
                result["run_id"] = rng.choice(["r9", None])
            if rng.random() < 0.1 and call["session_id"] is not None:
                result["session_key"] = rng.choice([None, "k9"])  # found by its session id (§8.1)
            if rng.random() < 0.6:
                result["tool_name"] = call["tool_name"]
                if "args" in call:
                    result["args"] = call["args"]
            _outcome(rng, result, call["tool_name"])
            events.append(result)
            answered.append(call["tool_call_id"])
            continue
        tool, args, results = _shape(rng, mode, shapes, calls, 0.08)
        if roll < 0.25:
            # a result with no pending call: a call id never seen, or one already answered
            result = {"type": "tool_result", **base,
                      "tool_call_id": rng.choice(answered) if answered and rng.random() < 0.5
                      else rng.choice([f"ghost-{serial}", None, ""])}
            if rng.random() < 0.7:
                result["tool_name"] = tool
            if rng.random() < 0.7:
                result["args"] = shuffled(args, rng)
            _outcome(rng, result, tool, results)
            events.append(result)
            serial += 1
            continue
        serial += 1
        calls += 1
        event = {"type": "tool_call", **base, "tool_call_id": f"c{serial}", "tool_name": tool,
                 "args": shuffled(args, rng), "result": None, "error": None}
        if rng.random() < 0.03:
            del event["args"]
        if "agents" in config and rng.random() < 0.7:
            event["agent_id"] = rng.choice(agents)
        if rng.random() < 0.15:
            event["outcome_follows"] = True
            if rng.random() < 0.1 and " " not in used_ids:
                event["tool_call_id"] = " "  # an id, though blank (§9: only a missing or empty id is none)
            used_ids.add(event["tool_call_id"])
            pending.append(event)
        else:
            _outcome(rng, event, tool, results)
        events.append(event)
    return {"name": name, "description": "random scenario (bench/difffuzz.py)", "config": config, "events": events}


def generate_wide(rng: random.Random, name: str) -> dict[str, Any]:
    """A long scenario past OpenClaw's bounds: more than 256 warning keys in one session (the first-inserted
    key is dropped, §6), more than 1,024 blocked deferred calls (the oldest forgotten, §9), many runs."""
    kind = rng.choice(["warning-keys", "blocked", "runs"])
    events: list[dict[str, Any]] = []
    serial = 0

    def call(run: str, args: Any, **extra: Any) -> None:
        nonlocal serial
        serial += 1
        events.append({"type": "tool_call", "run_id": run, "session_id": "s1", "tool_call_id": f"w{serial}",
                       "tool_name": "read", "args": args, "result": {"content": [], "details": {"n": serial}},
                       "error": None, **extra})

    if kind == "warning-keys":
        config = {"tools": {"loopDetection": {"enabled": True, "historySize": 4000, "criticalThreshold": 4000}}}
        keys = rng.randrange(255, 262)
        for key in range(keys):
            for _ in range(11):
                call("r1", {"k": key})
        for key in rng.sample(range(keys), 4) + [0, 1]:
            call("r1", {"k": key})  # an evicted key emits again
    elif kind == "blocked":
        config = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 1, "criticalThreshold": 2,
                                              "historySize": 5}}}
        for _ in range(2):
            call("r1", {"k": "same"}, result={"content": [], "details": {}})
        blocked = rng.randrange(1020, 1030)
        for _ in range(blocked):
            call("r1", {"k": "same"}, outcome_follows=True)
        for first in rng.sample(range(3, 3 + blocked), 3) + [3, 4, 2 + blocked]:
            events.append({"type": "tool_result", "run_id": "r1", "session_id": "s1", "tool_call_id": f"w{first}",
                           "tool_name": "read", "args": {"k": "same"}, "result": {"content": [], "details": {}},
                           "error": None})
    else:
        config = {"tools": {"loopDetection": {"enabled": True, "postCompactionGuard": {"windowSize": 1}}}}
        runs = rng.randrange(60, 140)
        events.append({"type": "compaction_retry", "run_id": "r0", "session_id": "s1"})
        call("r0", {"k": 0})
        for run in range(1, runs):
            if rng.random() < 0.3:
                events.append({"type": "compaction_retry", "run_id": f"r{run}", "session_id": "s1"})
            call(f"r{run}", {"k": run})
        call("r0", {"k": 0})
        events.append({"type": "compaction_retry", "run_id": "r1", "session_id": "s1"})
        call("r1", {"k": 1})
    return {"name": name, "description": f"bounds: {kind} (bench/difffuzz.py)", "config": config, "events": events}


def _outcome(rng: random.Random, event: dict[str, Any], tool: str, results: list[Any] | None = None) -> None:
    roll = rng.random()
    event["result"], event["error"] = None, None
    if roll < 0.12:
        event["error"] = _error(rng)
    elif roll < 0.17:
        pass  # the tool returned nothing
    else:
        event["result"] = rng.choice(results) if results else _result(rng, tool)


# ---------------------------------------------------------------------------------------------------------------
# Comparison and minimisation


def coverage(expected: list[dict[str, Any]]) -> Counter[str]:
    """What OpenClaw's verdicts of one scenario exercised: decisions per detector, guard aborts, ignored results."""
    seen: Counter[str] = Counter()
    for verdict in expected:
        detection = verdict.get("detection") or {}
        if detection.get("stuck"):
            decision = verdict.get("decision") or ("emitted" if (verdict.get("warning") or {}).get("emitted")
                                                   else detection["level"])
            seen[f"{detection['detector']}/{decision}"] += 1
            if detection.get("liveness_signal"):
                seen[f"liveness {detection['liveness_signal']}"] += 1
        if verdict.get("tool_loop_recovery"):
            seen[f"{verdict['tool_loop_recovery']} block"] += 1
        if (verdict.get("guard") or {}).get("abort"):
            seen["guard abort"] += 1
        if "ignored" in verdict:
            seen["ignored result"] += 1
        if (verdict.get("outcome") or {}).get("unknown_tool_name"):
            seen["unknown tool name"] += 1
    return seen


def compare(scenario: dict[str, Any], expected: list[dict[str, Any]]) -> Mismatch | None:
    """loopwatch's first difference from ``expected`` (OpenClaw's), or None.

    The scenario goes through JSON text and loopwatch's own reader first, as a scenario file does (so an
    integer past 2^53 reaches the engine as a file would give it, not as the generator's Python int)."""
    return run_scenario({**json_loads(json.dumps(scenario)), "expected": expected})


def _loop_call(rng: random.Random, mode: str, serial: int, shapes: list[Any], churn: tuple[str, list[Any], Any, Any],
               failure: str, commands: list[str]) -> tuple[str, Any, Any, Any]:
    """``(tool, args, result, error)`` of the ``serial``-th call of a 2026.9.6 loop of kind ``mode``: a terminal exec
    failure (one of ``commands``, output ``failure`` with volatile parts), a call of the ``churn`` tool cycling
    through its variants with one outcome ``(tool, variants, result, error)``, or a shape of :func:`_shape` (a
    tenth of those throwing instead); 5 % noise in each."""
    if mode == "exec-failure" and rng.random() > 0.05:
        # a terminal exec failure whose output differs only in what 2026.9.6 masks (or not quite)
        output = failure.format(*(rng.choice(VOLATILE_PARTS) for _ in range(3)))
        result = {"content": [{"type": "text", "text": output}],
                  "details": {"status": rng.choice(["failed", "failed", "completed"]), "exitCode": rng.choice([2, 2, 0]),
                              "aggregated": output, "timedOut": False, "pid": rng.randrange(9999)}}
        return "exec", {"command": rng.choice(commands)}, result, None
    if mode == "churn" and rng.random() > 0.05:
        tool, variants, result, error = churn
        return tool, variants[serial % len(variants)], result, error
    tool, args, results = _shape(rng, mode, shapes, serial, 0.05)
    if rng.random() < 0.1:
        return tool, args, None, _error(rng)
    return tool, args, rng.choice(results), None


def generate_2026_9(rng: random.Random, name: str) -> dict[str, Any]:
    """A random scenario for the 2026.9.6 profile's detectors: tool calls carrying their outcomes, detection on.

    Thresholds are fixed in that release (10/20/30), so the scenarios are long loops: repeats, ping-pongs, and
    argument churn (one tool cycling through a few argument variants with stable outcomes)."""
    shapes = []
    for _ in range(rng.randrange(1, 4)):
        tool = rng.choice(TOOLS)
        shapes.append((tool, _args(rng, tool), [_result(rng, tool) for _ in range(rng.randrange(1, 3))]))
    churn_tool = rng.choice(["read", "exec", "web_fetch", "process", "write", "edit"])
    variants = [_args(rng, churn_tool) for _ in range(rng.randrange(2, 4))]
    # no-progress outcomes (2026.9.6): a thrown error, or a write that changed nothing
    churn_result, churn_error = rng.choice([(None, _error(rng)), ({"content": [], "details": {"changed": False}}, None),
                                            (_result(rng, churn_tool), None)])
    mode = rng.choice(["repeat", "alternate", "churn", "random", "exec-failure"])
    runs = rng.sample(["r1", "r2", None], rng.randrange(1, 3))
    failure = rng.choice(FAILURE_OUTPUTS)
    events = []
    for serial in range(rng.randrange(15, 70)):
        tool, args, result, error = _loop_call(rng, mode, serial, shapes, (churn_tool, variants, churn_result,
                                                                          churn_error), failure, ["make test"])
        events.append({"type": "tool_call", "run_id": rng.choice(runs), "session_id": "s1",
                       "tool_call_id": f"c{serial}", "tool_name": tool, "args": shuffled(args, rng),
                       "result": result, "error": error})
    return {"name": name, "description": "random scenario, 2026.9.6 detectors (bench/difffuzz.py)",
            "profile": "openclaw-2026.9.6", "config": {"tools": {"loopDetection": {"enabled": True}}},
            "events": events}


def _replayed(scenario: dict[str, Any], expected: list[dict[str, Any] | None]) -> Iterable[tuple[int, dict[str, Any],
                                                                                               dict[str, Any]]]:
    """``(index, loopwatch's verdict, OpenClaw's entry)`` for each event of ``scenario`` (replayed through loopwatch's
    engine after a round trip through JSON text, as a file gives it) whose expected entry is not None."""
    from streams.detection import Engine, SessionStore
    from streams.offline.conformance import scenario_config
    scenario = json_loads(json.dumps(scenario))
    store = SessionStore(Engine(scenario_config(scenario)))
    for index, (event, want) in enumerate(zip(scenario["events"], expected)):
        verdict = store.process(event)
        if want is not None:
            yield index, verdict, want


def compare_2026_9(scenario: dict[str, Any], expected: list[dict[str, Any] | None]) -> Mismatch | None:
    """loopwatch's first difference from 2026.9.6's module (``--detector-only``): for each tool call up to the first
    critical detection, its tool name, args hash, detection, warning (without loopwatch's note) and outcome (result
    hash, no-progress mark, outcome kind, failure identity)."""
    for index, verdict, want in _replayed(scenario, expected):
        warning = verdict.get("warning")
        got = {"tool_name": verdict.get("tool_name"), "args_hash": verdict.get("args_hash"),
               "detection": verdict.get("detection"),
               "warning": None if warning is None else {k: v for k, v in warning.items() if k != "note"},
               "result_hash": (verdict.get("outcome") or {}).get("result_hash")}
        for field in ("no_progress", "outcome_kind", "failure_identity_hash"):
            got[field] = (verdict.get("outcome") or {}).get(field)
        for field in set(want) | {"no_progress", "outcome_kind", "failure_identity_hash"}:
            if got[field] != want.get(field):
                return Mismatch(scenario["name"], index, field, want.get(field), got[field])
    return None


# Tool names the runner scenarios call: each is registered as a tool of that exact name (a call of a name no tool
# has is answered "Tool ... not found" before any detection, spec §3.1 step 0, which an event stream never shows).
RUNNER_TOOLS = ["read", "read", "exec", "bash", "Bash", "READ", "write", "edit", "process", "process",
                "command_status", "message", "sessions_send", "conversations_send", "apply-patch", "apply_patch",
                "web_fetch", "mystery_tool", "update_plan", "cron", "automations", "APPLY-PATCH", "Bash\t",
                "\u00a0bash", "\ufeffread", "tool", "constructor", "toString", "Command_Status", "\u30c4\u30fc\u30eb"]


def _runner_result(rng: random.Random, tool: str) -> Any:
    """A result object a registered tool returns (``content`` a list), as :func:`_result` draws them."""
    while True:
        result = _result(rng, tool)
        if isinstance(result, dict) and isinstance(result.get("content"), list):
            return result


def generate_2026_9_runner(rng: random.Random, name: str) -> dict[str, Any]:
    """A random scenario for the 2026.9.6 embedded runner past its first critical detection (``--runner``).

    Long loops as :func:`generate_2026_9` makes them (repeats, ping-pongs, argument churn, terminal exec failures),
    in one or two runs and the run-less session, that keep calling after their blocks: the model retries the
    blocked call, switches args or tools, comes back; compaction retries now and then (a new attempt); in some
    scenarios most calls deferred, their tool_result following before the run's next event (other runs' events in
    between). Object args, result objects or thrown errors, tool call ids (some empty), tool names that are
    registered tools, a few session and ``enabled`` variants."""
    shapes = []
    for _ in range(rng.randrange(1, 4)):
        tool = rng.choice(RUNNER_TOOLS)
        args = _args(rng, tool)
        shapes.append((tool, args if isinstance(args, dict) else {"value": args},
                       [_runner_result(rng, tool) for _ in range(rng.randrange(1, 3))]))
    churn_tool = rng.choice(["read", "exec", "web_fetch", "process", "write", "edit"])
    variants = [a if isinstance(a, dict) else {"value": a} for a in (_args(rng, churn_tool) for _ in range(rng.randrange(2, 4)))]
    churn_result, churn_error = rng.choice([(None, _error(rng)), ({"content": [], "details": {"changed": False}}, None),
                                            (_runner_result(rng, churn_tool), None)])
    mode = rng.choice(["repeat", "alternate", "churn", "random", "exec-failure"])
    runs = rng.sample(["r1", "r2", None, " "], rng.randrange(1, 3))
    failure = rng.choice(FAILURE_OUTPUTS)
    switch = rng.random() < 0.5  # after the first 25 calls the model sometimes tries something else
    sessions = [rng.choice([{"session_id": "s1"}] * 16 + [{"session_id": "s1", "session_key": None},
                                                         {"session_id": "s1", "session_key": "k1"}])]
    if rng.random() < 0.15:  # a second session, or another key of the same session id (a move)
        sessions.append(rng.choice([{"session_id": "s2"}, {"session_id": "s1", "session_key": "k2"},
                                    {"session_id": "s2", "session_key": "k1"}]))
    config, agent = _runner_config(rng)
    agents = [agent] if agent is None or rng.random() < 0.7 else [agent, "main", None]
    ids = rng.random() < 0.1  # some calls with an empty id
    deferred = rng.random() < 0.4  # calls whose result follows as a tool_result (the runner waits for it)
    events: list[dict[str, Any]] = []
    running: dict[Any, dict[str, Any]] = {}  # run -> the tool_result its running call waits for

    def finish(run: Any) -> None:
        if run in running:
            events.append(running.pop(run))

    for serial in range(rng.randrange(20, 90)):
        run = rng.choice(runs)
        session = rng.choice(sessions)
        for other in list(running):
            if other == run or rng.random() < 0.3:
                finish(other)
        if rng.random() < 0.02:
            for other in list(running):
                finish(other)  # not while a call of the run (or of another run of its identity) waits
            events.append({"type": "compaction_retry", "run_id": run, **session})
        if switch and serial > 25 and rng.random() < 0.3:
            tool, args, results = rng.choice(shapes)
            args = {**args, "retry": rng.randrange(3)}
            result, error = rng.choice(results), None
        else:
            tool, args, result, error = _loop_call(rng, mode, serial, shapes, (churn_tool, variants, churn_result,
                                                                              churn_error), failure,
                                                   ["make test", "make test", "pytest -k a"])
        event = {"type": "tool_call", "run_id": run, **session, "tool_call_id": f"c{serial}", "tool_name": tool,
                 "args": shuffled(args, rng), "result": result, "error": error}
        if ids and rng.random() < 0.2:
            # an empty id (a call without any id fails inside 2026.9.6's agent loop before its tool runs:
            # "Cannot read properties of undefined (reading 'validate')", no detection, nothing recorded)
            event["tool_call_id"] = ""
        agent_id = rng.choice(agents)
        if agent_id is not None:
            event["agent_id"] = agent_id
        events.append(event)
        if deferred and event["tool_call_id"] and rng.random() < 0.7:
            event["outcome_follows"] = True
            outcome = {"result": event.pop("result"), "error": event.pop("error")}
            event["result"] = event["error"] = None
            running[run] = {"type": "tool_result", **{k: v for k, v in event.items() if k not in (
                "type", "tool_name", "args", "outcome_follows", "result", "error")}, **outcome}
    for run in list(running):
        finish(run)
    return {"name": name, "description": "random scenario, 2026.9.6 embedded runner (bench/difffuzz.py)",
            "profile": "openclaw-2026.9.6", "config": config, "events": events}


def generate_2026_9_runner_wide(rng: random.Random, name: str) -> dict[str, Any]:
    """A long 2026.9.6 runner scenario past the 256 warning keys of one session (§6): a run's argument-churn key
    is set, 255 other runs each warn once, the first run's key is set again (bucket 2) before a 257th key comes
    in, then an early run and the first one warn again (emitted only if their key was dropped). Blocks and
    vetoes along the way when the random counts reach them."""
    events: list[dict[str, Any]] = []
    tool = rng.choice(["read", "exec", "web_fetch"])
    error = rng.choice(["ENOENT", "HTTP 503", "boom"])

    def call(run: str, args: dict[str, Any], failed: bool = False) -> None:
        events.append({"type": "tool_call", "run_id": run, "session_id": "s1", "tool_call_id": f"w{len(events)}",
                       "tool_name": tool, "args": args, "error": error if failed else None,
                       "result": None if failed else {"content": [{"type": "text", "text": "same"}], "details": {}}})

    def churn(run: str, count: int) -> None:
        for serial in range(count):
            call(run, {"path": f"/v{serial % 3}"}, failed=True)

    def repeat(run: str) -> None:
        for _ in range(rng.choice([10, 11, 11, 12])):
            call(run, {"path": "/same"})

    churn("r0", rng.randrange(11, 14))
    for run in range(1, rng.choice([255, 256])):
        repeat(f"r{run}")
    churn("r0", rng.randrange(19, 24))
    repeat("r-new")
    repeat(f"r{rng.randrange(1, 4)}")
    churn("r0", rng.randrange(11, 14))
    return {"name": name, "description": "past the warning keys' bound, 2026.9.6 embedded runner (bench/difffuzz.py)",
            "profile": "openclaw-2026.9.6", "config": {"tools": {"loopDetection": {"enabled": True}}},
            "events": events}


def _runner_config(rng: random.Random) -> tuple[dict[str, Any], str | None]:
    """A 2026.9.6 config (only ``enabled`` keys: that release refuses the others) and the agent id the calls name."""
    roll = rng.random()
    if roll < 0.8:
        return {"tools": {"loopDetection": {"enabled": True}}}, None
    if roll < 0.9:
        return {"tools": {"loopDetection": rng.choice([{}, {"enabled": False}, {"enabled": "true"}, {"enabled": 1}])}}, None
    agent = {"id": "ops", "tools": {"loopDetection": {"enabled": rng.choice([True, False, None])}}}
    return ({"tools": {"loopDetection": {"enabled": rng.choice([True, False])}}, "agents": {"list": [agent]}},
            rng.choice(["ops", " Ops ", "main"]))


def _guard_identity(event: dict[str, Any]) -> tuple[str, Any]:
    """The run identity of spec §7 (the guard's, and 2026.9.6's recovery flag's): the run id when not blank, else
    the session key when present, else the session id (an ``"absent"`` field counts as absent)."""
    run = event.get("run_id")
    if isinstance(run, str) and run.strip():
        return "run", run
    if event.get("session_key", "absent") not in ("absent", None):
        return "key", event["session_key"]
    return "sid", event.get("session_id")


def runner_decides(scenario: dict[str, Any]) -> bool:
    """Whether ``--runner`` can expect ``scenario`` (a conformance scenario of the 2026.9.6 profile): tool calls with
    their outcome (a result object with a ``content`` list, or a thrown error), object args and a string call id, and
    compaction retries; no deferred results, no per-event profiles, no config ``options`` (channel plugins)."""
    if scenario.get("profile") != "openclaw-2026.9.6" or (scenario.get("config") or {}).get("options"):
        return False
    running: dict[Any, Any] = {}  # call id -> the deferred call's context, until its tool_result
    for event in scenario["events"]:
        kind = event.get("type")
        context = tuple(event.get(key, "absent") for key in ("run_id", "session_id", "session_key", "agent_id"))
        if "profile" in event or kind not in ("tool_call", "tool_result", "compaction_retry"):
            return False
        if context in running.values():
            # the run's agent loop waits for its running tool: nothing else of that run can happen meanwhile
            if kind != "tool_result" or running.get(event.get("tool_call_id")) != context:
                return False
        if kind == "compaction_retry":
            if any(_guard_identity(dict(zip(("run_id", "session_id", "session_key"), waiting))) == _guard_identity(event)
                   for waiting in running.values()):
                return False  # a retry while a call of that run waits for its result
            continue
        result, error = event.get("result"), event.get("error")
        if error is None and not (isinstance(result, dict) and isinstance(result.get("content"), list)):
            if kind == "tool_call" and event.get("outcome_follows") is True:
                pass
            else:
                return False
        if kind == "tool_result":
            if running.pop(event.get("tool_call_id"), context) != context:
                return False  # a result in other session fields or of another run than its call's
            continue
        if not isinstance(event.get("args"), dict) or not isinstance(event.get("tool_call_id"), str):
            return False
        if event.get("outcome_follows") is True:
            if not event["tool_call_id"] or event["tool_call_id"] in running:
                return False
            running[event["tool_call_id"]] = context
    return not running


def runner_differences(oracle: Oracle, scenarios: Iterable[dict[str, Any]]) -> tuple[int, list[Mismatch]]:
    """How many of ``scenarios`` ``--runner`` decides (:func:`runner_decides`), and for each of those whose file
    expectations differ from what the runner gives, the first differing field (expected: the runner's)."""
    checked, differing = 0, []
    for scenario in scenarios:
        if not runner_decides(scenario):
            continue
        checked += 1
        for index, (got, want) in enumerate(zip(oracle.expected(scenario), scenario["expected"])):
            field = next((key for key in sorted(set(got) | set(want)) if got.get(key) != want.get(key)), None)
            if field is not None:
                differing.append(Mismatch(scenario["name"], index, field, got.get(field), want.get(field)))
                break
    return checked, differing


def first_difference(oracle: Oracle, make: Any, seed: int, count: int) -> tuple[Mismatch, dict[str, Any]] | None:
    """The first of ``count`` scenarios ``make(rng, name)`` generates from ``seed`` where loopwatch differs from the
    oracle, with the scenario minimised; None when all agree. ``make`` is :func:`generate`, :func:`generate_wide`
    or (with a ``detector_only`` oracle) :func:`generate_2026_9`."""
    rng = random.Random(seed)
    for number in range(count):
        scenario = make(rng, f"fuzz-{seed}-{number}")
        mismatch = _compare_any(scenario, oracle.expected(scenario))  # an oracle failure raises
        if mismatch is not None:
            return mismatch, minimise(oracle, scenario)
    return None


def _compare_any(scenario: dict[str, Any], expected: list[Any]) -> Mismatch | None:
    if scenario.get("profile") == "openclaw-2026.9.6" and "embedded runner" not in scenario.get("description", ""):
        return compare_2026_9(scenario, expected)
    return compare(scenario, expected)


def _differs(oracle: Oracle, scenario: dict[str, Any]) -> Mismatch | None:
    try:
        return _compare_any(scenario, oracle.expected(scenario))
    except RuntimeError:
        return None


def _config_variants(config: Any) -> Iterable[Any]:
    """``config`` with one key (at any depth) or one list entry dropped, one at a time."""
    if isinstance(config, dict):
        for key in list(config):
            yield {k: v for k, v in config.items() if k != key}
            for smaller in _config_variants(config[key]):
                yield {**config, key: smaller}
    elif isinstance(config, list):
        for index in range(len(config)):
            yield config[:index] + config[index + 1:]
            for smaller in _config_variants(config[index]):
                yield config[:index] + [smaller] + config[index + 1:]


def minimise(oracle: Oracle, scenario: dict[str, Any], budget: int = 600) -> dict[str, Any]:
    """A smaller scenario that still differs: events (in halves, then one at a time) and config keys dropped."""
    best = scenario
    tries = 0

    def still(candidate: dict[str, Any]) -> bool:
        nonlocal tries
        tries += 1
        return _differs(oracle, candidate) is not None

    chunk = max(1, len(best["events"]) // 2)
    while chunk >= 1 and tries < budget:
        index, shrunk = 0, False
        while index < len(best["events"]) and tries < budget:
            events = best["events"][:index] + best["events"][index + chunk:]
            if events and still({**best, "events": events}):
                best, shrunk = {**best, "events": events}, True
            else:
                index += chunk
        if not shrunk:
            chunk //= 2
    changed = True
    while changed and tries < budget:
        changed = False
        for config in _config_variants(best.get("config") or {}):
            if tries >= budget:
                break
            if still({**best, "config": config}):
                best, changed = {**best, "config": config}, True
                break
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--openclaw", default=os.environ.get("LOOPWATCH_OPENCLAW_DIR"),
                        help="OpenClaw's package directory, a 2026.7.x install (env LOOPWATCH_OPENCLAW_DIR)")
    parser.add_argument("--node", default=None, help="node 22+ (env LOOPWATCH_OPENCLAW_NODE, else node on PATH)")
    parser.add_argument("--count", type=int, default=500, help="random scenarios (default 500)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check", metavar="FILE", help="compare the oracle's expectations with FILE's instead")
    parser.add_argument("--expect", metavar="FILE", help="print FILE's scenarios with the oracle's expectations")
    parser.add_argument("--profile", choices=["openclaw-2026.7", "openclaw-2026.9.6"], default="openclaw-2026.7",
                        help="openclaw-2026.9.6: DIR is a 2026.9.x install; only its detectors and warning dedupe "
                             "are compared, up to each scenario's first critical detection")
    parser.add_argument("--runner", action="store_true",
                        help="with --profile openclaw-2026.9.6: drive 2026.9.6's embedded runner (its agent loop, batch "
                             "admission and tool wrapper) and compare every tool call, past the first block")
    parser.add_argument("--wide", type=float, default=0.01,
                        help="share of long scenarios past OpenClaw's bounds (256 warning keys, 1,024 blocked calls, "
                             "many runs; default 0.01)")
    parser.add_argument("--show", type=int, default=5, help="minimised mismatches to print (default 5)")
    options = parser.parse_args()
    if not options.openclaw or not (Path(options.openclaw) / "dist").is_dir():
        parser.error("--openclaw: an OpenClaw package directory with dist/ (or LOOPWATCH_OPENCLAW_DIR)")
    nine = options.profile == "openclaw-2026.9.6"
    if options.runner and not nine:
        parser.error("--runner needs --profile openclaw-2026.9.6")
    with Oracle(options.openclaw, options.node, detector_only=nine, runner=options.runner) as oracle:
        if options.expect:
            for scenario in load_scenarios(options.expect):
                print(json.dumps({**scenario, "expected": oracle.expected(scenario)}, ensure_ascii=False))
            return 0
        if options.check and options.runner:
            checked, differing = runner_differences(oracle, load_scenarios(options.check))
            print("\n".join(f"the file vs OpenClaw's runner: {mismatch}" for mismatch in differing))
            print(f"{checked - len(differing)} of {checked} scenarios the runner decides: the file = OpenClaw's runner")
            return 1 if differing else 0
        if options.check:
            failed = 0
            scenarios = list(load_scenarios(options.check))
            for scenario in scenarios:
                mismatch = run_scenario({**scenario, "expected": oracle.expected(scenario)})
                want = run_scenario(scenario)
                if mismatch is not None:
                    failed += 1
                    print(f"loopwatch vs OpenClaw: {mismatch}" + ("" if want is None else f" (vs file: {want})"))
            print(f"{len(scenarios) - failed} of {len(scenarios)} scenarios: loopwatch = OpenClaw's code")
            return 1 if failed else 0
        rng = random.Random(options.seed)
        found: list[tuple[Mismatch, dict[str, Any]]] = []
        events = 0
        seen: Counter[str] = Counter()
        for number in range(options.count):
            wide = rng.random() < options.wide
            make = ((generate_2026_9_runner_wide if wide else generate_2026_9_runner) if options.runner
                    else generate_2026_9 if nine else generate_wide if wide else generate)
            scenario = make(rng, f"fuzz-{options.seed}-{number}")
            events += len(scenario["events"])
            expected = oracle.expected(scenario)
            seen.update(coverage([entry for entry in expected if entry is not None]))
            mismatch = _compare_any(scenario, expected)
            if mismatch is not None:
                found.append((mismatch, scenario))
        print(f"{options.count} scenarios, {events} events (seed {options.seed}): {len(found)} differ")
        print("OpenClaw's verdicts among them: " + ", ".join(f"{key} {n}" for key, n in sorted(seen.items())))
        for mismatch, scenario in found[:options.show]:
            small = minimise(oracle, scenario)
            print(f"\n{mismatch}\nminimised ({len(small['events'])} events): {_differs(oracle, small)}")
            print(json.dumps({k: small[k] for k in ("name", "config", "events")}))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
