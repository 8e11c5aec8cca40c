"""A scripted model server for the end-to-end runs: it answers every model request with the same tool call.

Speaks the two wire formats the runners use (only the parts they need for a tool loop):

* Anthropic Messages API (``POST /v1/messages``, Claude Code at ``ANTHROPIC_BASE_URL``): a request
  that offers a ``Bash`` tool is answered with one ``tool_use`` block ``Bash {"command": COMMAND}``
  (streamed as server-sent events when ``stream`` is true); any other request (a title, a quota
  probe) with a short text.
* OpenAI Responses API (``POST /v1/responses``, Codex through a custom ``model_providers`` entry):
  a streamed ``function_call`` of the shell tool the request offers (``shell_command`` with a
  string command, or ``shell`` / ``exec_command`` with their argument shapes).

After ``max_calls`` tool calls (counted over the server's life) it answers with text and no tool, so
a runner that never stops still ends. Every request is appended to ``log`` (JSON Lines) when given.

With ``spawn``, a sub-agent loops instead of the main agent. Codex (its ``multi_agent_v1`` tools): the
thread ``codex exec`` started first spawns a sub-agent (``spawn_agent {"message": "CHILD-TASK: ..."}``),
then waits for it (``wait_agent``); Claude Code: the main agent calls its ``Agent`` tool in the foreground
with the prompt ``CHILD-TASK: ...``. Then the main agent repeats the shell command ``spawn`` times and
ends; the sub-agent (a request whose user messages hold ``CHILD-TASK``) is the one that loops,
``max_calls`` times.

Run: ``python fake_model.py --port 0 --command 'ls /nonexistent' --max-calls 12 --port-file F``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

__all__ = ["FakeModel", "main"]


class FakeModel:
    """The script: which command to repeat, how many tool calls at most, the request log."""

    def __init__(self, command: str, max_calls: int, log: Path | None = None,
                 before_call: Callable[[int], None] | None = None, full_after: int | None = None,
                 spawn: int | None = None) -> None:
        self.command = command
        self.max_calls = max_calls
        self.spawn = spawn  # the parent's own shell calls after its sub-agent ended (None: no sub-agent)
        self.full_after = full_after  # report a nearly full context window with this tool call (auto-compaction)
        self.log = log
        self.before_call = before_call  # called with a tool call's number before it is sent
        self.calls = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def next_call(self) -> int | None:
        """The number of the next tool call to send, or None when ``max_calls`` were sent."""
        with self._lock:
            if self.calls >= self.max_calls:
                return None
            self.calls += 1
            number = self.calls
        if self.before_call is not None:
            self.before_call(number)
        return number

    def record(self, path: str, body: Any) -> None:
        if self.log is None:
            return
        with self._lock, self.log.open("a") as handle:
            handle.write(json.dumps({"path": path, "body": body}) + "\n")


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    out = []
    for name, data in events:
        if name:
            out.append(f"event: {name}\n")
        out.append(f"data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


COMPACTION_MARK = "Respond with TEXT ONLY"  # how Claude Code 2.1.332 asks for a compaction summary
SUMMARY = "<analysis>The user asked for a loop.</analysis>\n<summary>The same check was run again and again.</summary>"


def _asks_summary(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and COMPACTION_MARK in json.dumps(messages[-1].get("content"))


CHILD_MARK = "CHILD-TASK"  # in the task a parent hands its sub-agent


def _anthropic_parent_step(model: FakeModel, body: dict[str, Any]) -> dict[str, Any] | None:
    """Under ``spawn``, the main agent's next tool use (from how many tool results its conversation holds):
    start the sub-agent (Claude Code's ``Agent`` tool, in the foreground), then ``model.spawn`` Bash calls;
    None when it is done."""
    step = sum(1 for m in body.get("messages") or [] if m.get("role") == "user" and isinstance(m.get("content"), list)
               for block in m["content"] if isinstance(block, dict) and block.get("type") == "tool_result")
    if step == 0:
        return {"type": "tool_use", "id": f"toolu_agent_{next(model._ids):06d}", "name": "Agent",
                "input": {"description": "run the check", "prompt": f"{CHILD_MARK}: run the check",
                          "subagent_type": "general-purpose", "run_in_background": False}}
    if step <= model.spawn:
        return {"type": "tool_use", "id": f"toolu_parent_{step:02d}_{next(model._ids):06d}", "name": "Bash",
                "input": {"command": model.command, "description": "run the check"}}
    return None


def anthropic_answer(model: FakeModel, body: dict[str, Any]) -> tuple[dict[str, Any], list]:
    """``(message, stream events)`` answering a Messages API request."""
    tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    summary = _asks_summary(body)
    messages = body.get("messages") or []
    parent = (model.spawn is not None and "Agent" in tools and not summary
              and not (messages and CHILD_MARK in json.dumps(messages[0].get("content"))))
    step = _anthropic_parent_step(model, body) if parent else None
    number = model.next_call() if "Bash" in tools and not summary and not parent else None
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    if number is not None and number == model.full_after:
        usage["input_tokens"] = 990_000
    message = {"id": f"msg_{next(model._ids):06d}", "type": "message", "role": "assistant",
               "model": body.get("model", "fake"), "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": usage}
    if number is not None or step is not None:
        block = step or {"type": "tool_use", "id": f"toolu_{number:02d}_{message['id'][4:]}", "name": "Bash",
                         "input": {"command": model.command, "description": "run the check"}}
        stop = "tool_use"
        events = [("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {**block, "input": {}}}),
                  ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "input_json_delta",
                                                     "partial_json": json.dumps(block["input"])}}),
                  ("content_block_stop", {"type": "content_block_stop", "index": 0})]
    else:
        block = {"type": "text", "text": SUMMARY if summary else "Done."}
        stop = "end_turn"
        events = [("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}}),
                  ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": block["text"]}}),
                  ("content_block_stop", {"type": "content_block_stop", "index": 0})]
    full = {**message, "content": [block], "stop_reason": stop}
    stream = ([("message_start", {"type": "message_start", "message": message})] + events
              + [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                    "usage": {**usage, "output_tokens": 5}}),
                 ("message_stop", {"type": "message_stop"})])
    return full, stream


SPAWN_NAMESPACE = "multi_agent_v1"  # Codex 0.171's sub-agent tools: a "namespace" tool in the request


def _is_child(body: dict[str, Any]) -> bool:
    """Whether a Responses API request is the sub-agent's (its task is a user message holding CHILD_MARK)."""
    return any(isinstance(item, dict) and item.get("type") == "message" and item.get("role") == "user"
               and CHILD_MARK in json.dumps(item.get("content")) for item in body.get("input") or [])


def _parent_step(model: FakeModel, body: dict[str, Any], rid: str) -> dict[str, Any] | None:
    """The parent thread's next item under ``spawn``, from how many outputs its input holds: spawn the
    sub-agent, wait for it, then ``model.spawn`` shell calls; None when it is done."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    step, tag = len(outputs), rid[5:]
    if step == 0:
        name, arguments = "spawn_agent", {"message": f"{CHILD_MARK}: run the check"}
    elif step == 1:
        try:
            child = json.loads(outputs[0].get("output") or "{}").get("agent_id")
        except (ValueError, AttributeError):
            child = None
        name, arguments = "wait_agent", {"targets": [child], "timeout_ms": 120_000}
    elif step < 2 + model.spawn:
        return {"type": "function_call", "id": f"fc_p{step}_{tag}", "call_id": f"call_parent_{step - 1:02d}_{tag}",
                "name": "exec_command", "arguments": json.dumps({"cmd": model.command}), "status": "completed"}
    else:
        return None
    return {"type": "function_call", "id": f"fc_{name}_{tag}", "call_id": f"call_{name}_{tag}", "name": name,
            "namespace": SPAWN_NAMESPACE, "arguments": json.dumps(arguments), "status": "completed"}


def responses_stream(model: FakeModel, body: dict[str, Any]) -> list:
    """The server-sent events answering a Responses API request."""
    tools = {t.get("name"): t for t in body.get("tools") or [] if isinstance(t, dict)}
    shell = next((n for n in ("shell_command", "shell", "exec_command") if n in tools), None)
    rid = f"resp_{next(model._ids):06d}"
    parent = model.spawn is not None and SPAWN_NAMESPACE in tools and not _is_child(body)
    number = model.next_call() if shell and not parent else None
    item = _parent_step(model, body, rid) if parent else None
    if number is not None:
        if shell == "shell_command":
            arguments = {"command": model.command}
        elif shell == "exec_command":
            arguments = {"cmd": model.command}
        else:
            arguments = {"command": ["bash", "-lc", model.command]}
        item = {"type": "function_call", "id": f"fc_{number:02d}{rid[5:]}", "call_id": f"call_{number:02d}_{rid[5:]}",
                "name": shell, "arguments": json.dumps(arguments), "status": "completed"}
    elif item is None:
        item = {"type": "message", "id": f"msg_{rid[5:]}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}
    response = {"id": rid, "object": "response", "status": "in_progress", "model": body.get("model", "fake"),
                "output": []}
    tokens = 250_000 if number is not None and number == model.full_after else 10
    done = {**response, "status": "completed", "output": [item],
            "usage": {"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens + 5}}
    return [("response.created", {"type": "response.created", "response": response}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                            "item": {**item, "status": "in_progress"}}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": done})]


def make_handler(model: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # model lists and the like
            model.record(self.path, None)
            self._send(200, json.dumps({"data": [], "models": []}).encode(), "application/json")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            model.record(self.path, body)
            path = self.path.split("?", 1)[0]
            if path.endswith("/messages/count_tokens"):
                self._send(200, b'{"input_tokens": 10}', "application/json")
            elif path.endswith("/messages"):
                full, stream = anthropic_answer(model, body)
                if body.get("stream"):
                    self._send(200, _sse(stream), "text/event-stream")
                else:
                    self._send(200, json.dumps(full).encode(), "application/json")
            elif path.endswith("/responses"):
                self._send(200, _sse(responses_stream(model, body)), "text/event-stream")
            else:
                self._send(404, b'{"error": "not found"}', "application/json")

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path)
    parser.add_argument("--command", required=True)
    parser.add_argument("--max-calls", type=int, default=12)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args(argv)
    model = FakeModel(args.command, args.max_calls, args.log)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(model))
    if args.port_file:
        args.port_file.write_text(str(server.server_address[1]))
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        sys.exit(0)


if __name__ == "__main__":
    main()
