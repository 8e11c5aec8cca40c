"""Synthetic fleet workload for the benchmarks.

Thousands of interleaved agent runs; each call's args and result are realistic
JSON of 0.2-4 KB (file reads, shell commands, web searches, edits). A few
percent of runs loop the way each detector catches: identical calls and
results (generic_repeat), a stalled poll (known_poll_no_progress), two calls
alternating (ping_pong), retries of a missing tool (unknown_tool_repeat); some
runs see a compaction followed by a repeated call (post-compaction guard).
Deterministic for a given seed.
"""

from __future__ import annotations

import random
import string
from typing import Any, Iterator

__all__ = ["generate", "LOOP_KINDS"]

LOOP_KINDS = ("generic", "poll", "pingpong", "unknown", "compaction")
# Fleet-wide failures: (tool, args, thrown error); each fleet run hits one of them.
FLEET_FAILURES = (
    ("web_fetch", {"url": "https://api.example.com/v1/quotes", "timeout": 30}, "HTTP 503 Service Unavailable"),
    ("exec", {"command": "npm ci", "workdir": "/workspace"}, "Error: ENOTFOUND registry.npmjs.org"),
    ("message", {"action": "send", "to": "#ops", "text": "daily digest"}, "RateLimitError: 429 Too Many Requests"),
)
_WORDS = ("agent loop tool call result file path config worker kafka partition offset stream table "
          "session run detect verdict block warn error retry timeout build test deploy cache index").split()


def _text(rng: random.Random, size: int) -> str:
    words = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


_LIGHT = " ".join(_WORDS * 4)


def _light_text(rng: random.Random, size: int) -> str:
    """A cheap stand-in for :func:`_text` (one draw): short, for tests that look at verdicts, not payloads."""
    start = rng.randrange(len(_LIGHT) - 60)
    return _LIGHT[start:start + min(size, 60)]


def _ident(rng: random.Random, n: int = 8) -> str:
    return "".join(rng.choices(string.ascii_lowercase + string.digits, k=n))


def _call(rng: random.Random, _text=_text) -> tuple[str, dict[str, Any]]:
    kind = rng.randrange(6)
    if kind == 0:
        return "read", {"path": f"/workspace/{_ident(rng)}/{_ident(rng)}.py", "offset": rng.randrange(500), "limit": 200}
    if kind == 1:
        return "exec", {"command": f"grep -rn {_ident(rng)} src/ | head -{rng.randrange(5, 50)}",
                        "workdir": "/workspace", "timeout": 120, "env": {"CI": "1", "LANG": "C.UTF-8"}}
    if kind == 2:
        return "write", {"path": f"/workspace/{_ident(rng)}.md", "content": _text(rng, rng.randrange(200, 3500))}
    if kind == 3:
        return "web_search", {"query": _text(rng, rng.randrange(20, 120)), "count": 5, "freshness": "week"}
    if kind == 4:
        return "edit", {"path": f"/workspace/src/{_ident(rng)}.ts", "oldText": _text(rng, rng.randrange(50, 800)),
                        "newText": _text(rng, rng.randrange(50, 800))}
    return "browser", {"action": "snapshot", "targetId": _ident(rng, 16), "refs": "aria", "maxChars": 8000}


def _result(rng: random.Random, tool: str, _text=_text) -> dict[str, Any]:
    size = rng.randrange(200, 4000)
    if tool == "exec":
        return {"content": [{"type": "text", "text": _text(rng, size)}],
                "details": {"status": "completed", "exitCode": rng.choice((0, 0, 0, 1)), "durationMs": rng.randrange(5, 9000),
                            "aggregated": _text(rng, size), "cwd": "/workspace", "pid": rng.randrange(1000, 60000)}}
    return {"content": [{"type": "text", "text": _text(rng, size)}],
            "details": {"ok": True, "bytes": size, "truncated": False}}


