"""The shipped Prometheus alert rules (deploy/prometheus/alerts.yml), against the metrics loopwatch really exports.

* every metric a rule names is exported by the worker (streams.worker.metrics) or the gateway
  (streams.runners.gateway.metrics), and the counters a rule takes the increase of are in a scrape
  from the start (at 0), so the first dead letter or timeout fires the alert, not the second;
* with Prometheus's ``promtool`` (Debian package ``prometheus``; skipped without it): the file is
  valid (``promtool check rules``), and the rules are evaluated (``promtool test rules``) on series
  made of two real scrapes of the worker's and the gateway's registries: one before and one after
  the worker's per-event code (:class:`~streams.worker.processor.Processor`) applied dead letters,
  guard aborts and calls of ended runs, the consumer-lag gauge and the verdict-latency histogram
  were set as the worker sets them, and the gateway counted timeouts and refusals. Every alert
  fires on the second scrape, and none on the first.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra: pip install -e '.[test]'")

from prometheus_client import generate_latest  # noqa: E402

from streams.detection import Engine, OpenClawConfig, SessionState  # noqa: E402
from streams.runners.gateway.metrics import GatewayMetrics  # noqa: E402
from streams.worker import metrics  # noqa: E402
from streams.worker.processor import Processor  # noqa: E402
from streams.worker.records import Source  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
METRIC = re.compile(r"\bloopwatch_[a-z_]+\b")
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")
ENDPOINTS = ["/v1/events", "/v1/hooks/claude-code", "/v1/hooks/codex"]


def _rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def _samples(text: str) -> dict[str, float]:
    """``{'name{labels}': value}`` of an exposition text (comments and ``_created`` series left out)."""
    out = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not match.group(1).endswith("_created"):
            out[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return out


def _gateway() -> GatewayMetrics:
    gateway = GatewayMetrics()
    gateway.initialise(ENDPOINTS)
    return gateway


def test_every_rule_names_metrics_loopwatch_exports_present_from_the_start():
    rules = _rules()
    assert {rule["alert"] for rule in rules} >= {
        "LoopwatchRunKeepsCallingAfterItEnded", "LoopwatchAbortStorm", "LoopwatchDeadLetters", "LoopwatchConsumerLag",
        "LoopwatchVerdictLatencyHigh", "LoopwatchWorkerDown", "LoopwatchGatewayTimeouts", "LoopwatchGatewayRefusals"}
    worker_names = {name.split("{")[0] for name in _samples(generate_latest(metrics.REGISTRY).decode())}
    gateway_names = {name.split("{")[0] for name in _samples(_gateway().render().decode())}
    for rule in rules:
        names = set(METRIC.findall(rule["expr"]))
        assert names or "up{" in rule["expr"], rule["alert"]
        assert names <= metrics.METRIC_NAMES | gateway_names, (rule["alert"], names)
        assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"]
        if "increase(" in rule["expr"]:  # a counter series must exist before its first increment
            assert names <= worker_names | gateway_names, (rule["alert"], names - worker_names - gateway_names)
    # present at 0 from the start: dead letters of each reason, gateway timeouts and refusals
    start = _samples(generate_latest(metrics.REGISTRY).decode())
    for reason in metrics.DEAD_LETTER_REASONS:
        assert f'loopwatch_dead_letters_total{{reason="{reason}"}}' in start
    gateway = _samples(_gateway().render().decode())
    assert gateway['loopwatch_gateway_timeouts_total{endpoint="/v1/events"}'] == 0.0
    assert gateway['loopwatch_gateway_requests_total{endpoint="/v1/hooks/codex",outcome="unauthorized"}'] == 0.0


# ------------------------------------------------------------------- promtool

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")


def _drive_the_worker() -> None:
    """What makes the worker alert, through its own per-event code and metric objects."""
    proc = Processor(Engine(OpenClawConfig({})))
    for n in range(12):  # 12 runs: a compaction, then the same call and result three times: the guard aborts
        run = f"run-{n}"
        state = SessionState()
        events = [{"type": "compaction_retry", "run_id": run, "session_id": run, "event_id": f"{run}-c"}]
        events += [{"type": "tool_call", "run_id": run, "session_id": run, "tool_call_id": f"{run}-{i}",
                    "tool_name": "read", "args": {"path": "/a"}, "result": "same", "event_id": f"{run}-{i}"}
                   for i in range(4)]  # the fourth call is refused: the run had ended
        for offset, event in enumerate(events):
            outcome = proc.apply(run.encode(), event, Source("events", 0, offset), state)
            assert outcome.kind == "applied", outcome
        assert outcome.record["decided_by"]["kind"] == "run_end"
    proc.dead_letter(b"\xc1", b"k", Source("events", 0, 99), "decode", "not msgpack")
    proc.flush_metrics()
    metrics.CONSUMER_LAG.labels("loopwatch.events", "0").set(5000)
    metrics.observe_many(metrics.VERDICT_LATENCY_SECONDS, [2.0] * 500)


def _series(before: dict[str, float], after: dict[str, float], job: str) -> list[dict]:
    """promtool input series: ``before`` for minutes 0-5, then ``after`` (counters rise to it evenly over
    minutes 5-10, then stay), to minute 20."""
    out = []
    for name, value in after.items():
        labels = name[name.index("{") + 1:-1] if "{" in name else ""
        series = name.split("{")[0] + "{" + ",".join(filter(None, [f'job="{job}"', labels])) + "}"
        first = before.get(name)
        head = "_x5" if first is None else f"{first:g}+0x5"
        if name.split("{")[0].endswith(("_total", "_bucket", "_count", "_sum")):
            start = first or 0.0
            tail = f"{start:g}+{(value - start) / 5:g}x5 {value:g}+0x9"  # rising from minute 5 to 10, then flat
        else:
            tail = f"{value:g}+0x15"
        out.append({"series": series, "values": f"{head} {tail}"})
    return out


@needs_promtool
def test_promtool_checks_the_rules_file():
    result = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in result.stdout


@needs_promtool
def test_every_alert_fires_on_what_the_worker_and_gateway_expose_and_none_before(tmp_path):
    worker_before = _samples(generate_latest(metrics.REGISTRY).decode())
    gateway = _gateway()
    gateway_before = _samples(gateway.render().decode())
    _drive_the_worker()
    for _ in range(3):
        gateway.timeouts.labels("/v1/events").inc()
        gateway.requests.labels("/v1/hooks/claude-code", "unauthorized").inc()
    series = (_series(worker_before, _samples(generate_latest(metrics.REGISTRY).decode()), "loopwatch")
              + _series(gateway_before, _samples(gateway.render().decode()), "loopwatch-gateway")
              + [{"series": 'up{job="loopwatch",instance="worker:9464"}', "values": "1x5 0x15"}])
    # the rules as shipped, their annotations aside (promtool compares rendered annotations too; their
    # templates are checked by `promtool check rules` above)
    groups = yaml.safe_load(RULES.read_text())["groups"]
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    rules = tmp_path / "alerts.yml"
    rules.write_text(yaml.safe_dump({"groups": groups}))
    expected = {
        "LoopwatchRunKeepsCallingAfterItEnded": {"severity": "warning", "job": "loopwatch"},
        "LoopwatchAbortStorm": {"severity": "warning", "job": "loopwatch"},
        "LoopwatchDeadLetters": {"severity": "warning", "job": "loopwatch", "reason": "decode"},
        "LoopwatchConsumerLag": {"severity": "warning", "job": "loopwatch", "topic": "loopwatch.events"},
        "LoopwatchVerdictLatencyHigh": {"severity": "warning", "job": "loopwatch"},
        "LoopwatchWorkerDown": {"severity": "critical", "job": "loopwatch", "instance": "worker:9464"},
        "LoopwatchGatewayTimeouts": {"severity": "warning", "job": "loopwatch-gateway"},
        "LoopwatchGatewayRefusals": {"severity": "warning", "job": "loopwatch-gateway"},
    }
    assert set(expected) == {rule["alert"] for rule in _rules()}
    tests = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [{"eval_time": "4m", "alertname": name, "exp_alerts": []} for name in expected]
        + [{"eval_time": "12m", "alertname": name, "exp_alerts": [{"exp_labels": labels}]}
           for name, labels in expected.items()],
    }]}
    spec = tmp_path / "alerts.test.yml"
    spec.write_text(yaml.safe_dump(tests))
    result = subprocess.run([PROMTOOL, "test", "rules", str(spec)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
