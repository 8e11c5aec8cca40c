"""Configuration: strict validation, runtime resolution, overlay, agent ids, JSON5 files (Spec §2)."""

import re

import pytest

from streams.detection import ConfigError, LoopDetectionSettings, OpenClawConfig, load_config, validate
from streams.detection.config import DEFAULTS, merge_blocks, normalize_agent_id, resolve

WARN_MSG = "tools.loopDetection.warningThreshold must be lower than criticalThreshold."
CRIT_MSG = "tools.loopDetection.criticalThreshold must be lower than globalCircuitBreakerThreshold."


def issues_of(raw: dict) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        validate(raw)
    return info.value.issues


def block(**keys) -> dict:
    return {"tools": {"loopDetection": keys}}


def agent(agent_id: str, **keys) -> dict:
    return {"id": agent_id, "tools": {"loopDetection": keys}}


# ------------------------------------------------------------------ §2.1 strict validation


@pytest.mark.parametrize("raw, path, message", [
    (block(enabld=True), "tools.loopDetection", "Unrecognized key(s) in object: 'enabld'"),
    (block(windowSize=3), "tools.loopDetection", "Unrecognized key(s) in object: 'windowSize'"),
    (block(detectors={"genericRepeat": True, "argumentChurn": False}), "tools.loopDetection.detectors",
     "Unrecognized key(s) in object: 'argumentChurn'"),
    (block(postCompactionGuard={"window": 3}), "tools.loopDetection.postCompactionGuard",
     "Unrecognized key(s) in object: 'window'"),
    ({"agents": {"list": [agent("a", foo=1, bar=2)]}}, "agents.list.0.tools.loopDetection",
     "Unrecognized key(s) in object: 'foo', 'bar'"),
], ids=["top-level", "guard-key-at-top", "detectors", "postCompactionGuard", "agent-block-two-keys"])
def test_unknown_keys_rejected_at_all_three_levels(raw, path, message):
    assert issues_of(raw) == [(path, message)]


@pytest.mark.parametrize("key", ["historySize", "warningThreshold", "criticalThreshold", "unknownToolThreshold",
                                 "globalCircuitBreakerThreshold"])
@pytest.mark.parametrize("value, message", [
    (2.5, "Expected integer, received float"),
    ("7", "Expected number, received string"),
    (True, "Expected number, received boolean"),
    (None, "Expected number, received null"),
    ([1], "Expected number, received array"),
    (0, "Number must be greater than 0"),
    (-3, "Number must be greater than 0"),
    (-1.0, "Number must be greater than 0"),
], ids=["float", "string", "boolean", "null", "array", "zero", "negative", "negative-float"])
def test_numbers_must_be_positive_integers(key, value, message):
    assert issues_of(block(**{key: value})) == [(f"tools.loopDetection.{key}", message)]


@pytest.mark.parametrize("value, message", [
    (0, "Number must be greater than 0"),
    (1.5, "Expected integer, received float"),
    ("3", "Expected number, received string"),
], ids=["zero", "float", "string"])
def test_window_size_validation(value, message):
    raw = block(postCompactionGuard={"windowSize": value})
    assert issues_of(raw) == [("tools.loopDetection.postCompactionGuard.windowSize", message)]


@pytest.mark.parametrize("raw, path, message", [
    (block(enabled="yes"), "tools.loopDetection.enabled", "Expected boolean, received string"),
    (block(enabled=1), "tools.loopDetection.enabled", "Expected boolean, received number"),
    (block(detectors={"pingPong": "off"}), "tools.loopDetection.detectors.pingPong",
     "Expected boolean, received string"),
    (block(detectors=[]), "tools.loopDetection.detectors", "Expected object, received array"),
    (block(postCompactionGuard=3), "tools.loopDetection.postCompactionGuard", "Expected object, received number"),
    ({"tools": {"loopDetection": None}}, "tools.loopDetection", "Expected object, received null"),
    ({"tools": {"loopDetection": "on"}}, "tools.loopDetection", "Expected object, received string"),
    ({"options": {"channelSendTools": "telegram"}}, "options.channelSendTools", "Expected array of strings"),
    ({"options": {"channelSendTools": ["a", 1]}}, "options.channelSendTools", "Expected array of strings"),
    ({"options": {"other": 1}}, "options", "Unrecognized key(s) in object: 'other'"),
], ids=["enabled-string", "enabled-number", "detector-flag", "detectors-array", "guard-number", "block-null",
        "block-string", "channels-string", "channels-mixed", "options-unknown-key"])
