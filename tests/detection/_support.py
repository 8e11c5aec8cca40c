"""Small builders shared by the engine tests: events, engines and a one-session driver."""

from __future__ import annotations

import hashlib
from typing import Any

from streams.detection import Engine, OpenClawConfig, SessionState

OMIT = object()  # leave a field out of the event (absent args = JavaScript undefined)

READ_ARGS = {"path": "/workspace/notes.md"}
SAME_RESULT = {"content": [{"type": "text", "text": "same file contents"}], "details": {"ok": True}}

# Spec §4.2 and §4.3 worked examples.
READ_HASH = "read:d358b22b4ff6f0515ebb0f5219842ac08c57d468c8f1d6d6bec0927dafb706a2"
SAME_RESULT_HASH = "9bb796be58d3edcd4a7e2b8332f7ee9b41ca2ab28706a49cef2b08327a69722e"


def sha(text: str) -> str:
    """Hex SHA-256 of the UTF-8 bytes of a canonical text written out by hand."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def text_result(text: str, **details: Any) -> dict:
    return {"content": [{"type": "text", "text": text}], "details": details}


def config(block: dict | None = None, **extra: Any) -> OpenClawConfig:
    raw: dict[str, Any] = {}
    if block is not None:
        raw["tools"] = {"loopDetection": block}
    raw.update(extra)
    return OpenClawConfig(raw)


def tool_call(tool: Any = "read", args: Any = READ_ARGS, result: Any = SAME_RESULT, error: Any = None, *,
              call_id: str | None = "call-1", run: Any = "r1", session: str | None = "s1", **fields: Any) -> dict:
    event: dict[str, Any] = {"type": "tool_call", "run_id": run, "session_id": session,
                             "tool_call_id": call_id, "result": result, "error": error}
    if tool is not OMIT:
        event["tool_name"] = tool
    if args is not OMIT:
        event["args"] = args
    event.update(fields)
    return event


def tool_result(call_id: str, result: Any = SAME_RESULT, error: Any = None, *, run: Any = "r1",
                session: str | None = "s1", **fields: Any) -> dict:
    return {"type": "tool_result", "run_id": run, "session_id": session, "tool_call_id": call_id,
            "result": result, "error": error, **fields}


def compaction(*, run: Any = "r1", session: str | None = "s1", **fields: Any) -> dict:
    return {"type": "compaction_retry", "run_id": run, "session_id": session, **fields}


class Session:
    """One session's state driven through an Engine; call ids are numbered call-1, call-2, ..."""

    def __init__(self, block: dict | None = None, *, raw: dict | None = None) -> None:
        self.engine = Engine(OpenClawConfig(raw) if raw is not None else config(block))
        self.state = SessionState()
        self.calls = 0

    def call(self, tool: Any = "read", args: Any = READ_ARGS, result: Any = SAME_RESULT, error: Any = None, *,
             ref: Any = None, **fields: Any) -> dict:
        self.calls += 1
        fields.setdefault("call_id", f"call-{self.calls}")
        return self.engine.process(tool_call(tool, args, result, error, **fields), self.state, ref)

    def repeat(self, times: int, *args: Any, **kwargs: Any) -> list[dict]:
        return [self.call(*args, **kwargs) for _ in range(times)]

    def result(self, call_id: str, result: Any = SAME_RESULT, error: Any = None, *, ref: Any = None,
               **fields: Any) -> dict:
        return self.engine.process(tool_result(call_id, result, error, **fields), self.state, ref)

    def compact(self, **fields: Any) -> dict:
        return self.engine.process(compaction(**fields), self.state)

    def history(self) -> list[tuple]:
        """A deep snapshot of the rolling history."""
        return [(r.tool, r.args_hash, r.call_id, r.run_id, r.result_hash, r.unknown_tool, r.ref)
                for r in self.state.history]
