"""docs/runners/claude-code.md, "See it work", run: six identical ``npm test`` calls through the Claude Code
hook's mapping, the engine with the page's config and the gateway's answer. The first five answer ``{}``
(the command hook prints nothing; the 4th and 5th are warnings OpenClaw's dedupe keeps back), the sixth is
the deny the page prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import json5

from streams.detection import Engine, OpenClawConfig
from streams.offline.replay import Replayer
from streams.runners.gateway.answers import event_answer
from streams.runners.hooks.claude_code import ClaudeCodeHooks
from streams.runners.verdict import Verdict

PAGE = Path(__file__).resolve().parents[2] / "docs" / "runners" / "claude-code.md"


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## 4. See it work")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def _hook(name: str, n: int, **extra) -> dict:
    return {"session_id": "9f1c2d", "hook_event_name": name, "tool_name": "Bash",
            "tool_input": {"command": "npm test"}, "tool_use_id": f"toolu_0{n}", "prompt_id": "p1", **extra}


def test_see_it_work_answers_as_the_page_says():
    section = _section()
    config = json5.loads(re.search(r"With `(\{ tools: .*? \})`", section).group(1))
    printed = json.loads(next(line for line in section.splitlines() if line.startswith('{"hookSpecificOutput"')))
    hooks, replayer = ClaudeCodeHooks(), Replayer(Engine(OpenClawConfig(config)), key_by="run")
    answers, records = [], []
    for n in range(1, 7):
        payload = _hook("PreToolUse", n)
        record = replayer.apply(hooks.event(payload))
        records.append(record)
        answers.append(hooks.answer(payload, event_answer(Verdict(record["event_id"] or str(n), record["verdict"],
                                                                  record), "allow")))
        response = {"stdout": "1 failing", "stderr": "", "interrupted": False, "isImage": False}
        replayer.apply(hooks.event(_hook("PostToolUse", n, tool_response=response)))
    assert answers[:5] == [{}] * 5 and answers[5] == printed
    # the 4th and 5th calls are warning-level detections that OpenClaw's dedupe keeps back: nothing shown
    assert [(r["decided_by"] or {}).get("action") for r in records] == \
        [None, None, None, "suppressed", "suppressed", "block"]
    assert "print nothing (exit 0)" in section and "dedupe" in section
