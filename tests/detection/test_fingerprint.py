"""Tool names, outcome hashes and unknown-tool names (Spec §3 step 1, §4.3, §4.4)."""

import pytest

from streams.detection import UNDEFINED, digest
from streams.detection.config import OpenClawConfig
from streams.detection.fingerprint import (
    PROFILE_EXEC,
    PROFILE_PLAIN,
    PROFILE_PROCESS_LOG,
    PROFILE_PROCESS_POLL,
    PROFILE_SEND,
    args_hash,
    error_text,
    js_trim,
    normalize_tool_name,
    outcome_hash,
    outcome_profile,
    unknown_tool_name,
)

from ._support import OMIT, SAME_RESULT, SAME_RESULT_HASH, Session, sha

NO_CHANNELS: frozenset = frozenset()

# ------------------------------------------------------------------ tool names (§3 step 1)


@pytest.mark.parametrize("raw, expected", [
    ("read", "read"),
    ("  Read  ", "read"),
    ("READ_FILE", "read_file"),
    ("bash", "exec"),
    (" BASH\n", "exec"),
    ("Bash", "exec"),
    ("apply-patch", "apply_patch"),
    ("Apply-Patch ", "apply_patch"),
    ("apply_patch", "apply_patch"),
    ("exec", "exec"),
    ("bash2", "bash2"),
    ("ba sh", "ba sh"),
    (None, "tool"),
    (UNDEFINED, "tool"),
    ("", "tool"),
    ("   ", ""),
    ("\t\n", ""),
    ("\u00a0Exec\u3000", "exec"),
    ("\ufeffread\u2028", "read"),
], ids=["plain", "trim-lower", "upper", "bash-alias", "bash-alias-trimmed", "bash-alias-case", "apply-patch",
        "apply-patch-case", "apply_patch-kept", "exec", "bash2-no-alias", "inner-space-kept", "none", "undefined",
        "empty", "whitespace-only", "tab-newline-only", "js-trim-nbsp-ideographic", "js-trim-bom-u2028"])
def test_normalize_tool_name(raw, expected):
    assert normalize_tool_name(raw) == expected


@pytest.mark.parametrize("raw, expected", [
    ("  x  ", "x"),
    ("\u00a0\u1680\u2000\u200a\u202f\u205f\u3000x\ufeff", "x"),
    ("\u200bx", "\u200bx"),  # zero-width space is not WhiteSpace in JavaScript
    ("\x1cx", "\x1cx"),  # Python's str.strip would remove U+001C; JavaScript's trim does not
], ids=["ascii", "unicode-spaces", "zwsp-kept", "file-separator-kept"])
def test_js_trim(raw, expected):
    assert js_trim(raw) == expected


@pytest.mark.parametrize("tool_field, expected_tool", [
    ("bash", "exec"), (OMIT, "tool"), ("", "tool"), (None, "tool"), ("  ", ""),
], ids=["bash", "absent", "empty", "null", "blank"])
def test_engine_reports_normalised_name_and_prefixes_hash(tool_field, expected_tool):
    session = Session({"enabled": True})
    verdict = session.call(tool_field, {"command": "ls"})
    assert verdict["tool_name"] == expected_tool
    assert verdict["args_hash"] == expected_tool + ":" + sha('{"command":"ls"}')


def test_bash_and_exec_calls_share_one_args_hash():
    assert args_hash(normalize_tool_name("bash"), {"command": "ls"}) == args_hash("exec", {"command": "ls"})


# ------------------------------------------------------------------ rule 1: thrown errors


@pytest.mark.parametrize("error, text", [
    ("HTTP 503 Service Unavailable", "HTTP 503 Service Unavailable"),
    ("", "Error"),
    ("  spaced  ", "  spaced  "),
    (42, "42"),
    (-0.0, "0"),
    (1.5, "1.5"),
    (1e21, "1e+21"),
    (True, "true"),
    (False, "false"),
    ({"code": "E1", "retry": 2}, '{"code":"E1","retry":2}'),
    (["a", 1], '["a",1]'),
    ({}, "{}"),
], ids=["string-message", "empty-message-uses-name", "untrimmed", "int", "negative-zero", "float", "1e21",
        "true", "false", "object", "array", "empty-object"])
def test_error_text(error, text):
    assert error_text(error) == text
    assert outcome_hash(PROFILE_PLAIN, None, error) == "error:" + digest(text)