def generate(runs: int = 2000, calls_per_run: tuple[int, int] = (8, 40), loop_share: float = 0.03,
             seed: int = 7, fleet_share: float = 0.0, agents: int = 1, light: bool = False) -> list[dict[str, Any]]:
    """Events of ``runs`` interleaved runs, in arrival order, ``ts`` 1 ms apart.

    ``loop_share`` of the runs loop in each of :data:`LOOP_KINDS`' ways;
    ``fleet_share`` of them hit one of :data:`FLEET_FAILURES` 1-3 times;
    runs belong to ``agents`` agents (``main``, ``agent-1``, ...) in turn. ``light``: texts of at most
    60 characters drawn at once (a fleet of the same shape, several times faster to make and replay,
    for tests that look at verdicts and reports; not the same events as without it).
    """
    text = _light_text if light else _text
    rng = random.Random(seed)
    scripts: list[Iterator[dict[str, Any]]] = []
    for index in range(runs):
        draw = rng.random()
        kind = None
        for position, name in enumerate(LOOP_KINDS):
            if draw < loop_share * (position + 1):
                kind = name
                break
        fleet = rng.randrange(len(FLEET_FAILURES)) if fleet_share and rng.random() < fleet_share else None
        agent = "main" if index % agents == 0 else f"agent-{index % agents}"
        scripts.append(_run_events(rng, f"run-{index:06d}", f"agent:{agent}:s{index % 500:04d}", kind,
                                   rng.randrange(*calls_per_run), fleet, agent, text))
    events: list[dict[str, Any]] = []
    live = list(range(len(scripts)))
    window = 200  # runs in flight at once
    active, pending = live[:window], live[window:]
    while active:
        slot = rng.randrange(len(active))
        try:
            events.append(next(scripts[active[slot]]))
        except StopIteration:
            active[slot] = pending.pop() if pending else active[-1]
            if not pending and active[slot] == active[-1]:
                active.pop() if slot == len(active) - 1 else active.pop(slot)
    for number, event in enumerate(events):
        event["event_id"] = f"e{number:08d}"
        event["ts"] = 1_764_460_800_000 + number
    return events


def _run_events(rng: random.Random, run_id: str, session: str, kind: str | None, length: int,
                fleet: int | None = None, agent: str = "main", text=_text) -> Iterator[dict[str, Any]]:
    base = {"run_id": run_id, "session_id": session, "agent_id": agent}
    call_no = 0

    def call(tool: str, args: Any, result: Any, error: Any = None) -> dict[str, Any]:
        nonlocal call_no
        call_no += 1
        return {"type": "tool_call", **base, "tool_call_id": f"{run_id}-c{call_no}", "tool_name": tool,
                "args": args, "result": result, "error": error}

    loop_at = rng.randrange(1, max(2, length // 2))
    fleet_at = rng.randrange(length) if fleet is not None else -1
    for step in range(length):
        if kind is not None and step == loop_at:
            yield from _loop(rng, kind, call, base, text)
            kind = None
        if step == fleet_at:
            tool, args, error = FLEET_FAILURES[fleet]  # type: ignore[index]
            for _ in range(rng.randrange(1, 4)):
                yield call(tool, dict(args), None, error)
        tool, args = _call(rng, text)
        yield call(tool, args, _result(rng, tool, text))


def _loop(rng: random.Random, kind: str, call, base: dict[str, Any], _text=_text) -> Iterator[dict[str, Any]]:
    if kind == "generic":
        tool, args = _call(rng, _text)
        result = _result(rng, tool, _text)
        for _ in range(rng.randrange(12, 25)):
            yield call(tool, args, result)
    elif kind == "poll":
        args = {"action": "poll", "sessionId": "glow-ridge", "timeout": 30000}
        result = {"content": [{"type": "text", "text": "(no new output)\n\nProcess still running."}],
                  "details": {"status": "running", "sessionId": "glow-ridge", "name": "npm run build"}}
        for _ in range(rng.randrange(12, 25)):
            yield call("process", args, result)
    elif kind == "pingpong":
        (tool_a, args_a), (tool_b, args_b) = _call(rng, _text), _call(rng, _text)
        result_a, result_b = _result(rng, tool_a, _text), _result(rng, tool_b, _text)
        for _ in range(rng.randrange(6, 12)):
            yield call(tool_a, args_a, result_a)
            yield call(tool_b, args_b, result_b)
    elif kind == "unknown":
        for _ in range(rng.randrange(8, 14)):
            yield call("tavily-search", {"query": _text(rng, 40)}, None, "Tool tavily-search not found")
    elif kind == "compaction":
        tool, args = _call(rng, _text)
        result = _result(rng, tool, _text)
        yield call(tool, args, result)
        yield {"type": "compaction_retry", **base}
        for _ in range(3):
            yield call(tool, args, result)
