"""Every kind of decision through the full chain: the worker on the real broker, then `loopwatch tail` (verdicts,
loop events, fleet events), `loopwatch report` over the tailed verdicts, the worker's metrics, and the fleet
breaker listed and cleared by hand (`loopwatch fleet list|clear`, audited on the loop-events topic).

One config turns on what decides: OpenClaw's detectors (low thresholds), the post-compaction guard, a ``perTool``
rule (and one in shadow mode), the escalation and run-budget policies and the fleet breaker. Each run of the
scenario makes one kind decide; the worker's verdicts must equal ``loopwatch replay``'s (the fleet part aside,
which depends on when the worker learns of the loop), and every consumer must say what decided from the
verdict's ``decided_by``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import generate_latest

from streams.commands import loopwatch
from streams.commands.tail import finding_text
from streams.detection import Engine, OpenClawConfig
from streams.detection.decision import findings
from streams.offline.replay import Replayer
from streams.wire.codecs import decode_event
from streams.worker import metrics
from tests.worker_harness import consume_all, create_topics, encode, produce, running_worker, worker_settings

pytestmark = [pytest.mark.kafka]

CONFIG = {
    "tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}},
    "policies": {"perTool": [{"tool": "exec", "criticalThreshold": 4, "warningThreshold": 2},
                             {"tool": "grep", "criticalThreshold": 4, "warningThreshold": 2, "shadow": True}],
                 "escalation": {"consecutiveBlocks": 3},
                 "runBudget": {"noProgressOutcomes": 3, "action": "block"}},
    "options": {"fleet": {"minRuns": 3, "breaker": "block"}},
}


def call(run: str, i: int, tool: str, args: dict, ts: int, result: Any = "same", error: Any = None) -> dict:
    return {"type": "tool_call", "run_id": run, "session_id": f"s-{run}", "tool_call_id": f"{run}-{i}",
            "tool_name": tool, "args": args, "result": result, "error": error, "ts": ts, "event_id": f"{run}-{i}"}


def scenario(t0: int) -> list[dict]:
    events = [call("run-loop", i, "read", {"path": "/a"}, t0 + i) for i in range(9)]  # budget, block, escalation, end
    events.append({"type": "compaction_retry", "run_id": "run-guard", "session_id": "s-run-guard",
                   "event_id": "run-guard-c", "ts": t0})
    events += [call("run-guard", i, "list", {"dir": "/"}, t0 + i) for i in range(3)]  # the guard aborts
    events += [call("run-exec", i, "exec", {"cmd": "make"}, t0 + i) for i in range(5)]  # perTool decides
    events += [call("run-grep", i, "grep", {"q": "x"}, t0 + i) for i in range(5)]  # perTool in shadow mode
    events += [call(f"run-f{n}", 0, "web_fetch", {"url": "https://api/x"}, t0 + 1000 + n, None, "HTTP 503")
               for n in range(3)]  # a fleet loop
    return events


async def fleet_topics(bootstrap: str, settings) -> None:
    await create_topics(bootstrap, [f"{settings.app_id}-fleet-signals", settings.fleet_events_topic],
                        settings.partitions)


def cli(*args: str) -> Any:
    return CliRunner().invoke(loopwatch, list(args), catch_exceptions=False)


@pytest.mark.timeout(240)
def test_every_decision_kind_through_worker_tail_report_metrics_and_fleet_commands(kafka_bootstrap, tmp_path):
    settings = worker_settings(kafka_bootstrap, tmp_path)
    config_file = tmp_path / "openclaw.json"
    config_file.write_text(json.dumps(CONFIG))
    t0 = int(time.time() * 1000)
    events = scenario(t0)
    blocked_late = call("run-f9", 0, "web_fetch", {"url": "https://api/x"}, t0 + 2000, None, "HTTP 503")
    after_clear = call("run-f10", 0, "web_fetch", {"url": "https://api/x"}, t0 + 3000, None, "HTTP 503")
    topic = settings.input_topics[0]
    out: dict[str, Any] = {}

    async def main_() -> None:
        await fleet_topics(kafka_bootstrap, settings)
        async with running_worker(settings, Engine(OpenClawConfig(CONFIG))) as worker:
            await asyncio.wait_for(worker.fleet.feed_ready.wait(), 60)
            await produce(kafka_bootstrap, topic, [(e["run_id"].encode(), encode(e)) for e in events])
            deadline = time.monotonic() + 60
            while not len(worker.fleet.breaker) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert len(worker.fleet.breaker) == 1
            await produce(kafka_bootstrap, topic, [(b"run-f9", encode(blocked_late))])
            await consume_all(kafka_bootstrap, settings.verdicts_topic, len(events) + 1, 60)
            # the operator lists the breaker and clears it; every worker forgets it
            listed = await asyncio.to_thread(cli, "fleet", "list", "--bootstrap", kafka_bootstrap, "--topic",
                                             settings.fleet_events_topic, "--config", str(config_file))
            out["list"] = listed
            assert listed.stdout, listed.output
            signature = listed.stdout.split()[0]
            out["missing"] = await asyncio.to_thread(cli, "fleet", "clear", "error:nothing:0", "--bootstrap",
                                                     kafka_bootstrap, "--topic", settings.fleet_events_topic)
            out["clear"] = await asyncio.to_thread(
                cli, "fleet", "clear", signature, "--reason", "the API is back", "--bootstrap", kafka_bootstrap,
                "--topic", settings.fleet_events_topic, "--loop-events-topic", settings.loop_events_topic)
            deadline = time.monotonic() + 60
            while len(worker.fleet.breaker) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            out["breakers_after_clear"] = len(worker.fleet.breaker)
            await produce(kafka_bootstrap, topic, [(b"run-f10", encode(after_clear))])
            out["verdicts"] = [decode_event(r.value) for r in
                               await consume_all(kafka_bootstrap, settings.verdicts_topic, len(events) + 2, 60)]
            out["scrape"] = generate_latest(metrics.REGISTRY).decode()

    asyncio.run(main_())
    verdicts = {v["event_id"]: v for v in out["verdicts"]}
    assert len(verdicts) == len(events) + 2

    # the worker decides as replay does; what decided is one field
    replay = Replayer(Engine(OpenClawConfig(CONFIG)), key_by="run")
    expected = {e["event_id"]: replay.apply(e) for e in events}
    for event_id, want in expected.items():
        assert verdicts[event_id]["verdict"] == want["verdict"], event_id
        assert verdicts[event_id]["decided_by"] == want["decided_by"], event_id
    kinds = {(f["kind"], f["action"], f["enforced"]) for v in verdicts.values() for f in findings(v)}
    assert {("detection", "block", True), ("detection", "suppressed", True), ("guard", "abort", True),
            ("policy", "block", True), ("policy", "would_block", False), ("escalation", "abort", True),
            ("budget", "block", True), ("run_end", "abort", True), ("fleet", "block", True)} <= kinds
    fleet_block = verdicts["run-f9-0"]
    assert fleet_block["verdict"] == "block" and fleet_block["decided_by"]["kind"] == "fleet"
    assert fleet_block["fleet"]["reason"].startswith("Fleet-wide loop: web_fetch threw the same error in 3 runs")
    assert verdicts["run-f10-0"]["verdict"] == "allow"  # the breaker was cleared by hand
    assert (verdicts["run-f10-0"]["decided_by"] or {}).get("kind") != "fleet"

    # fleet list / clear
    assert out["list"].exit_code == 0 and "web_fetch  runs 3" in out["list"].stdout
    assert "Fleet-wide loop" in out["list"].stdout
    assert out["missing"].exit_code == 1 and "no active fleet breaker" in out["missing"].stderr
    assert out["clear"].exit_code == 0 and out["clear"].stdout.startswith("cleared error:web_fetch:")
    assert out["breakers_after_clear"] == 0

    # tail, every output topic: one line per record saying what decided
    def tail(stream: str, topic_name: str, count: int) -> list[str]:
        result = cli("tail", stream, "--topic", topic_name, "--bootstrap", kafka_bootstrap, "--from-beginning",
                     "--idle-timeout", "3", "--max", str(count))
        assert result.exit_code == 0, result.output
        return result.stdout.splitlines()

    lines = tail("verdicts", settings.verdicts_topic, len(events) + 2)
    by_run = {}
    for line in lines:
        by_run.setdefault(line.split()[1], []).append(line)
    assert any(line.endswith("ABORT  escalation critical x3 (escalation)") for line in by_run["run-loop"])
    assert any(line.endswith("ABORT  run ended (escalation)") for line in by_run["run-loop"])
    assert any("BLOCK  run_budget critical x3 (budget: runBudget)" in line for line in by_run["run-loop"])
    assert by_run["run-guard"][-1].endswith("ABORT  compaction_loop_persisted critical x3")
    assert by_run["run-exec"][-1].endswith("BLOCK  generic_repeat critical x4 (policy: perTool[0] tool=exec)")
    assert any("would block: generic_repeat critical x4 (policy: perTool[1] tool=grep, shadow)" in line
               for line in by_run["run-grep"])
    assert by_run["run-f9"][0].endswith(f"BLOCK  fleet_loop critical x3 (fleet: {fleet_block['fleet']['signature']})")
    assert "None" not in "\n".join(lines) and "?" not in "\n".join(lines)
    every_finding = [f for v in out["verdicts"] for f in findings(v)]
    loop_lines = tail("loop-events", settings.loop_events_topic, len(every_finding) + 1)
    assert len(loop_lines) == len(every_finding) + 1  # one per finding, and the audit record of the clear
    assert sorted(line.split()[3] for line in loop_lines[:-1] if "CLEARED" not in line) == \
        sorted(f["action"].upper() for f in every_finding)
    cleared = [line for line in loop_lines if " CLEARED " in line]
    assert len(cleared) == 1 and "cleared by " in cleared[0] and cleared[0].endswith(": the API is back")
    fleet_lines = tail("fleet-events", settings.fleet_events_topic, 10)
    assert any(" FLEET LOOP  error:web_fetch:" in line and "runs 3" in line for line in fleet_lines)
    assert any(" BLOCK " in line and "run-f9" in line for line in fleet_lines)
    assert any(" CLEARED " in line and "the API is back" in line for line in fleet_lines)
    for v in out["verdicts"]:  # the verdict line is the finding's own text
        if v.get("decided_by"):
            assert finding_text(v["decided_by"]) in "\n".join(lines)

    # report over the tailed verdicts: every kind in the detector table, shadow in its own column
    tailed = tmp_path / "verdicts.jsonl"
    result = cli("tail", "verdicts", "--topic", settings.verdicts_topic, "--bootstrap", kafka_bootstrap,
                 "--from-beginning", "--idle-timeout", "3", "--max", str(len(events) + 2), "--json")
    tailed.write_text(result.stdout)
    report = cli("report", str(tailed))
    assert report.exit_code == 0, report.output
    rows = {tuple(cells[:2]): cells[2:] for cells in map(str.split, report.stdout.splitlines())
            if len(cells) == 8 and all(cell.isdigit() for cell in cells[2:])}  # the detector table
    # columns: warned, suppressed, blocked, aborted, shadow, total
    assert rows[("escalation", "critical")][3] == "1"
    assert rows[("compaction_loop_persisted", "critical")][3] == "1"
    assert rows[("fleet_loop", "critical")][2] == "1"
    assert int(rows[("run_budget", "critical")][2]) >= 1
    assert int(rows[("generic_repeat", "critical")][4]) >= 1  # perTool:grep in shadow mode

    # metrics: by kind, shadow apart
    scrape = out["scrape"]
    for kind, action, enforced in (("escalation", "abort", "true"), ("guard", "abort", "true"),
                                   ("fleet", "block", "true"), ("policy", "would_block", "false"),
                                   ("budget", "block", "true"), ("run_end", "abort", "true")):
        assert any(line.startswith("loopwatch_detections_total{") and f'kind="{kind}"' in line
                   and f'action="{action}"' in line and f'enforced="{enforced}"' in line
                   and float(line.rsplit(" ", 1)[1]) >= 1 for line in scrape.splitlines()), (kind, action)