def test_thrown_large_integer_uses_javascript_number_text():
    # Spec §4.3 rule 1 (a number as its decimal text): JavaScript's String(18446744073709551615).
    assert error_text(18446744073709551615) == "18446744073709552000"
    assert outcome_hash(PROFILE_PLAIN, None, 2**60) == "error:" + sha('"1152921504606847000"')


def test_error_hash_spec_example():
    assert outcome_hash(PROFILE_PLAIN, None, "HTTP 503 Service Unavailable") == (
        "error:302d025c3b88dc9a19a785b3043ae59e6992047643496122aed1ddf6c942202f")
    # The hashed value is the JSON *string* of the error text.
    assert outcome_hash(PROFILE_PLAIN, None, "boom") == "error:" + sha('"boom"')
    assert outcome_hash(PROFILE_PLAIN, None, {"code": 1}) == "error:" + sha('"{\\"code\\":1}"')


def test_thrown_error_and_error_looking_result_hash_differently():
    thrown = outcome_hash(PROFILE_PLAIN, None, "boom")
    returned_text = outcome_hash(PROFILE_PLAIN, {"content": [{"type": "text", "text": "boom"}]}, None)
    returned_string = outcome_hash(PROFILE_PLAIN, "boom", None)
    assert thrown == "error:" + sha('"boom"')
    assert returned_text == sha('{"details":{},"text":"boom"}')
    assert returned_string == sha('"boom"')
    assert len({thrown, returned_text, returned_string}) == 3


@pytest.mark.parametrize("profile", [PROFILE_PLAIN, PROFILE_EXEC, PROFILE_PROCESS_POLL, PROFILE_SEND],
                         ids=["plain", "exec", "poll", "send"])
def test_thrown_error_wins_over_any_result(profile):
    result = {"details": {"status": "running", "tail": "x"}, "content": []}
    assert outcome_hash(profile, result, "boom") == "error:" + sha('"boom"')


def test_falsy_thrown_values_are_still_errors():
    assert outcome_hash(PROFILE_PLAIN, SAME_RESULT, False) == "error:" + sha('"false"')
    assert outcome_hash(PROFILE_PLAIN, SAME_RESULT, 0) == "error:" + sha('"0"')


# ------------------------------------------------------------------ rule 2: non-object results


@pytest.mark.parametrize("result, expected", [
    (None, None),
    (UNDEFINED, None),
    ("plain text", sha('"plain text"')),
    ("", sha('""')),
    (0, sha("0")),
    (1.0, sha("1")),
    (False, sha("false")),
    ([1, "a"], sha('[1,"a"]')),
    ([], sha("[]")),
], ids=["none-not-recorded", "undefined-not-recorded", "string", "empty-string", "zero", "float", "false",
        "array", "empty-array"])
def test_non_object_results(result, expected):
    assert outcome_hash(PROFILE_PLAIN, result, None) == expected
    assert outcome_hash(PROFILE_EXEC, result, None) == expected


# ------------------------------------------------------------------ rule 3: details and text


def test_spec_worked_example():
    assert outcome_hash(PROFILE_PLAIN, SAME_RESULT, None) == SAME_RESULT_HASH


@pytest.mark.parametrize("result, canonical", [
    ({}, '{"details":{},"text":""}'),
    ({"details": [1]}, '{"details":{},"text":""}'),
    ({"details": "x"}, '{"details":{},"text":""}'),
    ({"details": None, "content": "not a list"}, '{"details":{},"text":""}'),
    ({"content": [{"type": "text", "text": "  a  "}]}, '{"details":{},"text":"a"}'),
    ({"content": [{"type": "text", "text": " a "}, {"type": "image", "text": "b"}, {"type": "text"},
                  {"text": "c"}, {"type": 1, "text": "d"}, "str", None, {"type": "x", "text": "e "}]},
     '{"details":{},"text":"a \\nb\\ne"}'),
    ({"content": [{"type": "text", "text": ""}, {"type": "text", "text": ""}]}, '{"details":{},"text":""}'),
    ({"content": [{"type": "text", "text": "x"}], "other": 1, "details": {"b": 1, "a": [None]}},
     '{"details":{"a":[null],"b":1},"text":"x"}'),
], ids=["empty", "details-array", "details-string", "content-not-list", "text-trimmed",
        "any-type-string-text-joined", "empty-texts", "other-keys-ignored"])
def test_plain_rule_details_and_text(result, canonical):
    assert outcome_hash(PROFILE_PLAIN, result, None) == sha(canonical)


# ------------------------------------------------------------------ rule 4: veto