def test_type_errors(raw, path, message):
    assert issues_of(raw) == [(path, message)]


@pytest.mark.parametrize("raw, issues", [
    ({"tools": 5}, [("tools", "Expected object, received number")]),
    ({"tools": None}, [("tools", "Expected object, received null")]),
    ({"agents": ["a"]}, [("agents", "Expected object, received array")]),
    ({"agents": {"list": {"a": 1}}}, [("agents.list", "Expected array, received object")]),
    ({"agents": {"list": [{"id": "a"}, None, "b"]}},
     [("agents.list.1", "Expected object, received null"), ("agents.list.2", "Expected object, received string")]),
    ({"agents": {"list": [{"id": "a", "tools": "loopDetection"}]}},
     [("agents.list.0.tools", "Expected object, received string")]),
    ({"tools": [], "agents": {"list": [agent("a", enabld=True)]}},
     [("tools", "Expected object, received array"),
      ("agents.list.0.tools.loopDetection", "Unrecognized key(s) in object: 'enabld'")]),
], ids=["tools-number", "tools-null", "agents-array", "list-object", "entries-not-objects", "entry-tools-string",
        "every-issue-listed"])
def test_shapes_around_the_blocks_must_hold_them(raw, issues):
    # a block under a wrong shape would be ignored, so strict validation refuses the shape
    assert issues_of(raw) == issues


@pytest.mark.parametrize("raw", [
    {},
    {"tools": {}},
    {"tools": {"exec": {"x": 1}}, "gateway": {"anything": True}},
    block(),
    block(enabled=True, historySize=30, warningThreshold=10, criticalThreshold=20, unknownToolThreshold=10,
          globalCircuitBreakerThreshold=30, detectors={"genericRepeat": True, "knownPollNoProgress": False,
                                                       "pingPong": True}, postCompactionGuard={"windowSize": 3}),
    block(warningThreshold=5.0, criticalThreshold=6.0),
    block(warningThreshold=25),
    block(criticalThreshold=5),
    block(criticalThreshold=40),
    block(warningThreshold=50, globalCircuitBreakerThreshold=30),
    block(historySize=5, globalCircuitBreakerThreshold=40),
    {"agents": {"list": [{"id": "a"}, {"id": "b", "tools": {}}]}},
    {"agents": {}, "tools": {"exec": {"x": 1}}},
    {"agents": {"defaults": {"tools": {"loopDetection": {"bogus": 1}}}}},
    {"options": {"channelSendTools": []}},
], ids=["empty", "tools-without-block", "unrelated-keys", "empty-block", "full-block", "integral-floats",
        "warning-alone-above-default-critical", "critical-alone-below-default-warning",
        "critical-alone-above-default-global", "warning-and-global-only", "threshold-above-history",
        "agents-without-blocks", "agents-without-list", "agents-defaults-not-validated",
        "empty-channel-list"])
def test_valid_configs(raw):
    assert validate(raw) is None


