"""replay and report say which loop-detection settings they run with, as the worker does; a config file
that holds nothing loop detection reads (a top-level typo) is a warning naming its keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from streams.commands import loopwatch
from streams.commands.config_line import unread_warning
from streams.detection import Engine
from streams.detection.config import OpenClawConfig

EVENTS = str(Path(__file__).resolve().parents[2] / "examples" / "events.jsonl")
DEFAULTS_LINE = ("no --config: loopDetection enabled=unset (rolling detectors off, guard on), historySize=30, "
                 "warningThreshold=10, criticalThreshold=20, unknownToolThreshold=10, "
                 "globalCircuitBreakerThreshold=30, postCompactionGuard.windowSize=3")


@pytest.mark.parametrize("command", [["replay"], ["report", "--format", "events"]])
def test_without_config_the_defaults_are_said_on_stderr(command):
    result = CliRunner().invoke(loopwatch, [*command, EVENTS])
    assert result.exit_code == 0, result.output
    assert f"loopwatch {command[0]}: {DEFAULTS_LINE}" in result.stderr.splitlines()


@pytest.mark.parametrize("command", [["replay"], ["report", "--format", "events"]])
def test_a_top_level_typo_is_a_warning_naming_the_key(command, tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text("{tool: {loopDetection: {enabled: true}}, models: {}}", encoding="utf-8")
    result = CliRunner().invoke(loopwatch, [*command, "--config", str(config), EVENTS])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert f"loopwatch {command[0]}: config {config}: loopDetection enabled=unset" in "\n".join(lines)
    assert (f"loopwatch {command[0]}: warning: {config} holds nothing loop detection reads (no tools.loopDetection "
            "block, no agent with its own; its top-level keys not read: tool, models): OpenClaw's defaults apply, "
            "rolling detectors off") in lines


def test_report_with_compare_says_both_settings(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("{tools: {loopDetection: {enabled: true, warningThreshold: 3}}}", encoding="utf-8")
    b.write_text("{tools: {loopDetection: {enabled: true, warningThreshold: 5, criticalThreshold: 8}}}",
                 encoding="utf-8")
    result = CliRunner().invoke(loopwatch, ["report", "--format", "events", "--config", str(a), "--compare", str(b),
                                       EVENTS])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "loopDetection" in line]
    assert lines == [
        f"loopwatch report: config {a}: loopDetection enabled=true, historySize=30, warningThreshold=3, "
        "criticalThreshold=20, unknownToolThreshold=10, globalCircuitBreakerThreshold=30, "
        "postCompactionGuard.windowSize=3",
        f"loopwatch report: config {b}: loopDetection enabled=true, historySize=30, warningThreshold=5, "
        "criticalThreshold=8, unknownToolThreshold=10, globalCircuitBreakerThreshold=30, "
        "postCompactionGuard.windowSize=3"]


def test_replay_quiet_keeps_the_warning_only(tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text("{}", encoding="utf-8")
    result = CliRunner().invoke(loopwatch, ["replay", "-q", "--config", str(config), EVENTS])
    assert result.stderr.splitlines() == [
        f"loopwatch replay: warning: {config} holds nothing loop detection reads (no tools.loopDetection block, "
        "no agent with its own; it is empty): OpenClaw's defaults apply, rolling detectors off"]


@pytest.mark.parametrize("raw", [
    {"tools": {"loopDetection": {}}},  # present, if empty: OpenClaw's defaults on purpose
    {"agents": {"list": [{"id": "ops", "tools": {"loopDetection": {"enabled": True}}}]}},
    {"options": {"channelSendTools": ["send"]}},
], ids=["global-block", "agent-block", "channel-send-tools"])
def test_a_file_with_something_read_gets_no_warning(raw):
    assert unread_warning("f.json", Engine(OpenClawConfig(raw))) is None


def test_a_real_config_without_loop_detection_names_at_most_ten_keys():
    raw = {f"k{i}": {} for i in range(12)} | {"tools": {"exec": {}}}
    warning = unread_warning("f.json", Engine(OpenClawConfig(raw)))
    assert "its top-level keys not read: k0, k1, k2, k3, k4, k5, k6, k7, k8, k9 and 2 more; tools holds exec " \
           "but no loopDetection)" in warning
    assert unread_warning(None, Engine(OpenClawConfig({}))) is None  # no --config: the settings line says so


def test_the_fleet_view_is_named_when_the_file_configures_it(tmp_path):
    from streams.commands.config_line import describe_config, unread_warning
    from streams.detection import Engine, load_config

    path = tmp_path / "fleet.json"
    path.write_text('{options: {fleet: {minRuns: 3, breaker: "shadow"}}}')
    engine = Engine(load_config(path))
    line = describe_config(path, engine)
    assert line.endswith("; fleet view: minRuns=3 in 600 s windows every 60 s, signature=call, count=failing, "
                         "breaker=shadow")
    assert unread_warning(path, engine) is None  # options.fleet is read


@pytest.mark.parametrize("raw, found", [
    ({"tools": {"loopDetecton": {"enabled": True}}}, "tools.loopDetecton is not tools.loopDetection"),
    ({"tools": {"exec": {}, "web": {}}}, "tools holds exec, web but no loopDetection"),
    ({"agents": {}}, "nothing in it is read"),
], ids=["typo-under-tools", "tools-without-block", "read-but-nothing-there"])
def test_the_warning_names_what_is_wrong_one_level_down(raw, found):
    warning = unread_warning("f.json", Engine(OpenClawConfig(raw)))
    assert warning == ("warning: f.json holds nothing loop detection reads (no tools.loopDetection block, no agent "
                       f"with its own; {found}): OpenClaw's defaults apply, rolling detectors off")
