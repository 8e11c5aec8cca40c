"""Fail-open, and what loopwatch learns of it: the calls a client let run without their verdict.

With ``on_timeout="allow"`` a runner runs a call whose verdict did not come.
So that loopwatch's state follows what really ran (docs/events-and-verdicts.md,
"Late calls"), :class:`~streams.runners.client.LoopwatchClient`:

* sends every ``tool_call`` with ``deadline`` (epoch ms, when the client
  stops waiting for its verdict) unless it has one;
* remembers the calls (record key and ``tool_call_id``) it let run without a
  verdict (a timeout, a failed send, Kafka unreachable) in :class:`LateCalls`,
  and sends their ``tool_result`` with ``ran_without_verdict: true``: the
  worker applies the call as executed (never as a block after the fact), its
  verdict ``late: true``;
* does not wait for the verdict of a ``tool_result`` with
  ``ran_without_verdict: true`` (set here or by the caller): the runner has
  already waited out one timeout for that call, so fail-open costs one timeout
  per call, not two. Its :class:`~streams.runners.verdict.Verdict` comes at
  once: ``allow``, ``record`` None, ``waited`` False
  (:attr:`~streams.runners.verdict.Verdict.late` True).

Invalid events and stopping the client are not covered: they raise.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, MutableMapping

__all__ = ["LateCalls", "MAX_LATE_CALLS"]

MAX_LATE_CALLS = 65_536  # calls run without a verdict whose result is still to be sent (oldest forgotten)


class LateCalls:
    """``(record key, tool_call_id)`` of the calls let run without a verdict, until their result is sent.

    Arguments:
        limit: calls remembered at most; the oldest is forgotten first (its result is then sent
            without ``ran_without_verdict``).
    """

    def __init__(self, limit: int = MAX_LATE_CALLS) -> None:
        self.limit = limit
        self._calls: OrderedDict[tuple[bytes, Any], None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._calls)

    def remember(self, key: bytes, call_id: str) -> None:
        """The call ``call_id`` of ``key`` runs without its verdict."""
        calls = self._calls
        calls[(key, call_id)] = None
        calls.move_to_end((key, call_id))
        if len(calls) > self.limit:
            calls.popitem(last=False)

    def mark_result(self, key: bytes, event: MutableMapping[str, Any]) -> None:
        """On the ``tool_result`` ``event`` of a remembered call: ``ran_without_verdict: true`` (unless the
        event says otherwise), and the call forgotten."""
        call = (key, event.get("tool_call_id"))
        if call in self._calls:
            del self._calls[call]
            event.setdefault("ran_without_verdict", True)