@pytest.mark.parametrize("keys, issues", [
    ({"warningThreshold": 10, "criticalThreshold": 10}, [("tools.loopDetection.criticalThreshold", WARN_MSG)]),
    ({"warningThreshold": 11, "criticalThreshold": 10}, [("tools.loopDetection.criticalThreshold", WARN_MSG)]),
    ({"criticalThreshold": 30, "globalCircuitBreakerThreshold": 30},
     [("tools.loopDetection.globalCircuitBreakerThreshold", CRIT_MSG)]),
    ({"criticalThreshold": 31, "globalCircuitBreakerThreshold": 30},
     [("tools.loopDetection.globalCircuitBreakerThreshold", CRIT_MSG)]),
    ({"warningThreshold": 5, "criticalThreshold": 5, "globalCircuitBreakerThreshold": 5},
     [("tools.loopDetection.criticalThreshold", WARN_MSG),
      ("tools.loopDetection.globalCircuitBreakerThreshold", CRIT_MSG)]),
    ({"warningThreshold": 10, "criticalThreshold": 0},
     [("tools.loopDetection.criticalThreshold", "Number must be greater than 0")]),
    ({"warningThreshold": 10, "criticalThreshold": 5.5},
     [("tools.loopDetection.criticalThreshold", "Expected integer, received float")]),
], ids=["equal", "warning-above", "critical-equals-global", "critical-above-global", "both-rules",
        "invalid-number-skips-cross-check", "float-skips-cross-check"])
def test_cross_field_rules(keys, issues):
    assert issues_of(block(**keys)) == issues


def test_cross_field_rules_only_within_one_block():
    raw = {"tools": {"loopDetection": {"warningThreshold": 15, "criticalThreshold": 25}},
           "agents": {"list": [agent("a", criticalThreshold=12), agent("b", globalCircuitBreakerThreshold=20)]}}
    assert validate(raw) is None


def test_per_agent_block_paths_and_verbatim_messages():
    raw = {"agents": {"list": [{"id": "ok"}, agent("bad", warningThreshold=8, criticalThreshold=8),
                               agent("worse", criticalThreshold=9, globalCircuitBreakerThreshold=9,
                                     detectors={"x": True})]}}
    assert issues_of(raw) == [
        ("agents.list.1.tools.loopDetection.criticalThreshold", WARN_MSG),
        ("agents.list.2.tools.loopDetection.detectors", "Unrecognized key(s) in object: 'x'"),
        ("agents.list.2.tools.loopDetection.globalCircuitBreakerThreshold", CRIT_MSG),
    ]


def test_config_error_text_lists_every_issue_with_source():
    raw = block(warningThreshold=10, criticalThreshold=10, historySize=0)
    with pytest.raises(ConfigError, match=r"^openclaw\.json: tools\.loopDetection\.historySize: Number must be "
                                          r"greater than 0\nopenclaw\.json: tools\.loopDetection\.criticalThreshold: "
                                          r"tools\.loopDetection\.warningThreshold must be lower than "
                                          r"criticalThreshold\.$") as info:
        validate(raw, "openclaw.json")
    assert info.value.source == "openclaw.json"
    assert isinstance(info.value, ValueError)


# ------------------------------------------------------------------ §2.2 runtime resolution


@pytest.mark.parametrize("keys, expected", [
    ({}, (10, 20, 30)),
    ({"criticalThreshold": 5}, (10, 11, 30)),
    ({"warningThreshold": 5, "criticalThreshold": 5}, (5, 6, 30)),
    ({"warningThreshold": 25}, (25, 26, 30)),
    ({"warningThreshold": 40}, (40, 41, 42)),
    ({"criticalThreshold": 20, "globalCircuitBreakerThreshold": 15}, (10, 20, 21)),
    ({"criticalThreshold": 35}, (10, 35, 36)),
    ({"warningThreshold": 3, "criticalThreshold": 5, "globalCircuitBreakerThreshold": 8}, (3, 5, 8)),
    ({"warningThreshold": 5.0, "criticalThreshold": 7.0, "globalCircuitBreakerThreshold": 9.0}, (5, 7, 9)),
    ({"warningThreshold": 0, "criticalThreshold": -3, "globalCircuitBreakerThreshold": "7"}, (10, 20, 30)),
    ({"warningThreshold": 2.5, "criticalThreshold": True, "globalCircuitBreakerThreshold": None}, (10, 20, 30)),
    ({"warningThreshold": "7", "criticalThreshold": 15}, (10, 15, 30)),
    ({"warningThreshold": float("inf"), "criticalThreshold": float("nan")}, (10, 20, 30)),
], ids=["defaults", "critical-only-5", "critical-equal-warning", "warning-above-default-critical",
        "warning-above-default-global", "global-below-critical", "critical-above-default-global", "custom-3-5-8",
        "integral-floats", "zero-negative-string", "float-bool-null", "string-warning", "inf-nan"])
