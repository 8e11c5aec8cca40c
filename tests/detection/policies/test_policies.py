"""loopwatch's opt-in policies, each on the user problem it answers (examples/policies/*.jsonl).

Every scenario is replayed twice: under OpenClaw's rules alone (the problem shows) and with one
policy on (the policy's verdict). Event files are hand-written from the public reports' descriptions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from streams.detection import Engine, OpenClawConfig, SessionState
from streams.detection.config import ConfigError, validate
from streams.detection.decision import findings
from streams.detection.policies.config import NORMALIZE_PRESETS
from streams.offline.replay import Replayer
from streams.wire.codecs import read_event_file

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "policies"
ENABLED = {"tools": {"loopDetection": {"enabled": True}}}


def replay(name: str, policies: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    raw = {**ENABLED, **({"policies": policies} if policies is not None else {})}
    validate(raw)
    replayer = Replayer(Engine(OpenClawConfig(raw)), key_by="session")
    return [replayer.apply(r.event, r.event["event_id"]) for r in read_event_file(EXAMPLES / name)]


def verdicts(records: list[dict[str, Any]]) -> list[str]:
    return [r["verdict"] for r in records]


def test_escalation_turns_a_block_that_never_ends_into_an_abort():
    """openclaw#109435: the block is sticky, the streak frozen, the run goes on blocked forever."""
    plain = replay("blocked-forever.jsonl")
    assert verdicts(plain)[20:] == ["block"] * 10  # 21st call onwards: blocked, forever
    escalated = replay("blocked-forever.jsonl", {"escalation": {"consecutiveBlocks": 3}})
    assert verdicts(escalated)[20:] == ["block", "block"] + ["abort"] * 8
    third = escalated[22]
    assert third["policy"]["name"] == "escalation" and third["policy"]["detector"] == "escalation"
    assert third["policy"]["count"] == 3
    assert third["policy"]["message"].startswith("CRITICAL: 3 consecutive tool calls in this run were blocked")
    # OpenClaw's own fields stay OpenClaw's
    assert (third["decision"], third["blocked"], third["detection"]["detector"]) == ("block", True, "generic_repeat")
    assert {k: v for k, v in third.items() if k not in ("policy", "verdict", "decided_by")} == \
        {k: v for k, v in plain[22].items() if k not in ("verdict", "decided_by")}
    # what decided: the escalation, over OpenClaw's block (kept among the others)
    assert {k: third["decided_by"][k] for k in ("kind", "action", "detector", "count", "rule", "enforced")} == {
        "kind": "escalation", "action": "abort", "detector": "escalation", "count": 3, "rule": "escalation",
        "enforced": True}
    assert [(f["kind"], f["action"], f["detector"]) for f in third["decided_by"]["others"]] == [
        ("detection", "block", "generic_repeat")]
    assert plain[22]["decided_by"]["kind"] == "detection" and plain[22]["decided_by"]["action"] == "block"


def test_run_budget_counts_across_tools():
    """openclaw#79252: each tool is blocked once, then the model switches tool and every count restarts."""
    plain = replay("tool-switching.jsonl")
    assert verdicts(plain).count("block") == 5 and "abort" not in verdicts(plain)
    budget = replay("tool-switching.jsonl", {"runBudget": {"blockedCalls": 3, "action": "block"}})
    # OpenClaw blocks calls 20 (web_fetch), 41 (exec) and 62 (browser): three distinct blocked combinations
    first_policy = next(i for i, r in enumerate(budget) if "policy" in r)
    assert first_policy == 63  # the first call after the budget is spent, whichever tool
    assert all(r["verdict"] == "block" for r in budget[63:])
    assert budget[63]["tool_name"] == "web_search" and budget[63]["decision"] == "allow"
    assert budget[63]["policy"]["detector"] == "run_budget"
    assert "3 distinct tool calls blocked (limit 3)" in budget[63]["policy"]["message"]
    aborted = replay("tool-switching.jsonl", {"runBudget": {"noProgressOutcomes": 25}})
    first_abort = verdicts(aborted).index("abort")
    # web_fetch: 20 outcomes, 19 of them the same as the one before; exec from call 21: the 25th at call 27
    assert first_abort == 27 and aborted[first_abort]["tool_name"] == "exec"
    assert "25 outcomes without progress (limit 25)" in aborted[first_abort]["policy"]["message"]


@pytest.mark.parametrize("name, preset", [("nonce-wrapper.jsonl", "nonce"), ("nonce-wrapper-digits.jsonl", "nonce"),
                                          ("timestamped-failure.jsonl", "timestamp")])