@pytest.mark.parametrize("profile", [PROFILE_PLAIN, PROFILE_EXEC, PROFILE_PROCESS_POLL, PROFILE_SEND],
                         ids=["plain", "exec", "poll", "send"])
def test_own_veto_is_not_hashed(profile):
    veto = {"content": [{"type": "text", "text": "CRITICAL: ..."}],
            "details": {"status": "blocked", "deniedReason": "tool-loop", "reason": "CRITICAL: ..."}}
    assert outcome_hash(profile, veto, None) is None


@pytest.mark.parametrize("details", [
    {"status": "blocked", "deniedReason": "approval"},
    {"status": "blocked", "deniedReason": "plugin"},
    {"status": "blocked"},
    {"status": "Blocked", "deniedReason": "tool-loop"},
    {"status": "blocked", "deniedReason": "Tool-Loop"},
], ids=["approval-denial", "plugin-denial", "no-reason", "status-case", "reason-case"])
def test_other_blocked_results_are_hashed(details):
    result = {"details": details, "content": [{"type": "text", "text": "denied"}]}
    expected = digest({"details": details, "text": "denied"})
    assert outcome_hash(PROFILE_PLAIN, result, None) == expected


# ------------------------------------------------------------------ rule 5: exec


def test_exec_running_spec_example():
    result = {"details": {"status": "running", "tail": "compiling 42%", "pid": 4242, "sessionId": "s-9",
                          "cwd": "/w", "startedAt": 1}, "content": [{"type": "text", "text": "ignored"}]}
    expected = "c0cebb4bc3ed1d520376188c5afef2dd61cd68c8a81b40a285e65130ee20dfb6"
    assert outcome_hash(PROFILE_EXEC, result, None) == expected
    assert expected == sha('{"status":"running","tail":"compiling 42%"}')


@pytest.mark.parametrize("details, text, canonical", [
    ({"status": "running"}, "t", '{"status":"running","tail":""}'),
    ({"status": "running", "tail": 5}, "t", '{"status":"running","tail":""}'),
    ({"status": "completed", "exitCode": 0, "aggregated": "  done \n", "durationMs": 12, "pid": 1}, "text",
     '{"exitCode":0,"output":"done","status":"completed","timedOut":false}'),
    ({"status": "failed", "exitCode": 2, "timedOut": True, "aggregated": "err"}, "text",
     '{"exitCode":2,"output":"err","status":"failed","timedOut":true}'),
    ({"status": "failed", "exitCode": "2", "timedOut": "true", "aggregated": "   "}, " the text ",
     '{"exitCode":null,"output":"the text","status":"failed","timedOut":false}'),
    ({"status": "completed", "exitCode": True}, "", '{"exitCode":null,"output":"","status":"completed","timedOut":false}'),
    ({"status": "completed", "exitCode": 1.5, "aggregated": 7}, "t",
     '{"exitCode":1.5,"output":"t","status":"completed","timedOut":false}'),
    ({"status": "approval-pending", "reason": "needs approval", "host": "gateway", "command": "rm -rf /",
      "approvalId": "a-1"}, "t",
     '{"command":"rm -rf /","host":"gateway","reason":"needs approval","status":"approval-pending","warningText":""}'),
    ({"status": "approval-unavailable", "reason": 3, "warningText": "careful"}, "t",
     '{"command":"","host":null,"reason":null,"status":"approval-unavailable","warningText":"careful"}'),
], ids=["running-no-tail", "running-non-string-tail", "completed-aggregated-trimmed", "failed-timed-out",
        "blank-aggregated-uses-text", "bool-exit-code-is-null", "float-exit-code-non-string-aggregated",
        "approval-pending", "approval-unavailable"])
def test_exec_covered_statuses(details, text, canonical):
    result = {"details": details, "content": [{"type": "text", "text": text}]}
    assert outcome_hash(PROFILE_EXEC, result, None) == sha(canonical)


@pytest.mark.parametrize("details", [
    {"status": "queued", "pid": 1},
    {"status": ""},
    {"status": 7},
    {"pid": 1},
    {"status": "Running", "tail": "x"},
], ids=["other-status", "empty-status", "non-string-status", "no-status", "status-case-sensitive"])
def test_exec_other_status_falls_through_to_details_and_text(details):
    result = {"details": details, "content": [{"type": "text", "text": "out"}]}
    assert outcome_hash(PROFILE_EXEC, result, None) == digest({"details": details, "text": "out"})


