"""Wasted tokens: an estimate of the tokens the loops cost, where the input carries usage.

Recorded sessions say how many tokens each model turn took: Claude Code writes the API's
``usage`` on every assistant record, Codex a ``token_count`` event after each model response.
The importers put it on the turn's tool calls as ``usage`` (docs/events-and-verdicts.md)::

    {"turn": <the model response's id>, "input_tokens": N, "cached_input_tokens": C, "output_tokens": M}

``input_tokens`` counts every token the model read for the turn, ``cached_input_tokens`` those of
them read from the prompt cache (billed lower), ``output_tokens`` what it wrote (reasoning
included). A turn that asked for several tool calls is one usage shared by them.

The estimate (:meth:`Usage.estimate`): each tool call costs an equal share of its turn's tokens
(input + output, divided by the calls of that turn in the input); the wasted tokens are the
shares of the wasted calls: calls a detector flagged (warned or suppressed: they ran), calls
blocked or aborted, and calls refused because their run had ended (the model spent the turn
asking for them either way). It is a lower bound of what a loop cost (the turns after a blocked
call, spent on the block's message, are not counted) and says nothing of calls without usage:
those are counted apart.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["Usage", "turn_usage"]


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def turn_usage(record: Mapping[str, Any]) -> tuple[str, int, int, int] | None:
    """``(turn key, input, cached input, output)`` of a tool call record's ``usage``, or None when it has none
    (the key includes the session: turn ids are unique per session only)."""
    usage = record.get("usage")
    if not isinstance(usage, Mapping) or usage.get("turn") is None:
        return None
    return (f"{record.get('session_id')}\x1f{usage['turn']}", _count(usage.get("input_tokens")),
            _count(usage.get("cached_input_tokens")), _count(usage.get("output_tokens")))


class Usage:
    """Tool calls by model turn, and which of them were wasted (see the module docstring)."""

    def __init__(self) -> None:
        self.turns: dict[str, list[int]] = {}  # turn key -> [input, cached input, output, calls, wasted calls]
        self.wasted_without_usage = 0  # wasted calls whose records carry no usage

    def add_call(self, record: Mapping[str, Any], wasted: bool) -> str | None:
        """Count a tool call record; its turn key (None without usage), for :meth:`waste`."""
        found = turn_usage(record)
        if found is None:
            self.wasted_without_usage += wasted
            return None
        key, tokens_in, cached, tokens_out = found
        turn = self.turns.get(key)
        if turn is None:
            turn = self.turns[key] = [tokens_in, cached, tokens_out, 0, 0]
        turn[3] += 1
        turn[4] += wasted
        return key

    def waste(self, turn: str | None) -> None:
        """A call counted as not wasted was wasted after all (an abort on its result)."""
        if turn is None:
            self.wasted_without_usage += 1
        elif turn in self.turns:
            self.turns[turn][4] += 1

    def __bool__(self) -> bool:
        return bool(self.turns)

    def estimate(self) -> dict[str, int]:
        """``{turns, calls, tokens, input, cached, output, wasted_calls, wasted, wasted_input, wasted_cached,
        wasted_output, wasted_without_usage}``: totals over the turns with usage, and the wasted calls'
        shares (rounded to whole tokens)."""
        out = dict.fromkeys(("calls", "input", "cached", "output", "wasted_calls"), 0)
        shares = [0.0, 0.0, 0.0]
        for tokens_in, cached, tokens_out, calls, wasted in self.turns.values():
            out["calls"] += calls
            out["input"] += tokens_in
            out["cached"] += cached
            out["output"] += tokens_out
            out["wasted_calls"] += wasted
            if wasted:
                share = wasted / calls
                shares[0] += tokens_in * share
                shares[1] += cached * share
                shares[2] += tokens_out * share
        wasted_in, wasted_cached, wasted_out = (round(x) for x in shares)
        return {"turns": len(self.turns), **out, "tokens": out["input"] + out["output"],
                "wasted": wasted_in + wasted_out, "wasted_input": wasted_in, "wasted_cached": wasted_cached,
                "wasted_output": wasted_out, "wasted_without_usage": self.wasted_without_usage}