def test_normalised_results_make_identical_failures_identical(name, preset):
    """openclaw#130210 (a nonce in the wrapper) and #93917 (a timestamp in the failure): nothing ever blocks."""
    plain = replay(name)
    assert "block" not in verdicts(plain)
    assert len({r["outcome"]["result_hash"] for r in plain}) == 25  # every outcome looks new
    masked = replay(name, {"normalizeResults": {"patterns": [preset, "duration"]}})
    assert verdicts(masked)[20:] == ["block"] * 5  # OpenClaw's own generic_repeat, now that outcomes repeat
    assert masked[20]["detection"]["detector"] == "generic_repeat" and "policy" not in masked[20]


def _nonce(text: str) -> str:
    pattern, replacement = NORMALIZE_PRESETS["nonce"]
    return re.sub(pattern, replacement, text)


@pytest.mark.parametrize("token", [
    "0000000000019919",  # a 16-character hex id that happens to be all digits (zero-padded counter)
    "4753802658358440",  # ... or random
    "000000000000000000000000000a1b2c",  # letters and digits: the mixed form
    "00000000000000000000000000019919",  # 32 characters (a trace id)
    "000000000000000000019919",  # 24 (an object id)
])
def test_nonce_preset_masks_hex_ids_of_digits_only(token):
    assert _nonce(f'wrapper id="{token}" end') == 'wrapper id="<nonce>" end'
    assert _nonce(f"{token}\n{token}") == "<nonce>\n<nonce>"


@pytest.mark.parametrize("text", [
    "exit code 0", "exit code 137", "wrote 1048576 bytes", "42 items, 3 pages", "size 1099511627776 (1 TiB)",
    "epoch 1733212345 / 1733212345123 ms", "ts 1733212345123456789 ns", "pid 123456", "-1",
    "12345678901234567 (17 digits)", "123456789012345 (15 digits)",
])
def test_nonce_preset_leaves_ordinary_numbers(text):
    assert _nonce(text) == text


def test_nonce_preset_keeps_progress_in_counts_visible():
    """Outcomes that differ only in a count, a size or an exit code still hash differently."""
    raw = {**ENABLED, "policies": {"normalizeResults": {"patterns": ["nonce"]}}}
    engine, state = Engine(OpenClawConfig(raw)), SessionState()
    hashes = [engine.process({"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": f"c{i}",
                              "tool_name": "exec", "args": {"command": "make"},
                              "result": {"content": [{"type": "text", "text": text}], "details": {}}},
                             state)["outcome"]["result_hash"]
              for i, text in enumerate(["built 1048575 bytes, exit 0", "built 1048576 bytes, exit 0",
                                        "built 1048576 bytes, exit 2", "built 1048576 bytes, exit 2"])]
    assert len(set(hashes[:3])) == 3 and hashes[2] == hashes[3]


def test_per_tool_threshold_lets_a_slow_poll_finish():
    """LobsterAI#2454: a slow job's poll is blocked at 21, one call before the job finishes at 23."""
    plain = replay("slow-poll.jsonl")
    assert verdicts(plain)[21:] == ["block"] * 3
    ruled = replay("slow-poll.jsonl", {"perTool": [{"tool": "process", "criticalThreshold": 40,
                                                    "globalCircuitBreakerThreshold": 60}]})
    assert "block" not in verdicts(ruled)
    assert ruled[21]["policy"]["name"] == "perTool[0] tool=process"
    assert ruled[21]["policy"]["verdict"] == "warn"  # the rule's own detection: still a warning
    assert ruled[23]["outcome"]["recorded"]  # the finishing poll ran


def test_per_tool_exemption_and_mcp_server():
    events = [{"type": "tool_call", "run_id": "r", "session_id": "s", "tool_call_id": f"c{i}",
               "tool_name": "mcp__github__search_issues", "args": {"q": "loop"}, "result": "same"} for i in range(12)]
    raw = {**ENABLED, "policies": {"perTool": [{"mcpServer": "github", "warningThreshold": 2, "criticalThreshold": 4}]}}
    engine, state = Engine(OpenClawConfig(raw)), SessionState()
    got = [engine.process(e, state)["verdict"] for e in events]
    assert got[:4] == ["allow"] * 4 and got[4:] == ["block"] * 8  # 4 identical outcomes reach criticalThreshold
    exempt = {**ENABLED, "policies": {"perTool": [{"tool": "mcp__*", "detectors": {"genericRepeat": False}}]}}
    engine, state = Engine(OpenClawConfig(exempt)), SessionState()
    records = [engine.process(e, state) for e in events]
    assert [r["detection"] for r in records] == [{"stuck": False}] * 12
    # OpenClaw alone warns at the 11th call (10 identical before it); the rule exempted it and says so
    plain_engine, plain_state = Engine(OpenClawConfig(ENABLED)), SessionState()
    plain = [plain_engine.process(e, plain_state) for e in events]
    assert plain[10]["detection"]["detector"] == "generic_repeat" and plain[10]["verdict"] == "warn"
    assert records[10]["verdict"] == "allow"
    assert records[10]["policy"] == {"name": "perTool[0] tool=mcp__*", "detector": None, "level": None,
                                     "verdict": "allow", "count": None, "message": None,
                                     "exempted": {"detector": "generic_repeat", "level": "warning", "count": 10}}
    # what decided: the rule, named, with what it let through
    assert records[10]["decided_by"] == {
        "kind": "policy", "action": "allow", "detector": "generic_repeat", "level": "warning", "count": 10,
        "message": "perTool[0] tool=mcp__*: allowed a call OpenClaw's own thresholds would have warned "
                   "(generic_repeat warning, count 10)", "rule": "perTool[0] tool=mcp__*", "enforced": True}
    assert [r["decided_by"] for r in records[:10]] == [None] * 10