def test_exec_volatile_metadata_does_not_change_the_hash():
    a = {"details": {"status": "completed", "exitCode": 0, "aggregated": "ok", "pid": 1, "durationMs": 5}}
    b = {"details": {"status": "completed", "exitCode": 0, "aggregated": "ok", "pid": 2, "durationMs": 9,
                     "cwd": "/elsewhere"}, "content": [{"type": "text", "text": "different"}]}
    assert outcome_hash(PROFILE_EXEC, a, None) == outcome_hash(PROFILE_EXEC, b, None)
    # Without the exec rule the same two results differ.
    assert outcome_hash(PROFILE_PLAIN, a, None) != outcome_hash(PROFILE_PLAIN, b, None)


# ------------------------------------------------------------------ rule 6: process poll/log


def test_process_poll_missing_status_is_undefined():
    result = {"details": {"pid": 7, "durationMs": 3}}
    assert outcome_hash(PROFILE_PROCESS_POLL, result, None) == sha(
        '{"action":"poll","aggregated":null,"exitCode":null,"exitSignal":null,"status":undefined,"text":""}')


def test_process_poll_fields():
    result = {"details": {"status": "running", "exitCode": None, "exitSignal": "SIGTERM", "aggregated": "line",
                          "pid": 7}, "content": [{"type": "text", "text": " out "}]}
    assert outcome_hash(PROFILE_PROCESS_POLL, result, None) == sha(
        '{"action":"poll","aggregated":"line","exitCode":null,"exitSignal":"SIGTERM","status":"running","text":"out"}')


def test_process_log_fields():
    result = {"details": {"status": "exited", "totalLines": 2, "totalChars": 10, "truncated": False, "exitCode": 0,
                          "durationMs": 99}, "content": [{"type": "text", "text": "x"}]}
    assert outcome_hash(PROFILE_PROCESS_LOG, result, None) == sha(
        '{"action":"log","exitCode":0,"exitSignal":null,"status":"exited","text":"x","totalChars":10,'
        '"totalLines":2,"truncated":false}')


def test_process_log_missing_status_is_undefined():
    assert outcome_hash(PROFILE_PROCESS_LOG, {}, None) == sha(
        '{"action":"log","exitCode":null,"exitSignal":null,"status":undefined,"text":"","totalChars":null,'
        '"totalLines":null,"truncated":null}')


def test_process_poll_status_null_is_kept_as_null():
    assert outcome_hash(PROFILE_PROCESS_POLL, {"details": {"status": None}}, None) == sha(
        '{"action":"poll","aggregated":null,"exitCode":null,"exitSignal":null,"status":null,"text":""}')


# ------------------------------------------------------------------ profiles (which rule applies)

SEND_ACTIONS = ["send", "broadcast", "reply", "thread-reply", "sendWithEffect", "sendAttachment",
                "upload-file", "sticker", "poll"]


@pytest.mark.parametrize("tool, args, profile", [
    ("exec", {"command": "ls"}, PROFILE_EXEC),
    ("exec", UNDEFINED, PROFILE_EXEC),
    ("process", {"action": "poll", "sessionId": "x"}, PROFILE_PROCESS_POLL),
    ("process", {"action": "log"}, PROFILE_PROCESS_LOG),
    ("process", {"action": "Poll"}, PROFILE_PLAIN),
    ("process", {"action": " poll"}, PROFILE_PLAIN),
    ("process", {"action": "kill"}, PROFILE_PLAIN),
    ("process", ["poll"], PROFILE_PLAIN),
    ("command_status", {"id": 1}, PROFILE_PLAIN),
    ("sessions_send", {"message": "hi"}, PROFILE_SEND),
    ("sessions_send", UNDEFINED, PROFILE_SEND),
    ("sessions_send", "text", PROFILE_SEND),
    *[("message", {"action": action}, PROFILE_SEND) for action in SEND_ACTIONS],
    ("message", {"action": "Send"}, PROFILE_PLAIN),
    ("message", {"action": "SEND"}, PROFILE_PLAIN),
    ("message", {"action": " send"}, PROFILE_PLAIN),
    ("message", {"action": "send "}, PROFILE_PLAIN),
    ("message", {"action": "read"}, PROFILE_PLAIN),
    ("message", {"action": "sendmessage"}, PROFILE_PLAIN),
    ("message", {}, PROFILE_PLAIN),
    ("message", UNDEFINED, PROFILE_PLAIN),
    ("read", {"action": "send"}, PROFILE_PLAIN),
], ids=["exec", "exec-no-args", "process-poll", "process-log", "process-Poll-case", "process-poll-untrimmed",
        "process-kill", "process-array-args", "command-status-plain", "sessions-send", "sessions-send-no-args",
        "sessions-send-string-args", *[f"message-{a}" for a in SEND_ACTIONS], "message-Send-case",
        "message-SEND", "message-leading-space", "message-trailing-space", "message-read", "message-sendmessage",
        "message-no-action", "message-no-args", "read-send-action"])
