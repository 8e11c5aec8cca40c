"""The project's own 2026.7 conformance scenarios: tests/fixtures/vectors-2026.7-own.jsonl, written by this script.

Each scenario is ours (events chosen here to pin one rule of docs/detection-rules.md, the spec's sections and the
R1-R9 revision); its expectations come from OpenClaw 2026.7.35's own code through ``bench/openclaw_oracle.mjs``
(description ends "expected: OpenClaw 2026.7.35's code"), except where the oracle does not model OpenClaw (a
channel plugin's send tool): those are expected by hand from the spec, and the description says so.

    python bench/own_vectors_2026_7.py --openclaw DIR [--node NODE] [--out tests/fixtures/vectors-2026.7-own.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.difffuzz import Oracle  # noqa: E402
from streams.offline.conformance import Mismatch, run_scenario  # noqa: E402

FROM_OPENCLAW = "expected: OpenClaw 2026.7.35's code (bench/openclaw_oracle.mjs)"
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "vectors-2026.7-own.jsonl"

ON = {"tools": {"loopDetection": {"enabled": True}}}


def on(**block: Any) -> dict[str, Any]:
    return {"tools": {"loopDetection": {"enabled": True, **block}}}


def res(text: str = "ok", **details: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details or {"ok": True}}


class Events:
    """Builds one scenario's events: calls numbered c1, c2, ... unless an id is given."""

    def __init__(self, run: Any = "run-a", session: Any = "sess-a") -> None:
        self.run, self.session, self.events, self.serial = run, session, [], 0

    def call(self, tool: str, args: Any = "absent", result: Any = None, error: Any = None, *, times: int = 1,
             **extra: Any) -> "Events":
        for _ in range(times):
            self.serial += 1
            event: dict[str, Any] = {"type": "tool_call", "run_id": self.run, "session_id": self.session,
                                     "tool_call_id": f"c{self.serial}", "tool_name": tool}
            if not (isinstance(args, str) and args == "absent"):
                event["args"] = args
            event.update({"result": result, "error": error})
            event.update(extra)
            self.events.append(event)
        return self

    def result(self, call_id: Any, result: Any = None, error: Any = None, **extra: Any) -> "Events":
        event = {"type": "tool_result", "run_id": self.run, "session_id": self.session, "tool_call_id": call_id,
                 "result": result, "error": error}
        event.update(extra)
        self.events.append(event)
        return self

    def compaction(self, **extra: Any) -> "Events":
        self.events.append({"type": "compaction_retry", "run_id": self.run, "session_id": self.session, **extra})
        return self