def test_threshold_clamps(keys, expected):
    settings = resolve(keys)
    assert (settings.warning_threshold, settings.critical_threshold,
            settings.global_circuit_breaker_threshold) == expected
    assert type(settings.warning_threshold) is int and type(settings.critical_threshold) is int


@pytest.mark.parametrize("value, expected", [
    (5, 5), (5.0, 5), (1, 1), ("7", 30), (2.5, 30), (0, 30), (-3, 30), (True, 30), (None, 30),
], ids=["5", "5.0", "1", "string-7", "2.5", "0", "-3", "true", "null"])
def test_history_size_independent_knob(value, expected):
    settings = resolve({"historySize": value, "warningThreshold": 50})
    assert settings.history_size == expected
    assert type(settings.history_size) is int


@pytest.mark.parametrize("value, expected", [(3, 3), (5.0, 5), (0, 10), ("7", 10), (-1, 10)],
                         ids=["3", "5.0", "0", "string", "negative"])
def test_unknown_tool_threshold_independent_knob(value, expected):
    settings = resolve({"unknownToolThreshold": value, "warningThreshold": 1, "criticalThreshold": 2})
    assert settings.unknown_tool_threshold == expected


@pytest.mark.parametrize("guard, expected", [
    (None, 3), ({}, 3), ({"windowSize": 1}, 1), ({"windowSize": 4.0}, 4), ({"windowSize": 0}, 3),
    ({"windowSize": "2"}, 3), ("x", 3),
], ids=["absent", "empty", "1", "4.0", "0", "string", "not-object"])
def test_window_size_resolution(guard, expected):
    keys = {} if guard is None else {"postCompactionGuard": guard}
    assert resolve({"enabled": True, **keys}).window_size == expected


@pytest.mark.parametrize("detectors, expected", [
    (None, (True, True, True)),
    ({}, (True, True, True)),
    ({"genericRepeat": False}, (False, True, True)),
    ({"knownPollNoProgress": False, "pingPong": False}, (True, False, False)),
    # by JavaScript truthiness (OpenClaw 2026.7.35: `detectors.x ?? true`, then tested with &&)
    ({"pingPong": "false", "genericRepeat": 0}, (False, True, True)),
    ([False], (True, True, True)),
], ids=["absent", "empty", "generic-off", "poll-and-pingpong-off", "non-bool-by-truthiness", "not-object"])
def test_detector_flags(detectors, expected):
    keys = {"enabled": True} if detectors is None else {"enabled": True, "detectors": detectors}
    settings = resolve(keys)
    assert (settings.generic_repeat, settings.known_poll_no_progress, settings.ping_pong) == expected


def test_resolve_without_block_is_defaults():
    assert resolve(None) == DEFAULTS == LoopDetectionSettings()
    assert resolve({}) == DEFAULTS
    assert DEFAULTS == LoopDetectionSettings(enabled=None, history_size=30, warning_threshold=10,
                                             critical_threshold=20, unknown_tool_threshold=10,
                                             global_circuit_breaker_threshold=30, generic_repeat=True,
                                             known_poll_no_progress=True, ping_pong=True, window_size=3)


# ------------------------------------------------------------------ §2.3 asymmetric enabled