def test_outcome_profile(tool, args, profile):
    assert outcome_profile(tool, args, NO_CHANNELS) == profile


CHANNELS = frozenset({"telegram"})


@pytest.mark.parametrize("tool, args, profile", [
    ("telegram", {"action": "sendMessage", "to": "@u"}, PROFILE_SEND),
    ("telegram", {"action": "  sendMessage\n", "to": "@u"}, PROFILE_SEND),
    ("telegram", {"action": "sendMessage", "to": " "}, PROFILE_SEND),
    ("telegram", {"action": "sendMessage", "to": ""}, PROFILE_PLAIN),
    ("telegram", {"action": "sendMessage"}, PROFILE_PLAIN),
    ("telegram", {"action": "sendMessage", "to": 5}, PROFILE_PLAIN),
    ("telegram", {"action": "sendmessage", "to": "@u"}, PROFILE_PLAIN),
    ("telegram", {"action": "send", "to": "@u"}, PROFILE_PLAIN),
    ("telegram", UNDEFINED, PROFILE_PLAIN),
    ("discord", {"action": "sendMessage", "to": "@u"}, PROFILE_PLAIN),
], ids=["send", "action-trimmed", "blank-to-is-non-empty", "empty-to", "no-to", "non-string-to",
        "action-case", "other-action", "no-args", "not-a-channel-tool"])
def test_channel_send_tools(tool, args, profile):
    assert outcome_profile(tool, args, CHANNELS) == profile


def test_channel_send_tools_come_from_config_options():
    config = OpenClawConfig({"options": {"channelSendTools": [" Telegram ", "slack", 3]}})
    assert config.channel_send_tools == frozenset({"telegram", "slack"})
    assert OpenClawConfig({}).channel_send_tools == frozenset()


def test_channel_send_tool_through_engine_ignores_volatile_ids():
    raw = {"tools": {"loopDetection": {"enabled": True}}, "options": {"channelSendTools": ["telegram"]}}
    args = {"action": "sendMessage", "to": "@u", "text": "hi"}
    first = Session(raw=raw).call("telegram", args, {"details": {"ok": True, "messageId": 1}})
    second = Session(raw=raw).call("telegram", args, {"details": {"ok": True, "messageId": 2},
                                                      "content": [{"type": "text", "text": "sent #2"}]})
    assert first["outcome"]["result_hash"] == second["outcome"]["result_hash"] == sha('{"ok":true}')
    plain = Session({"enabled": True}).call("telegram", args, {"details": {"ok": True, "messageId": 1}})
    assert plain["outcome"]["result_hash"] == sha('{"details":{"messageId":1,"ok":true},"text":""}')


# ------------------------------------------------------------------ rule 7: send, volatile ids

VOLATILE = ["messageId", "message_id", "messageIds", "platformMessageId", "platformMessageIds", "fileId", "file_id",
            "fileKey", "pollId", "poll_id", "receipt", "runId", "idempotencyKey", "ts", "timestamp", "sentAt",
            "deliveredAt", "createdAt"]


@pytest.mark.parametrize("key", VOLATILE)
def test_each_volatile_key_is_dropped(key):
    result = {"details": {"ok": True, key: "v-1", "nested": {key: [1, 2]}}}
    assert outcome_hash(PROFILE_SEND, result, None) == sha('{"nested":{},"ok":true}')


def test_volatile_keys_dropped_recursively_through_arrays():
    details = {"results": [{"messageId": "m1", "channel": "c", "attachments": [{"fileId": "f", "name": "a.txt"}]},
                           {"receipt": {"x": 1}, "channel": "d"}],
               "conversation": {"id": "conv-1", "createdAt": 5}}
    assert outcome_hash(PROFILE_SEND, {"details": details}, None) == sha(
        '{"conversation":{"id":"conv-1"},"results":[{"attachments":[{"name":"a.txt"}],"channel":"c"},'
        '{"channel":"d"}]}')