def scenarios() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(name: str, description: str, config: dict[str, Any], events: Events | list[dict[str, Any]],
            oracle: bool = True) -> None:
        out.append({"name": f"own7-{name}", "description": f"{description}. {FROM_OPENCLAW if oracle else ''}".strip(),
                    "config": config, "events": events.events if isinstance(events, Events) else events})

    grep = {"pattern": "TODO", "path": "src/"}
    # §2 configuration
    add("enabled-absent-detects-nothing-guard-watches",
        "§2.3: no loopDetection block: 12 identical greps are never judged, the calls are still recorded and "
        "the guard (on unless enabled is false) aborts on the third identical outcome after a compaction",
        {}, Events().call("grep", grep, res("3 hits"), times=12).compaction().call("grep", grep, res("3 hits"), times=3))
    add("enabled-truthy-string-turns-detectors-on",
        "§2.3: enabled \"off\" is a non-empty string, so JavaScript truthiness turns the detectors on; warnings "
        "from count 2 are detected but only the 10th emits (bucket 1)",
        {"tools": {"loopDetection": {"enabled": "off", "warningThreshold": 2, "criticalThreshold": 40}}},
        Events().call("grep", grep, res("3 hits"), times=12))
    add("enabled-zero-detectors-off-recording-and-guard-on",
        "§2.3: enabled 0 is falsy for the detectors but not exactly false: calls are recorded and the guard "
        "still aborts", {"tools": {"loopDetection": {"enabled": 0}}},
        Events().call("grep", grep, res("3 hits"), times=3).compaction().call("grep", grep, res("3 hits"), times=3))
    add("enabled-false-no-recording-no-guard",
        "§2.3: enabled false: no detection, no call recorded before execution (outcomes still are), the guard is "
        "off and reports armed false / remaining 0", {"tools": {"loopDetection": {"enabled": False}}},
        Events().call("grep", grep, res("3 hits"), times=2).compaction().call("grep", grep, res("3 hits"), times=4))
    add("clamps-raise-critical-then-global",
        "§2.2: warning 4, critical 4, global 2 resolve to 4/5/6; with genericRepeat off the breaker blocks at a "
        "no-progress streak of 6",
        on(warningThreshold=4, criticalThreshold=4, globalCircuitBreakerThreshold=2,
           detectors={"genericRepeat": False}),
        Events().call("stat", {"path": "/tmp/x"}, res("size 4"), times=8))
    add("invalid-numbers-fall-back-to-defaults",
        "§2.2: warningThreshold 2.5, criticalThreshold \"3\" and historySize 0 are not positive integers: "
        "defaults 10/20/30 apply, so the 10th identical call is the first warning",
        on(warningThreshold=2.5, criticalThreshold="3", historySize=0),
        Events().call("stat", {"path": "/tmp/x"}, res("size 4"), times=12))
    add("integral-floats-are-integers",
        "§2.2: 3.0 and 4.0 are integers in JavaScript: critical 4 blocks the 5th identical call",
        on(warningThreshold=3.0, criticalThreshold=4.0), Events().call("stat", {"path": "/tmp/y"}, res("y"), times=6))
    add("integer-past-2-53-is-a-double",
        "§2.2 R1: criticalThreshold 9007199254740993 reads as the double 9007199254740992, unreachable; warnings "
        "from 3 emit at 10 and 20, nothing blocks", on(warningThreshold=3, criticalThreshold=9007199254740993),
        Events().call("stat", {"path": "/tmp/z"}, res("z"), times=22))
    add("history-size-below-thresholds-makes-them-unreachable",
        "§5.1: historySize 4 caps the streak at 4, so critical 5 never blocks; warning 3 is detected",
        on(historySize=4, warningThreshold=3, criticalThreshold=5), Events().call("stat", {"path": "/h"}, res("h"), times=8))
    # §2.4 agents
    pp = [("read", {"path": "/a.md"}, res("A")), ("read", {"path": "/b.md"}, res("B"))]
    ev = Events()
    for i in range(8):
        tool, args, result = pp[i % 2]
        ev.call(tool, args, result, agent_id="ops")
    ev.call("grep", grep, res("1 hit"), times=6, agent_id="ops")
    add("agent-detectors-merge-key-by-key",
        "§2.4: the global block turns pingPong off, agent ops turns genericRepeat off; merged per key, ops has "
        "neither: an alternation and a repeat both stay silent",
        {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4,
                                     "detectors": {"pingPong": False}}},
         "agents": {"list": [{"id": "ops", "tools": {"loopDetection": {"detectors": {"genericRepeat": False}}}}]}},
        ev)
    add("agent-id-normalised-both-sides",
        "§2.4: entry id \"Build Bot\" and event agent_id \" BUILD-bot\" both normalise to build-bot; its "
        "critical 3 blocks the 4th call",
        {"tools": {"loopDetection": {"enabled": True}},
         "agents": {"list": [{"id": "Build Bot", "tools": {"loopDetection": {"warningThreshold": 2,
                                                                               "criticalThreshold": 3}}}]}},
        Events().call("stat", {"path": "/b"}, res("b"), times=5, agent_id=" BUILD-bot"))
    add("agent-array-entry-skipped-blank-id-is-main",
        "§2.4 R2: an array entry counts as an entry without id, which normalises to main like the blank id "
        "\"  \" does; being first, it is agent main's match and has no block, so the global critical 3 blocks "
        "(the blank-id entry's enabled false is never reached); agent_id \"\" looks nothing up",
        {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}},
         "agents": {"list": [[], {"id": "  ", "tools": {"loopDetection": {"enabled": False}}}]}},
        Events().call("stat", {"path": "/m"}, res("m"), times=4, agent_id="main")
        .call("stat", {"path": "/m"}, res("m"), times=5, agent_id=""))
    add("agent-first-matching-entry-wins",
        "§2.4: two entries normalise to qa; only the first one's block (critical 2) applies",
        {"tools": {"loopDetection": {"enabled": True}},
         "agents": {"list": [{"id": "QA", "tools": {"loopDetection": {"warningThreshold": 1, "criticalThreshold": 2}}},
                             {"id": "qa", "tools": {"loopDetection": {"enabled": False}}}]}},
        Events().call("stat", {"path": "/q"}, res("q"), times=4, agent_id="qa"))
    add("agent-entry-without-block-uses-global",
        "§2.4: the matching entry has no tools.loopDetection, so the global block alone applies (critical 3)",
        {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}},
         "agents": {"list": [{"id": "writer"}]}},
        Events().call("stat", {"path": "/w"}, res("w"), times=5, agent_id="writer"))
    add("agent-guard-window-one",
        "§7 and §2.4: agent tight has postCompactionGuard.windowSize 1, so the first observed outcome after a "
        "compaction aborts the run",
        {"tools": {"loopDetection": {"postCompactionGuard": {"windowSize": 3}}},
         "agents": {"list": [{"id": "tight", "tools": {"loopDetection": {"postCompactionGuard": {"windowSize": 1}}}}]}},
        Events().compaction(agent_id="tight").call("stat", {"path": "/g"}, res("g"), agent_id="tight")
        .call("stat", {"path": "/g2"}, res("g2"), agent_id="tight"))
    # §4 hashing
    add("args-key-order-and-number-forms",
        "§4.1: {b: 1.0, a: [-0.0, 1e21]} and {a: [0, 1e+21], b: 1} serialise alike, so the calls count together",
        on(warningThreshold=2, criticalThreshold=30),
        Events().call("calc", {"b": 1.0, "a": [-0.0, 1e21]}, res("n"), times=2)
        .call("calc", {"a": [0, 1e+21], "b": 1}, res("n"), times=2))
    add("args-utf16-key-order",
        "§4.1: keys z, é, an emoji and U+FFFF sort by UTF-16 code units; two insertion orders hash alike",
        on(warningThreshold=2, criticalThreshold=30),
        Events().call("tag", {"\uffff": 1, "\U0001f600": 2, "z": 3, "\u00e9": 4}, res("t"), times=2)
        .call("tag", {"z": 3, "\u00e9": 4, "\U0001f600": 2, "\uffff": 1}, res("t")))
    add("args-large-integers-round-like-javascript",
        "§4.1: 9007199254740993 parses as 9007199254740992, so the first and third calls share an args hash "
        "(count 2), 9007199254740994 is another",
        on(warningThreshold=2, criticalThreshold=30),
        Events().call("seek", {"offset": 9007199254740993}, res("s")).call("seek", {"offset": 9007199254740994}, res("s"))
        .call("seek", {"offset": 9007199254740992}, res("s")))
    add("args-absent-null-and-empty-differ",
        "§4.1: absent args hash the bare word undefined, null and {} hash otherwise: three signatures",
        on(warningThreshold=2, criticalThreshold=30),
        Events().call("ping").call("ping", None).call("ping", {}).call("ping").call("ping"))
    ex = Events()
    for pid in (101, 202, 303, 404):
        ex.call("bash", {"command": "make test"}, res("FAILED", status="failed", exitCode=2, pid=pid,
                                                       durationMs=pid * 3, aggregated="1 failed"))
    add("exec-outcome-ignores-volatile-fields",
        "§4.3 rule 5: bash is exec; failed runs differing only in pid and durationMs hash alike, so critical 3 "
        "blocks the 4th", on(warningThreshold=2, criticalThreshold=3), ex)
    add("exec-running-hashes-status-and-tail",
        "§4.3 rule 5: a running exec hashes status and tail only; a changed tail is progress",
        on(warningThreshold=2, criticalThreshold=3),
        Events().call("exec", {"command": "npm ci"}, res("...", status="running", tail="12%", pid=1), times=2)
        .call("exec", {"command": "npm ci"}, res("...", status="running", tail="40%", pid=2), times=3))
    poll = {"action": "poll", "sessionId": "job-7"}
    add("process-poll-known-poll-warning-then-critical",
        "§5.2 rules 3-4: process poll with unchanged status is a known poll: warning from 10 (emitted), "
        "critical at 12", on(criticalThreshold=12),
        Events().call("process", poll, res("", status="running", aggregated="building", pid=9), times=13))
    add("process-log-outcome-fields",
        "§4.3 rule 6: process log hashes totalLines and friends; a new totalLines is progress",
        on(warningThreshold=2, criticalThreshold=3),
        Events().call("process", {"action": "log", "sessionId": "job-8"}, res("l", status="running", totalLines=5),
                      times=2)
        .call("process", {"action": "log", "sessionId": "job-8"}, res("l", status="running", totalLines=6), times=4))
    add("command-status-is-a-known-poll",
        "§5.1: command_status is a known poll whatever its args; it never gets generic results",
        on(warningThreshold=3, criticalThreshold=5),
        Events().call("command_status", {"id": "x"}, res("pending"), times=7))
    msg = Events()
    for n in range(5):
        msg.call("message", {"action": "send", "to": "#ops", "text": "deploy failed"},
                 res(f"sent {n}", ok=True, messageId=f"m{n}", ts=1700000000 + n, channel="C1"))
    add("message-send-ids-stripped",
        "§4.3 rule 7: a message send's volatile ids and text are dropped, so each send has the same outcome and "
        "critical 4 blocks the 5th", on(warningThreshold=2, criticalThreshold=4), msg)
    msg = Events()
    for n in range(5):
        msg.call("message", {"action": "read", "channel": "C1"}, res("msgs", ok=True, messageId=f"m{n}"))
    add("message-read-keeps-ids",
        "§4.3 rule 7: action read is not a send: messageId stays in the outcome, every outcome differs, no block",
        on(warningThreshold=2, criticalThreshold=4), msg)
    add("veto-shaped-result-not-recorded",
        "§4.3 rule 4: a result shaped like the detector's own veto records nothing, so it feeds no streak",
        on(warningThreshold=2, criticalThreshold=3),
        Events().call("fetch", {"url": "https://x"}, {"content": [], "details": {"status": "blocked",
                                                                                "deniedReason": "tool-loop"}}, times=5))
    add("thrown-error-vs-returned-error",
        "§4.3 rule 1: a thrown \"HTTP 500\" and a result whose text is \"HTTP 500\" hash differently; numbers and "
        "objects thrown hash their text", on(warningThreshold=2, criticalThreshold=3),
        Events().call("fetch", {"url": "https://y"}, None, "HTTP 500", times=2)
        .call("fetch", {"url": "https://y"}, res("HTTP 500"))
        .call("fetch", {"url": "https://y"}, None, 500).call("fetch", {"url": "https://y"}, None, {"code": 500}))
    add("nothing-returned-stays-pending",
        "§3 step 6: a tool that returns nothing records no outcome; its pending records count for the warning "
        "but never for the no-progress streak", on(warningThreshold=2, criticalThreshold=3),
        Events().call("touch", {"path": "/f"}, None, times=6))
    # §4.4 unknown tools
    ut = Events()
    for n in range(5):
        ut.call("deploy_v2", {"env": f"e{n}"}, None, "Unknown tool: deploy_v2")
    add("unknown-tool-streak-ignores-args",
        "§5.2 rule 1: unknownToolThreshold 3: the 4th call of the missing tool is blocked whatever its args",
        on(unknownToolThreshold=3), ut)
    add("unknown-tool-javascript-whitespace",
        "§4.4 R3: U+00A0 and U+FEFF are JavaScript whitespace, U+0085 and U+001C are not: only the first two "
        "name the missing tool",
        on(unknownToolThreshold=5),
        Events().call("maps", {"q": 1}, None, "unknown tool:\u00a0Zeta").call("maps", {"q": 2}, None, "unknown tool:\ufeffZeta")
        .call("maps", {"q": 3}, None, "unknown tool:\u0085Zeta").call("maps", {"q": 4}, None, "unknown tool:\u001cZeta")
        .call("maps", {"q": 5}, None, "Tool 'Weather.Get' not found").call("maps", {"q": 6}, None, "unknown toolbox"))
    ut = Events()
    for name in ("alpha", "alpha", "beta", "beta", "beta"):
        ut.call("lookup", {"n": name}, None, f"tool \"{name}\" is not available")
    ut.call("lookup", {"n": "gamma"})
    add("unknown-tool-streak-needs-one-name",
        "§5.1: the streak counts the newest run of one missing name; beta x3 reaches threshold 3 and blocks the "
        "next lookup call", on(unknownToolThreshold=3), ut)
    # §5 detectors and §6 warnings
    gr = Events()
    for n in range(22):
        gr.call("search", {"q": "flaky test"}, res(f"page {n % 2}"))
    add("generic-warning-buckets-10-and-20",
        "§6: warning 3 detects from count 3; changing outcomes keep critical away; only counts 10 and 20 emit",
        on(warningThreshold=3, criticalThreshold=25), gr)
    add("generic-critical-block-is-sticky",
        "§3: the veto is not recorded, so the same call stays blocked; other args are allowed",
        on(warningThreshold=2, criticalThreshold=3),
        Events().call("search", {"q": "x"}, res("none"), times=6).call("search", {"q": "y"}, res("none")))
    add("global-breaker-with-generic-off",
        "§5.2 rule 2: with genericRepeat off, the per-(tool, args) breaker blocks at 6 (warning 4, critical 5)",
        on(warningThreshold=4, criticalThreshold=5, globalCircuitBreakerThreshold=6, detectors={"genericRepeat": False}),
        Events().call("list", {"dir": "/"}, res("a b"), times=8))
    pp = Events()
    for n in range(16):
        pp.call("open", {"tab": 1}, res("one")) if n % 2 == 0 else pp.call("click", {"id": "next"}, res("two"))
    add("ping-pong-warning-then-critical",
        "§5.1: alternating open/click with stable outcomes: ping-pong warning (emitted at 10), critical 14 blocks",
        on(warningThreshold=10, criticalThreshold=14), pp)
    pp = Events()
    for n in range(16):
        pp.call("open", {"tab": 1}, res(f"one {n}")) if n % 2 == 0 else pp.call("click", {"id": "next"}, res("two"))
    add("ping-pong-without-evidence-only-warns",
        "§5.1 step 5: one side's outcome changes, so there is no no-progress evidence: warnings only",
        on(warningThreshold=10, criticalThreshold=14), pp)
    pp = Events()
    for n in range(12):
        pp.call("open", {"tab": 1}, res("one")) if n % 2 == 0 else pp.call("   ", {"id": "next"}, res("two"))
    add("ping-pong-blank-tool-name",
        "§5.1 R: a whitespace tool name normalises to \"\"; as the paired record it stops ping-pong; as the newest "
        "it does not", on(warningThreshold=4, criticalThreshold=30), pp)
    pp = Events()
    for n in range(9):
        pp.call("open", {"tab": n % 3}, res("same"))
    add("ping-pong-third-signature-breaks",
        "§5.1: a cycle of three signatures is no ping-pong", on(warningThreshold=3, criticalThreshold=30), pp)
    pl = Events()
    for n in range(14):
        pl.call("process", poll, res("", status="running", aggregated="step 1" if n < 11 else "step 2"))
    add("poll-warning-key-carries-result-hash",
        "§5.4/§6: the poll warning key has the result hash; new output restarts the streak and the bucket",
        on(warningThreshold=10, criticalThreshold=30), pl)
    # §8 runs and sessions
    rs = Events()
    rs.call("grep", grep, res("1"), times=11)
    rs.run = "run-b"
    rs.call("grep", grep, res("1"), times=11)
    add("runs-scope-history-and-dedupe",
        "§8.2: a new run starts from zero and emits its warning again under its own run-prefixed key",
        on(historySize=60), rs)
    rs = Events(run="r1")
    rs.call("grep", grep, res("1"), times=11)
    rs.run = " r1 "
    rs.call("grep", grep, res("1"), times=2)
    add("padded-run-id-shares-history-not-buckets",
        "§8.2: \" r1 \" trims to r1 for history but keeps its raw id in the dedupe key: r1 emits at count 10, "
        "\" r1 \" emits again at count 11", on(), rs)
    hs = Events(run="r1")
    hs.call("grep", grep, res("1"), times=3)
    hs.run = "r2"
    hs.call("stat", {"path": "/"}, res("d"), times=3)
    hs.run = "r1"
    hs.call("grep", grep, res("1"), times=2)
    add("history-cap-is-per-session",
        "§8.2: historySize 4: r2's calls evict r1's older records, so r1's count starts low again",
        on(historySize=4, warningThreshold=2, criticalThreshold=30), hs)
    ss = Events()
    ss.call("grep", grep, res("1"), times=3, session_key="k-main")
    ss.call("grep", grep, res("1"), times=2, session_key=None)
    ss.call("grep", grep, res("1"), times=2, session_key="k-other")
    add("session-id-alias-found-then-moved",
        "§8.1: calls keyed k-main, then keyless (history found by session id, outcomes recorded there, no "
        "detection), then keyed k-other (the state moves): one history throughout",
        on(warningThreshold=2, criticalThreshold=30), ss)
    ms = [
        {"type": "tool_call", "run_id": "r", "session_id": "s-one", "session_key": "k", "tool_call_id": "a1",
         "tool_name": "grep", "args": grep, "result": res("1"), "error": None},
        {"type": "tool_call", "run_id": "r", "session_id": "s-two", "session_key": "k2", "tool_call_id": "a2",
         "tool_name": "grep", "args": grep, "result": res("1"), "error": None},
        {"type": "tool_call", "run_id": "r", "session_id": "s-two", "session_key": "k2", "tool_call_id": "a3",
         "tool_name": "grep", "args": grep, "result": res("1"), "error": None},
        {"type": "tool_call", "run_id": "r", "session_id": "s-two", "session_key": "k", "tool_call_id": "a4",
         "tool_name": "grep", "args": grep, "result": res("1"), "error": None},
        {"type": "tool_call", "run_id": "r", "session_id": "s-two", "session_key": "k", "tool_call_id": "a5",
         "tool_name": "grep", "args": grep, "result": res("1"), "error": None},
    ]
    add("merge-concatenates-and-does-not-trim",
        "§8.1 R9: key k (session s-one) then k2 (s-two) then k with s-two: k2's state merges into k's; with "
        "historySize 2 the merged history of 3 is seen whole before the next record trims it",
        on(historySize=2, warningThreshold=2, criticalThreshold=3), ms)
    add("empty-session-key-is-a-key-but-keyless",
        "§8.1 R4: session_key \"\" stores state under \"\" yet counts as no key: no detection, no call record, "
        "outcomes recorded by session id", on(warningThreshold=2, criticalThreshold=3),
        Events().call("grep", grep, res("1"), times=4, session_key="").call("grep", grep, res("1"), times=2))
    add("keyless-call-feeds-history-and-guard",
        "§8.1: session_key null: no detection, but outcomes are recorded and the guard observes them",
        on(warningThreshold=2, criticalThreshold=3),
        Events().compaction().call("grep", grep, res("1"), times=3, session_key=None)
        .call("grep", grep, res("1"), times=2))
    # §9 results
    dr = Events()
    dr.call("fetch", {"url": "https://a"}, outcome_follows=True).call("fetch", {"url": "https://b"}, outcome_follows=True)
    dr.result("c2", res("B")).result("c1", res("A")).call("fetch", {"url": "https://a"}, res("A"), times=3)
    add("deferred-results-out-of-order",
        "§8.3/§9: two deferred calls answered in reverse order each record their own outcome",
        on(warningThreshold=2, criticalThreshold=4), dr)
    dr = Events(run="r1")
    dr.call("fetch", {"url": "https://a"}, res("A"), times=2).call("fetch", {"url": "https://a"}, outcome_follows=True)
    dr.result("c3", res("A"), run_id="r2").call("fetch", {"url": "https://a"}, res("A"))
    add("result-belongs-to-its-calls-run",
        "§9 R5: the result of r1's deferred call arrives with run id r2 and is still recorded in r1: r1's streak "
        "reaches critical 3", on(warningThreshold=2, criticalThreshold=3), dr)
    db = Events(run="r1")
    db.call("fetch", {"url": "https://z"}, res("Z"), times=3).call("fetch", {"url": "https://z"}, outcome_follows=True)
    db.result("c4", res("Z"), tool_name="fetch", args={"url": "https://z"})
    db.result("c4", res("Z"), tool_name="fetch", args={"url": "https://z"})
    db.call("fetch", {"url": "https://z"}, res("Z"))
    add("blocked-deferred-result-ignored-once",
        "§9 R6: the blocked deferred call's first result is ignored and uses the entry up; the second is a result "
        "with no pending call and is recorded", on(warningThreshold=2, criticalThreshold=3), db)
    nr = Events()
    nr.call("fetch", {"url": "https://n"}, outcome_follows=True)
    nr.result(None, res("N"), tool_name="fetch", args={"url": "https://n"})
    nr.result("", res("N"), tool_name="fetch", args={"url": "https://n"})
    nr.call("fetch", {"url": "https://n"}, res("N"))
    add("result-without-call-id",
        "§9 R8: a result with no tool_call_id attaches to the newest pending record of its tool and args; the "
        "next one is appended", on(warningThreshold=2, criticalThreshold=30), nr)
    add("result-without-session",
        "§8.1 R7: a tool_result with neither session id nor key records nothing and is answered like any result",
        on(warningThreshold=2, criticalThreshold=3),
        Events().call("grep", grep, res("1"), times=2)
        .result("ghost", res("1"), session_id=None, session_key=None, tool_name="grep", args=grep)
        .call("grep", grep, res("1")))
    ur = Events()
    for n in range(3):
        ur.result(f"never-{n}", res("1"), tool_name="Grep", args=grep)
    ur.call("grep", grep, res("1"))
    add("results-of-unseen-calls-count",
        "§9: results of calls never seen are recorded with their own tool name and args and count in the "
        "next call's streak (critical 3 blocks)", on(warningThreshold=2, criticalThreshold=3), ur)
    mv = Events(run="r1")
    mv.call("grep", grep, outcome_follows=True, session_key="k1")
    mv.call("ls", {"dir": "/"}, res("a b"), session_id="sess-b", session_key="k1", run_id="r2")
    mv.compaction()
    mv.result("c1", res("3 hits"), session_key=None)
    add("result-finds-its-call-after-the-session-moved-on",
        "§9 and §8.1: call c1 is deferred under key k1 (session sess-a); a call with key k1 and session sess-b "
        "makes that state remember sess-b; c1's result (no key, sess-a) looks up a new state, yet it is c1's "
        "result: grep, run r1, observed by r1's armed guard", {}, mv)
    ig = Events()
    ig.call("grep", grep, res("1"), times=3, session_key="k1").call("grep", grep, outcome_follows=True, session_key="k1")
    ig.result("c4", res("1"), session_key="k9", tool_name="grep", args=grep)
    ig.call("grep", grep, res("1"), session_id="sess-b", session_key="k1")
    add("ignored-result-still-looks-up-its-session",
        "§8.1 and §9: the result of blocked call c4 is ignored, but its lookup (key k9, session sess-a) moves the "
        "state away from k1; the next call (key k1, session sess-b) finds no state and starts from nothing",
        on(warningThreshold=2, criticalThreshold=3), ig)
    # §7 guard
    add("guard-differing-observation-saves-the-window",
        "§7: one differing outcome in the window of 3 prevents the abort; repeats after the window closes are "
        "not watched", {},
        Events().compaction().call("grep", grep, res("1"), times=2).call("grep", grep, res("2"))
        .call("grep", grep, res("1"), times=3))
    add("guard-rearm-restarts-the-window",
        "§7: a second compaction while armed restarts the window of 3", {},
        Events().compaction().call("grep", grep, res("1"), times=2).compaction().call("grep", grep, res("1"), times=3))
    gi = Events(run=" ")
    gi.compaction(session_key="k-guard").call("grep", grep, res("1"), times=3, session_key="k-guard")
    add("guard-of-blank-run-is-the-session-keys",
        "§7: a blank run id uses the session key as the guard's identity; the compaction and calls share it", {}, gi)
    gp = Events(run="r1")
    gp.compaction()
    gp.run = "r1 "
    gp.call("grep", grep, res("1"), times=3)
    add("guard-padded-run-id-is-another-guard",
        "§7: \"r1\" and \"r1 \" are two guards: the compaction of r1 does not arm r1 \"'s, so no abort", {}, gp)
    gw = Events()
    gw.compaction().call("grep", grep, outcome_follows=True).call("grep", grep, None).call("grep", grep, res("1"), times=2)
    gw.result("c1", res("1"))
    add("guard-counts-recorded-outcomes-only",
        "§7: a deferred call and a call that returns nothing do not use the window; the deferred result does", {},
        gw)
    add("guard-abort-marks-later-events-of-the-run",
        "§7: after the abort every later event of that run reports run_aborted; another run does not",
        on(), Events().compaction().call("grep", grep, res("1"), times=4).call("ls", {"dir": "/"}, res("x"),
                                                                                 run_id="other"))
    # §4.3 rule 7: a channel plugin's send tool (the oracle has no channel plugins)
    cs = Events()
    for n in range(4):
        cs.call("slack", {"action": "sendMessage", "to": "#ops", "text": "down"},
                res(f"sent {n}", ok=True, ts=f"17.{n}", channel="C9"))
    add("channel-plugin-send-ids-stripped",
        "§4.3 rule 7: options.channelSendTools names slack as a channel plugin's tool; sendMessage with a to is a "
        "send, so ts is dropped and critical 3 blocks the 4th. expected: by hand from the spec (OpenClaw's "
        "channel plugins are not in the oracle), cross-checked with loopwatch",
        {**on(warningThreshold=2, criticalThreshold=3), "options": {"channelSendTools": ["slack"]}}, cs,
        oracle=False)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--openclaw", default=os.environ.get("LOOPWATCH_OPENCLAW_DIR"))
    parser.add_argument("--node", default=None)
    parser.add_argument("--out", type=Path, default=OUT)
    options = parser.parse_args()
    if not options.openclaw:
        parser.error("--openclaw: an OpenClaw 2026.7.x package directory (or LOOPWATCH_OPENCLAW_DIR)")
    with Oracle(options.openclaw, options.node) as oracle:
        return write_expected(scenarios(), lambda scenario: oracle.expected(scenario)
                              if FROM_OPENCLAW in scenario["description"] else _loopwatch_expected(scenario), options.out)