@pytest.mark.parametrize("keys, enabled, detectors, guard, records", [
    ({}, None, False, True, True),
    ({"warningThreshold": 3}, None, False, True, True),
    ({"enabled": True}, True, True, True, True),
    ({"enabled": False}, False, False, False, False),
    # Spec §2.3, unvalidated values: the detectors test JavaScript truthiness,
    # the guard and call recording test `=== false`.
    ({"enabled": "true"}, True, True, True, True),
    ({"enabled": "false"}, True, True, True, True),
    ({"enabled": 1}, True, True, True, True),
    ({"enabled": []}, True, True, True, True),
    ({"enabled": {}}, True, True, True, True),
    ({"enabled": 0}, None, False, True, True),
    ({"enabled": ""}, None, False, True, True),
    ({"enabled": float("nan")}, None, False, True, True),
    ({"enabled": None}, None, False, True, True),
], ids=["absent", "absent-with-thresholds", "true", "false", "string-true", "string-false-is-truthy",
        "one", "empty-array", "empty-object", "zero", "empty-string", "nan", "null"])
def test_enabled_three_states(keys, enabled, detectors, guard, records):
    settings = resolve(keys)
    assert settings.enabled is enabled
    assert settings.detectors_enabled is detectors
    assert settings.guard_enabled is guard
    assert settings.records_calls is records


# ------------------------------------------------------------------ §2.4 overlay


@pytest.mark.parametrize("global_block, agent_block, merged", [
    (None, None, None),
    ({"enabled": True}, None, {"enabled": True}),
    (None, {"enabled": True}, {"enabled": True}),
    ({"enabled": True, "warningThreshold": 5}, {"warningThreshold": 7},
     {"enabled": True, "warningThreshold": 7}),
    ({"enabled": True}, {"enabled": False}, {"enabled": False}),
    ({"detectors": {"pingPong": False, "genericRepeat": False}}, {"detectors": {"pingPong": True}},
     {"detectors": {"pingPong": True, "genericRepeat": False}}),
    ({"detectors": {"pingPong": False}}, {"warningThreshold": 3},
     {"detectors": {"pingPong": False}, "warningThreshold": 3}),
    ({"warningThreshold": 3}, {"detectors": {"genericRepeat": False}},
     {"warningThreshold": 3, "detectors": {"genericRepeat": False}}),
    ({"postCompactionGuard": {"windowSize": 4}}, {"enabled": True, "criticalThreshold": 12},
     {"postCompactionGuard": {"windowSize": 4}, "enabled": True, "criticalThreshold": 12}),
    ({"postCompactionGuard": {"windowSize": 4}}, {"postCompactionGuard": {"windowSize": 2}},
     {"postCompactionGuard": {"windowSize": 2}}),
    ({"enabled": True}, "not a block", {"enabled": True}),
    ("not a block", {"enabled": True}, {"enabled": True}),
], ids=["neither", "global-only", "agent-only", "shallow-agent-wins", "agent-disables", "detectors-key-by-key",
        "detectors-inherited", "detectors-agent-only", "guard-inherited-thresholds-changed", "guard-agent-wins",
        "agent-not-object", "global-not-object"])
def test_merge_blocks(global_block, agent_block, merged):
    assert merge_blocks(global_block, agent_block) == merged


def test_merge_does_not_mutate_inputs():
    g = {"detectors": {"pingPong": False}}
    a = {"detectors": {"genericRepeat": False}}
    merge_blocks(g, a)
    assert g == {"detectors": {"pingPong": False}} and a == {"detectors": {"genericRepeat": False}}


def test_for_agent_overlay_and_lookup():
    raw = {
        "tools": {"loopDetection": {"enabled": True, "warningThreshold": 8, "detectors": {"pingPong": False},
                                    "postCompactionGuard": {"windowSize": 4}}},
        "agents": {
            "defaults": {"tools": {"loopDetection": {"warningThreshold": 2}}},
            "list": [
                None, "junk", {"tools": {"loopDetection": {"warningThreshold": 1}}},
                {"id": "Safe Runner", "tools": {"loopDetection": {"criticalThreshold": 12,
                                                                  "detectors": {"genericRepeat": False}}}},
                {"id": "safe-runner", "tools": {"loopDetection": {"warningThreshold": 3}}},
                {"id": "plain"},
                {"id": "off", "tools": {"loopDetection": {"enabled": False}}},
            ],
        },
    }
    config = OpenClawConfig(raw)
    safe = config.for_agent("  SAFE-RUNNER ")
    assert (safe.enabled, safe.warning_threshold, safe.critical_threshold) == (True, 8, 12)
    assert (safe.generic_repeat, safe.known_poll_no_progress, safe.ping_pong) == (False, True, False)
    assert safe.window_size == 4
    global_only = resolve(raw["tools"]["loopDetection"])
    assert config.for_agent("plain") == global_only  # entry without a block -> G
    assert config.for_agent("unknown-agent") == global_only
    assert config.for_agent(None) == global_only
    assert config.for_agent("") == global_only
    off = config.for_agent("off")
    assert off.enabled is False and off.guard_enabled is False and off.warning_threshold == 8