@pytest.mark.parametrize("message, kept", [
    ({"id": "m1", "text": "hi", "direction": "outbound"}, '{"direction":"outbound","text":"hi"}'),
    ({"id": "m1", "text": "hi", "senderId": "u1"}, '{"senderId":"u1","text":"hi"}'),
    ({"id": "m1", "text": "hi", "accountId": "a1"}, '{"accountId":"a1","text":"hi"}'),
    ({"id": "m1", "text": "hi", "conversation": {"id": "c1"}}, '{"conversation":{"id":"c1"},"text":"hi"}'),
    ({"id": "m1", "text": "hi"}, '{"id":"m1","text":"hi"}'),
    ({"id": "m1", "direction": "outbound"}, '{"direction":"outbound","id":"m1"}'),
    ({"id": 5, "text": "hi", "direction": "outbound"}, '{"direction":"outbound","id":5,"text":"hi"}'),
    ({"id": "m1", "text": 5, "direction": "outbound"}, '{"direction":"outbound","id":"m1","text":5}'),
    ({"id": "m1", "text": "hi", "direction": 1}, '{"direction":1,"id":"m1","text":"hi"}'),
    ({"id": "m1", "text": "hi", "conversation": "c1"}, '{"conversation":"c1","id":"m1","text":"hi"}'),
], ids=["direction", "senderId", "accountId", "conversation-object", "no-marker-keeps-id", "no-text-keeps-id",
        "numeric-id-kept", "non-string-text", "non-string-direction", "conversation-string"])
def test_delivered_message_id_rule(message, kept):
    assert outcome_hash(PROFILE_SEND, {"details": {"message": message}}, None) == sha('{"message":' + kept + "}")


def test_send_ignores_text_entirely():
    a = {"details": {"ok": True}, "content": [{"type": "text", "text": "sent at 10:00"}]}
    b = {"details": {"ok": True}, "content": [{"type": "text", "text": "sent at 10:01"}]}
    assert outcome_hash(PROFILE_SEND, a, None) == outcome_hash(PROFILE_SEND, b, None) == sha('{"ok":true}')


def test_send_with_no_details_hashes_empty_object():
    assert outcome_hash(PROFILE_SEND, {"content": []}, None) == sha("{}")


def test_volatile_keys_kept_outside_send_rule():
    result = {"details": {"messageId": "m1"}}
    assert outcome_hash(PROFILE_PLAIN, result, None) == sha('{"details":{"messageId":"m1"},"text":""}')


# ------------------------------------------------------------------ unknown-tool names (§4.4)


@pytest.mark.parametrize("error, name", [
    ("Unknown tool: foo_bar", "foo_bar"),
    ("UNKNOWN TOOL:   Zeta", "zeta"),
    ("Tool 'weather.get' not found", "weather.get"),
    ('tool "Maps" is not available in this session', "maps"),
    ("unknown toolbox failure", None),
    ("unknown tool\tfoo-1", "foo-1"),
    ("Error: unknown tool: 'Web.Search' (try again)", "web.search"),
    ("unknown tool:: \"x\"", "x"),
    ("unknown tool:", None),
    ("tool foo not found", "foo"),
    ("TOOL  bar  IS NOT AVAILABLE", "bar"),
    ("tool foo was not found", None),
    ("the tool is broken", None),
    ("  Unknown tool: spaced  ", "spaced"),
    ("unknown tool: été", None),
    ("", None),
    ("   ", None),
    ({"message": "Unknown tool: Obj"}, "obj"),
    (404, None),
    (None, None),
], ids=["spec-foo_bar", "spec-upper-spaces", "spec-single-quotes", "spec-double-quotes-available",
        "spec-toolbox-no-separator", "tab-separator", "embedded-with-quotes", "double-colon-quote",
        "nothing-after-separator", "second-pattern", "second-pattern-upper", "was-not-found", "no-name",
        "surrounding-whitespace", "non-ascii-name", "empty-message-is-Error", "whitespace-only",
        "non-error-object-serialised", "number", "no-error"])
def test_unknown_tool_name(error, name):
    assert unknown_tool_name(error) == name


def test_unknown_tool_name_only_for_thrown_errors():
    session = Session({"enabled": True})
    returned = session.call("exec", {"c": 1}, {"content": [{"type": "text", "text": "Unknown tool: foo"}]})
    thrown = session.call("exec", {"c": 1}, None, "Unknown tool: foo")
    assert returned["outcome"]["unknown_tool_name"] is None
    assert thrown["outcome"] == {"recorded": True, "result_hash": "error:" + sha('"Unknown tool: foo"'),
                                 "unknown_tool_name": "foo"}