def test_shadow_reports_what_would_have_happened_and_decides_nothing():
    plain = replay("blocked-forever.jsonl")
    shadow = replay("blocked-forever.jsonl", {"shadow": True, "escalation": {"consecutiveBlocks": 3}})
    assert verdicts(shadow) == verdicts(plain)
    assert [r.get("shadow", [{}])[0].get("verdict") for r in shadow[22:]] == ["abort"] * 8
    assert [f for f in findings(shadow[22]) if not f["enforced"]] == [{
        "kind": "escalation", "action": "would_abort", "detector": "escalation", "level": "critical", "count": 3,
        "message": shadow[22]["shadow"][0]["message"], "rule": "escalation", "enforced": False}]
    assert shadow[22]["decided_by"]["kind"] == "detection"  # what decided: OpenClaw's block
    one = replay("slow-poll.jsonl", {"perTool": [{"tool": "process", "criticalThreshold": 40, "shadow": True}]})
    assert verdicts(one) == verdicts(replay("slow-poll.jsonl"))
    assert one[21]["shadow"][0]["verdict"] == "warn" and one[21]["verdict"] == "block"


def test_run_state_with_policy_memory_survives_the_changelog():
    raw = {**ENABLED, "policies": {"escalation": {"consecutiveBlocks": 3}, "runBudget": {"noProgressOutcomes": 50}}}
    engine, state = Engine(OpenClawConfig(raw)), SessionState()
    for record in read_event_file(EXAMPLES / "blocked-forever.jsonl"):
        engine.process(record.event, state)
    assert state.policy_runs["run-stuck"][0] == 10  # consecutive blocks
    restored = SessionState.from_bytes(state.to_bytes())
    assert restored == state and restored.policy_runs == state.policy_runs


@pytest.mark.parametrize("policies, problem", [
    ({"escalation": {"consecutiveBlocks": 0}}, "policies.escalation.consecutiveBlocks: must be a positive integer"),
    ({"runBudget": {"action": "block"}}, "policies.runBudget: needs blockedCalls, noProgressOutcomes or both"),
    ({"perTool": [{"tool": "x", "mcpServer": "y", "warningThreshold": 1}]}, "needs exactly one of tool"),
    ({"perTool": [{"tool": "x", "warningThreshold": 5, "criticalThreshold": 5}]},
     "policies.perTool[0].criticalThreshold: warningThreshold must be lower than criticalThreshold"),
    ({"normalizeResults": {"patterns": ["ip"]}}, "unknown preset 'ip'"),
    ({"escalate": {}}, "policies.escalate: unknown key"),
], ids=["zero", "no-limit", "two-matchers", "inverted", "preset", "typo"])
def test_bad_policies_are_refused_with_the_path(policies, problem):
    with pytest.raises(ConfigError) as err:
        validate({**ENABLED, "policies": policies})
    assert problem in str(err.value)


def test_report_compare_backtests_a_policy_against_plain_openclaw(tmp_path):
    """`loopwatch report --compare`: each event whose verdict the policy changes, with the rule that decided."""
    from click.testing import CliRunner

    from streams.commands.report import report

    plain, policy = tmp_path / "plain.json", tmp_path / "escalation.json"
    plain.write_text('{"tools": {"loopDetection": {"enabled": true}}}')
    policy.write_text('{"tools": {"loopDetection": {"enabled": true}}, '
                      '"policies": {"escalation": {"consecutiveBlocks": 3}}}')
    res = CliRunner().invoke(report, ["--format", "events", "--config", str(plain), "--compare", str(policy),
                                      str(EXAMPLES / "blocked-forever.jsonl")])
    assert res.exit_code == 0, res.output
    assert "events whose verdict differs: 8" in res.stdout
    assert "      A: block generic_repeat/critical 20\n" \
           "      B: abort escalation/critical 3 (escalation)" in res.stdout
    assert "escalation" in res.stdout.split("detections (detector / level / action)")[1]