def test_agent_block_without_global():
    config = OpenClawConfig({"agents": {"list": [{"id": "solo", "tools": {"loopDetection": {
        "enabled": True, "warningThreshold": 4}}}]}})
    assert config.for_agent("solo") == resolve({"enabled": True, "warningThreshold": 4})
    assert config.for_agent("other") == DEFAULTS
    assert config.for_agent(None) == DEFAULTS


def test_main_agent_lookup_for_blank_id():
    config = OpenClawConfig({"agents": {"list": [{"id": "main", "tools": {"loopDetection": {"enabled": True}}}]}})
    assert config.for_agent("main").enabled is True
    assert config.for_agent("MAIN").enabled is True
    assert config.for_agent(None).enabled is None


@pytest.mark.parametrize("raw_id, normalised", [
    ("safe-runner", "safe-runner"),
    (" Safe-Runner ", "safe-runner"),
    (" Safe Runner ", "safe-runner"),
    ("", "main"),
    ("   ", "main"),
    ("Main", "main"),
    ("agent_1-x", "agent_1-x"),
    ("Ops.Bot", "ops-bot"),
    ("a  b!!c", "a-b-c"),
    ("--x--", "x"),
    ("!!!", "main"),
    ("_x", "_x"),
    ("ÄBC", "bc"),
    ("café", "caf"),
    ("a" * 64, "a" * 64),
    ("A" * 70, "a" * 64),
    ("x" * 63 + ".yz", "x" * 63 + "-"),
], ids=["valid", "trimmed-upper", "space-inside", "empty", "blank", "upper", "underscore-dash", "dot",
        "runs-collapsed", "dashes-stripped", "nothing-left", "leading-underscore", "non-ascii-leading",
        "non-ascii-trailing", "64-chars", "70-chars-cut", "cut-after-strip"])
def test_normalize_agent_id(raw_id, normalised):
    assert normalize_agent_id(raw_id) == normalised


# ------------------------------------------------------------------ load_config (JSON5)


def test_load_config_json5_with_comments_and_trailing_commas(tmp_path):
    path = tmp_path / "openclaw.json"
    path.write_text("""
    // OpenClaw config
    {
      gateway: { port: 18789 },   /* unrelated */
      tools: {
        loopDetection: {
          enabled: true,
          warningThreshold: 5,
          criticalThreshold: 9,
          detectors: { pingPong: false, },
        },
      },
      agents: { list: [ { id: 'Safe Runner', tools: { loopDetection: { historySize: 50, }, }, }, ], },
      options: { channelSendTools: ['Telegram',], },
    }
    """, encoding="utf-8")
    config = load_config(path)
    settings = config.for_agent(None)
    assert (settings.enabled, settings.warning_threshold, settings.critical_threshold,
            settings.global_circuit_breaker_threshold, settings.ping_pong) == (True, 5, 9, 30, False)
    assert config.for_agent("safe-runner").history_size == 50
    assert config.for_agent("safe-runner").warning_threshold == 5
    assert config.channel_send_tools == frozenset({"telegram"})


def test_load_config_none_is_openclaw_defaults():
    config = load_config(None)
    assert config.for_agent(None) == DEFAULTS
    assert config.for_agent(None).detectors_enabled is False
    assert config.for_agent(None).guard_enabled is True