def write_expected(made: list[dict[str, Any]], expect: Any, out: Path, kept: list[str] | None = None) -> int:
    """Writes ``kept`` (scenario lines as they are) and the scenarios ``made``, each with ``expected`` =
    ``expect(scenario)``, to ``out``; says on stderr where loopwatch differs. Exit status 1 when it does."""
    lines, differing = list(kept or []), 0
    for scenario in made:
        scenario["expected"] = expect(scenario)
        mismatch: Mismatch | None = run_scenario(scenario)
        if mismatch is not None:
            differing += 1
            print(f"loopwatch differs: {mismatch}", file=sys.stderr)
        lines.append(json.dumps(scenario))  # ASCII: U+0085 and U+2028 would split lines for some readers
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} scenarios ({len(made)} written here), {sum(len(json.loads(x)['events']) for x in lines)} "
          f"events -> {out}; loopwatch differs on {differing}")
    return 1 if differing else 0


def _loopwatch_expected(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """loopwatch's verdicts in the scenarios' fields, for a scenario checked by hand."""
    from streams.detection import Engine, SessionStore
    from streams.offline.conformance import scenario_config, spec_view
    store = SessionStore(Engine(scenario_config(scenario)))
    return [{"event": index, **spec_view(store.process(event))} for index, event in enumerate(scenario["events"])]


if __name__ == "__main__":
    sys.exit(main())
