"""A scripted OpenAI-compatible model for the OpenClaw end-to-end runs: it repeats one tool call.

OpenClaw reaches it through a custom provider (``models.providers.<id>`` with ``api:
"openai-completions"`` and ``baseUrl`` pointing here). Only ``POST /v1/chat/completions`` is
spoken, streamed (server-sent ``chat.completion.chunk`` events, then ``data: [DONE]``) or not,
whichever the request asks for:

* a request that offers the scripted tool (``tools[].function.name``) and has had fewer than
  ``max_calls`` tool calls so far is answered with one call of it, with the scripted arguments and
  the id ``call_<n>`` (n counts over the server's life, from 1);
* any other request (no such tool, or the budget is spent) with a short text and no tool, so a run
  that is never stopped still ends.

Every request is appended to ``log`` (JSON Lines: ``{"n": <request number>, "tool_call": <n or
null>, "messages": <the request's message count>, "last_tool": <the request's last tool message>}``),
so a test can see what the model was told after each call (the block text, a warning note).

Run: ``python openclaw_model.py --tool read --args '{"path": "missing.txt"}' --max-calls 40
--port 0 --port-file F --log L``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

__all__ = ["ScriptedModel", "serve", "main"]

MODEL_ID = "loop-model"


class ScriptedModel:
    """The script: which tool to call with which arguments, how many calls at most, the log."""

    def __init__(self, tool: str, args: dict[str, Any], max_calls: int, log: Path | None = None,
                 before_call: Callable[[int], None] | None = None) -> None:
        self.tool = tool
        self.args = args
        self.max_calls = max_calls
        self.log = log
        self.before_call = before_call  # called with n before the answer with call n goes out (a test's fault)
        self.calls = 0
        self._requests = itertools.count(1)
        self._lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message for one request: ``{"content": str | None, "tool_calls": [...] | None}``."""
        offered = {t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        messages = body.get("messages") or []
        with self._lock:
            number = next(self._requests)
            call = None
            if self.tool in offered and self.calls < self.max_calls:
                self.calls += 1
                call = self.calls
            if self.log is not None:
                with self.log.open("a", encoding="utf-8") as fh:
                    tool_results = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
                    fh.write(json.dumps({"n": number, "tool_call": call, "messages": len(messages),
                                         "last_tool": tool_results[-1] if tool_results else None}) + "\n")
        if call is None:
            return {"content": "I am stopping here.", "tool_calls": None}
        if self.before_call is not None:
            self.before_call(call)
        return {"content": None, "tool_calls": [{
            "id": f"call_{call}", "type": "function",
            "function": {"name": self.tool, "arguments": json.dumps(self.args)},
        }]}


def _chunks(message: dict[str, Any], created: int) -> list[dict[str, Any]]:
    base = {"id": f"chatcmpl-{created}", "object": "chat.completion.chunk", "created": created, "model": MODEL_ID}
    delta: dict[str, Any] = {"role": "assistant"}
    if message["tool_calls"]:
        delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(message["tool_calls"])]
        finish = "tool_calls"
    else:
        delta["content"] = message["content"]
        finish = "stop"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
    ]


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._json(400, {"error": {"message": "not JSON"}})
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            message = model.answer(body)
            created = int(time.time())
            if body.get("stream"):
                payload = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in _chunks(message, created))
                payload += b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            finish = "tool_calls" if message["tool_calls"] else "stop"
            self._json(200, {
                "id": f"chatcmpl-{created}", "object": "chat.completion", "created": created, "model": MODEL_ID,
                "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            })

        def _json(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def serve(model: ScriptedModel, port: int = 0) -> ThreadingHTTPServer:
    """A started server (in a daemon thread) on 127.0.0.1:``port`` (0: any free port)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(model))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool", required=True)
    parser.add_argument("--args", default="{}", help="the tool call's arguments as JSON")
    parser.add_argument("--max-calls", type=int, default=40)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path)
    parser.add_argument("--log", type=Path)
    opts = parser.parse_args(argv)
    server = serve(ScriptedModel(opts.tool, json.loads(opts.args), opts.max_calls, opts.log), opts.port)
    if opts.port_file:
        opts.port_file.write_text(str(server.server_address[1]))
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