@pytest.mark.parametrize("text, pattern", [
    ("{ tools: { loopDetection: { enabled: true, } ", r":1:46: not valid JSON5: Unexpected end of input$"),
    ("not json at all", r':1:2: not valid JSON5: Unexpected "o"$'),
    ('{\n  tools: {\n    loopDetection: { enabled: true,, }\n  }\n}\n', r':3:37: not valid JSON5: Unexpected " "$'),
    ("[1, 2]", r": \(file\): the top level must be an object"),
    ('"text"', r": \(file\): the top level must be an object"),
    ("", r": \(file\): no JSON5 value \(the file is empty or only comments\): an OpenClaw config is one JSON5 "
         r"object, such as \{ tools: \{ loopDetection: \{ enabled: true \} \} \}; \{\} gives OpenClaw's defaults$"),
    ("  \n", r": \(file\): no JSON5 value \(the file is empty or only comments\)"),
    ("// later\n/* maybe */\n", r": \(file\): no JSON5 value \(the file is empty or only comments\)"),
], ids=["unterminated", "garbage", "third-line", "array", "string", "empty", "blank", "comments-only"])
def test_load_config_bad_file(tmp_path, text, pattern):
    """A file json5 cannot parse is named with the line and column of the fault (``path:line:column``);
    one with no value at all says so, and what to write instead."""
    path = tmp_path / "openclaw.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}{pattern}"):
        load_config(path)


def test_load_config_validates_strictly(tmp_path):
    path = tmp_path / "openclaw.json5"
    path.write_text("{tools: {loopDetection: {warningThreshold: 20, criticalThreshold: 20}}}", encoding="utf-8")
    with pytest.raises(ConfigError, match="tools.loopDetection.criticalThreshold: " + WARN_MSG.replace(".", r"\.")):
        load_config(path)
    lenient = load_config(path, strict=False)
    assert (lenient.for_agent(None).warning_threshold, lenient.for_agent(None).critical_threshold) == (20, 21)


def test_load_config_refuses_a_shape_that_would_hide_the_blocks_unless_lenient(tmp_path):
    path = tmp_path / "openclaw.json"
    path.write_text("{agents: {list: {a: {tools: {loopDetection: {enabled: true}}}}}}", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: agents\\.list: Expected array, received object$"):
        load_config(path)
    assert load_config(path, strict=False).for_agent("a") == DEFAULTS


def test_load_config_missing_file(tmp_path):
    with pytest.raises(OSError):
        load_config(tmp_path / "absent.json")


def test_agents_with_blocks_are_the_blocks_for_agent_applies():
    config = OpenClawConfig({"tools": {"loopDetection": {"enabled": True}}, "agents": {"list": [
        {"id": "Ops", "tools": {"loopDetection": {"warningThreshold": 5}}},
        {"id": " ops ", "tools": {"loopDetection": {"warningThreshold": 7}}},  # same agent: never applied
        {"id": "plain"},
        {"id": "nulled", "tools": {"loopDetection": None}},
        {"id": "review", "tools": {"loopDetection": {}}},
    ]}})
    assert config.agents_with_blocks == ["Ops", "review"]
    assert config.for_agent("ops").warning_threshold == 5
    assert config.for_agent("nulled") == config.for_agent(None)


def test_settings_cache_bounded_by_distinct_agent_ids():
    """Agent ids come from events: a fleet naming every sub-agent by its thread id must not grow the cache without
    bound, and every answer stays the overlay of its own entry."""
    from streams.detection.config.openclaw import SETTINGS_CACHE_SIZE

    config = OpenClawConfig({"tools": {"loopDetection": {"enabled": True, "historySize": 20}},
                             "agents": {"list": [{"id": "ops", "tools": {"loopDetection": {"historySize": 7}}}]}})
    for n in range(SETTINGS_CACHE_SIZE * 2 + 10):
        assert config.for_agent(f"thread-{n}").history_size == 20
        assert len(config.settings_cache) <= SETTINGS_CACHE_SIZE
    assert config.for_agent("OPS").history_size == 7
    assert config.for_agent("thread-1", "openclaw-2026.7").history_size == 20
