"""The rolling detectors, their precedence, messages and warning keys (docs/detection-rules.md §5).

:func:`detect` reads the session history *before* the call it judges is
recorded, so the n-th identical call sees n - 1 records (docs/detection-rules.md §3).

Under the 2026.9.6 profile (``settings.is_2026_9``, docs/detection-rules.md §11.5) the
no-progress streak counts veto records, ``exec`` has a second, terminal-failure
walk, the argument-churn warning exists and two criticals read differently; each
such rule sits beside the 2026.7 rule it changes.

Size: the precedence table of §5.2 is one function, and each 2026.9.6 measure (§11.5) is kept beside the
2026.7 rule it changes with the message texts both releases print: split, a rule and its variant would sit
in two files.
"""

from __future__ import annotations

from typing import Any

from .config import LoopDetectionSettings
from .outcomes_2026_9 import KIND_TERMINAL_EXEC_FAILURE, KIND_VETO
from .state import CallRecord, SessionState, hash_key

__all__ = [
    "Detection",
    "detect",
    "GENERIC_REPEAT",
    "KNOWN_POLL_NO_PROGRESS",
    "PING_PONG",
    "UNKNOWN_TOOL_REPEAT",
    "GLOBAL_CIRCUIT_BREAKER",
    "ARGUMENT_CHURN",
    "WARNING",
    "CRITICAL",
    "POLL_TOOLS",
]

GENERIC_REPEAT = "generic_repeat"
KNOWN_POLL_NO_PROGRESS = "known_poll_no_progress"
PING_PONG = "ping_pong"
UNKNOWN_TOOL_REPEAT = "unknown_tool_repeat"
GLOBAL_CIRCUIT_BREAKER = "global_circuit_breaker"
ARGUMENT_CHURN = "argument_churn"  # 2026.9.6 only (docs/detection-rules.md §11.5.2 rule 8)

WARNING = "warning"
CRITICAL = "critical"


class Detection:
    """A stuck verdict of one detector (docs/detection-rules.md §5.2).

    ``evidence`` is the history records behind the detection, oldest first.
    ``liveness_signal`` (2026.9.6 only) is ``"argument_churn"`` when argument
    churn accompanies a warning (docs/detection-rules.md §11.5.2 rules 4, 6 and 8).
    """

    __slots__ = ("level", "detector", "count", "message", "warning_key", "paired_tool_name", "evidence",
                 "liveness_signal")

    def __init__(self, level: str, detector: str, count: int, message: str, warning_key: str,
                 paired_tool_name: str | None, evidence: list[CallRecord], liveness_signal: str | None = None) -> None:
        self.level = level
        self.detector = detector
        self.count = count
        self.message = message
        self.warning_key = warning_key
        self.paired_tool_name = paired_tool_name
        self.evidence = evidence
        self.liveness_signal = liveness_signal

    def as_dict(self) -> dict[str, Any]:
        """The ``detection`` field of a verdict (docs/detection-rules.md §10)."""
        out = {
            "stuck": True,
            "level": self.level,
            "detector": self.detector,
            "count": self.count,
            "message": self.message,
            "warning_key": self.warning_key,
        }
        if self.paired_tool_name is not None:
            out["paired_tool_name"] = self.paired_tool_name
        if self.liveness_signal is not None:
            out["liveness_signal"] = self.liveness_signal
        return out


# Messages, verbatim (docs/detection-rules.md §5.3).
def _unknown_tool_critical(name: str, count: int) -> str:
    return (f"CRITICAL: attempted unavailable tool {name} {count} times. "
            "Stop retrying that missing tool and answer without it.")


def _global_critical(tool: str, count: int) -> str:
    return (f"CRITICAL: {tool} has repeated identical no-progress outcomes {count} times. "
            "Session execution blocked by global circuit breaker to prevent runaway loops.")


def _global_critical_2026_9(tool: str, count: int) -> str:
    return (f"CRITICAL: {tool} repeated identical no-progress outcomes {count} times. "
            "Session execution blocked by global circuit breaker to prevent runaway loops.")


def _poll_critical(tool: str, count: int) -> str:
    return (f"CRITICAL: Called {tool} with identical arguments and no progress {count} times. "
            "This appears to be a stuck polling loop. Session execution blocked to prevent resource waste.")


def _poll_warning(tool: str, count: int) -> str:
    return (f"WARNING: You have called {tool} {count} times with identical arguments and no progress. "
            "Stop polling and either (1) increase wait time between checks, or (2) report the task as "
            "failed if the process is stuck.")


def _ping_pong_critical(count: int) -> str:
    return (f"CRITICAL: You are alternating between repeated tool-call patterns ({count} consecutive calls) "
            "with no progress. This appears to be a stuck ping-pong loop. Session execution blocked to "
            "prevent resource waste.")


def _ping_pong_warning(count: int) -> str:
    return (f"WARNING: You are alternating between repeated tool-call patterns ({count} consecutive calls). "
            "This looks like a ping-pong loop; stop retrying and report the task as failed.")


def _generic_critical(tool: str, count: int) -> str:
    return (f"CRITICAL: Called {tool} with identical arguments and identical outcomes {count} times. "
            "Session execution blocked to prevent runaway loops.")


def _generic_critical_2026_9(tool: str, count: int) -> str:
    return (f"CRITICAL: Called {tool} with identical outcomes {count} times. "
            "Session execution blocked to prevent runaway loops.")


def _churn_warning(tool: str, variants: int, count: int) -> str:
    return (f"WARNING: {tool} has cycled through {variants} repeated argument patterns with the same stable "
            f"outcome {count} times. Continued churn is treated as stalled run activity, but this tool call "
            "remains allowed.")


def _generic_warning(tool: str, count: int) -> str:
    return (f"WARNING: You have called {tool} {count} times with identical arguments. "
            "If this is not making progress, stop retrying and report the task as failed.")


POLL_TOOLS = frozenset({"command_status", "process"})
"""The tools a call of which can be a known poll (:func:`is_known_poll` is False for any other)."""


def is_known_poll(tool: str, args: Any) -> bool:
    """docs/detection-rules.md §5.1: ``command_status``, or ``process`` with args ``action`` ``poll``/``log``."""
    if tool == "command_status":
        return True
    return tool == "process" and isinstance(args, dict) and args.get("action") in ("poll", "log")


def detect(state: SessionState, run_id: str | None, tool: str, args_hash: str, known_poll: bool,
           settings: LoopDetectionSettings, call_key: str | None = None) -> Detection | None:
    """Run the detectors for one call (docs/detection-rules.md §5).

    Arguments:
        state: the session state; its history (newest last) does not hold the judged call yet.
        run_id: the call's trimmed run id (None when blank); only records of
            that run are read (docs/detection-rules.md §8.2).
        tool, args_hash: the call's normalised tool name and args hash.
        known_poll: :func:`is_known_poll` of the call.
        call_key: ``hash_key(args_hash)`` when the caller has it already.
        settings: the resolved settings of the call's agent; the caller checks
            ``settings.detectors_enabled``.
    Returns:
        The first matching rule of the precedence table (docs/detection-rules.md §5.2), or None.
    """
    history = state.history
    if call_key is None:
        call_key = hash_key(args_hash)
    is_2026_9 = settings.is_2026_9
    # 2026.9.6's exec terminal-failure walk reads records of other args too (from the run's newest record on)
    other_args_count = is_2026_9 and tool == "exec"
    if call_key not in state.args_counts:
        # Nothing repeats this call: no streak, no recent count and no ping-pong
        # (which needs this args hash in the history). Only an unknown-tool
        # streak of the run's newest records can still fire (2026.9.6: or exec's
        # terminal-failure walk, which only a critical can come of here).
        newest = state.newest_of_run.get(run_id)
        if newest is None or newest.tool != tool:
            return None
        if newest.unknown_tool is None and (
                not other_args_count
                or _terminal_streak(history, run_id, tool, call_key)[0] < settings.critical_threshold):
            return None
    scoped = [record for record in history if record.run_id == run_id]
    if not scoped:
        return None
    newest = scoped[-1]
    other_args_count = other_args_count and newest.tool == tool
    # Records of this exact call (args hashes embed the tool name).
    recent = [record for record in scoped if record.args_key == call_key]
    unknown_possible = newest.tool == tool and newest.unknown_tool is not None
    if not recent and not unknown_possible and not other_args_count:
        # Nothing repeats this call: no streak, no recent count, and no
        # ping-pong either (that needs this call's args hash in the history).
        return None

    # recentCount, the no-progress streak and the unknown-tool streak (docs/detection-rules.md §5.1).
    if is_2026_9:
        no_progress, streak, latest_result = _streak_2026_9(recent)
        if other_args_count:
            terminal = _terminal_streak(scoped, run_id, tool, call_key)
            if terminal[0] > no_progress:
                no_progress, streak, latest_result = terminal
    else:
        streak = []
        latest_result = None
        for record in reversed(recent):
            result = record.result_key
            if result is None:
                continue
            if latest_result is None:
                latest_result = result
            elif result != latest_result:
                break
            streak.append(record)
        if streak:
            latest_result = streak[0].result_hash  # the newest resulted record keeps its full hash
        no_progress = len(streak)
    unknown: list[CallRecord] = []
    unknown_name = newest.unknown_tool
    if unknown_possible:
        for record in reversed(scoped):
            if record.tool != tool or record.unknown_tool != unknown_name:
                break
            unknown.append(record)

    if unknown and len(unknown) >= settings.unknown_tool_threshold:
        count = len(unknown)
        return Detection(CRITICAL, UNKNOWN_TOOL_REPEAT, count, _unknown_tool_critical(unknown_name, count),
                         f"unknown-tool:{tool}:{unknown_name or 'unknown'}", None, unknown[::-1])

    result_key = latest_result if latest_result is not None else "none"
    if no_progress >= settings.global_circuit_breaker_threshold:
        message = (_global_critical_2026_9 if is_2026_9 else _global_critical)(tool, no_progress)
        return Detection(CRITICAL, GLOBAL_CIRCUIT_BREAKER, no_progress, message,
                         f"global:{tool}:{args_hash}:{result_key}", None, streak[::-1])

    if known_poll and settings.known_poll_no_progress:
        key = f"poll:{tool}:{args_hash}:{result_key}"
        if no_progress >= settings.critical_threshold:
            return Detection(CRITICAL, KNOWN_POLL_NO_PROGRESS, no_progress, _poll_critical(tool, no_progress),
                             key, None, streak[::-1])
        if no_progress >= settings.warning_threshold:
            return Detection(WARNING, KNOWN_POLL_NO_PROGRESS, no_progress, _poll_warning(tool, no_progress),
                             key, None, streak[::-1], _liveness(is_2026_9, scoped, tool, call_key, recent))

    if settings.ping_pong:
        detection = _ping_pong(scoped, args_hash, call_key, settings)
        if detection is not None:
            if detection.level == WARNING:
                detection.liveness_signal = _liveness(is_2026_9, scoped, tool, call_key, recent)
            return detection

    if not known_poll and settings.generic_repeat:
        if no_progress >= settings.critical_threshold:
            message = (_generic_critical_2026_9 if is_2026_9 else _generic_critical)(tool, no_progress)
            return Detection(CRITICAL, GENERIC_REPEAT, no_progress, message,
                             f"generic:{tool}:{args_hash}:{result_key}", None, streak[::-1])
    if is_2026_9 and len(recent) >= _CHURN_STABLE:  # docs/detection-rules.md §11.5.2 rule 8, not gated by knownPoll
        churn = _argument_churn(scoped, tool, call_key)
        if churn is not None and churn[0] >= settings.warning_threshold:
            count, variants, records = churn
            return Detection(WARNING, ARGUMENT_CHURN, count, _churn_warning(tool, variants, count),
                             f"argument-churn:{tool}", None, records[::-1], ARGUMENT_CHURN)
    if not known_poll and settings.generic_repeat:
        if len(recent) >= settings.warning_threshold:
            return Detection(WARNING, GENERIC_REPEAT, len(recent), _generic_warning(tool, len(recent)),
                             f"generic:{tool}:{args_hash}", None, recent)
    return None


# ------------------------------------------------------------------ 2026.9.6 measures (docs/detection-rules.md §11.5.1)

def _streak_2026_9(recent: list[CallRecord]) -> tuple[int, list[CallRecord], str | None]:
    """noProgressStreak under 2026.9.6: veto records count, each joining the match that follows it.

    Walks this call's records newest first: a veto adds 1 to a pending count;
    records without a result hash are skipped; the first resulted record sets the
    reference (streak = pending + 1), each later one with the same hash adds
    pending + 1, a different hash stops (vetoes since the last match dropped).
    With no resulted record the count is the number of vetoes.

    Returns ``(count, records counted newest first, latest result hash or None)``.
    """
    pending: list[CallRecord] = []
    streak: list[CallRecord] = []
    reference: CallRecord | None = None
    for record in reversed(recent):
        if record.kind == KIND_VETO:
            pending.append(record)
            continue
        result = record.result_key
        if result is None:
            continue
        if reference is None:
            reference = record
        elif result != reference.result_key:
            break
        streak += pending
        streak.append(record)
        pending = []
    if reference is None:
        return len(pending), pending, None
    return len(streak), streak, reference.result_hash


def _terminal_streak(history: list[CallRecord], run_id: str | None, tool: str,
                     call_key: str) -> tuple[int, list[CallRecord], str | None]:
    """The exec terminal-failure walk (docs/detection-rules.md §11.5.1): one failure across argument changes.

    Newest first over the records of run ``run_id`` in ``history``: stop at another tool; veto records of
    any args go to the pending count; records without a result hash are skipped;
    a resulted record that is not a terminal exec failure stops the walk. The
    first terminal failure is the reference (its args may differ from the
    call's); later ones continue the streak when their result hash or failure
    identity equals the reference's. Once the walk has met a terminal failure
    of other args (the reference included), it stops at the next one of the
    current args: vetoes and pending records play no part in that rule.

    Returns ``(count, records counted newest first, the reference's result hash)``; count 0 without a reference.
    """
    pending: list[CallRecord] = []
    streak: list[CallRecord] = []
    reference: CallRecord | None = None
    left_current = False
    for record in reversed(history):
        if record.run_id != run_id:
            continue
        if record.tool != tool:
            break
        if record.kind == KIND_VETO:
            pending.append(record)
            continue
        if record.result_key is None:
            continue
        if record.kind != KIND_TERMINAL_EXEC_FAILURE:
            break
        if record.args_key != call_key:
            left_current = True
        elif left_current:
            break
        if reference is None:
            reference = record
        elif record.result_key != reference.result_key and record.failure_key != reference.failure_key:
            break
        streak += pending
        streak.append(record)
        pending = []
    if reference is None:
        return 0, [], None
    return len(streak), streak, reference.result_hash


_CHURN_STABLE = 3  # records that make an args variant stable


def _argument_churn(scoped: list[CallRecord], tool: str, call_key: str) -> tuple[int, int, list[CallRecord]] | None:
    """argumentChurn (docs/detection-rules.md §11.5.1): no-progress outcomes cycling through a few argument variants.

    Newest first over the run's records: stop at another tool; skip records
    without a result hash; stop at a record that is not no-progress, and at one
    whose args already showed another result hash. Churn needs two or more
    stable variants (3+ records each), no other counted record, one shared
    result hash, and 3+ records of the current args.

    Returns ``(count, stable variants, records counted newest first)``, or None for no churn.
    """
    variants: dict[str, list] = {}  # args key -> [result key, records]
    counted: list[CallRecord] = []
    for record in reversed(scoped):
        if record.tool != tool:
            break
        result = record.result_key
        if result is None:
            continue
        if not record.no_progress:
            break
        variant = variants.get(record.args_key)
        if variant is None:
            variants[record.args_key] = [result, 1]
        elif variant[0] != result:
            break
        else:
            variant[1] += 1
        counted.append(record)
    if len(variants) < 2 or any(n < _CHURN_STABLE for _, n in variants.values()):
        return None
    if len({result for result, _ in variants.values()}) != 1:
        return None
    current = variants.get(call_key)
    if current is None or current[1] < _CHURN_STABLE:
        return None
    return len(counted), len(variants), counted


def _liveness(is_2026_9: bool, scoped: list[CallRecord], tool: str, call_key: str,
              recent: list[CallRecord]) -> str | None:
    """docs/detection-rules.md §11.5.2 rules 4 and 6: ``argument_churn`` beside a warning when churn counts 10 or more."""
    if not is_2026_9 or len(recent) < _CHURN_STABLE:
        return None
    churn = _argument_churn(scoped, tool, call_key)
    return ARGUMENT_CHURN if churn is not None and churn[0] >= 10 else None


def _ping_pong(scoped: list[CallRecord], args_hash: str, call_key: str,
               settings: LoopDetectionSettings) -> Detection | None:
    """docs/detection-rules.md §5.1 pingPong (no pattern when the paired call's tool name is blank) and rules 5-6 of §5.2."""
    last = scoped[-1]
    last_sig = last.args_key
    other = None
    for record in reversed(scoped):
        if record.args_key != last_sig:
            other = record
            break
    # Only the other side's tool name is checked: a blank one (a whitespace-only
    # tool_name normalises to "") ends the pattern, a blank one on ``last`` does not.
    if other is None or call_key != other.args_key or not other.tool:
        return None
    other_sig = other.args_key
    tail = 0
    expected = last_sig
    for record in reversed(scoped):
        if record.args_key != expected:
            break
        tail += 1
        expected = other_sig if expected == last_sig else last_sig
    if tail < 2:
        return None
    count = tail + 1
    if count < settings.warning_threshold:
        return None
    tail_records = scoped[-tail:]
    key = "pingpong:" + "|".join(sorted((args_hash, last.args_hash), key=_utf16))
    if count >= settings.critical_threshold and _no_progress_evidence(tail_records, last_sig):
        return Detection(CRITICAL, PING_PONG, count, _ping_pong_critical(count), key, last.tool, tail_records)
    return Detection(WARNING, PING_PONG, count, _ping_pong_warning(count), key, last.tool, tail_records)


def _no_progress_evidence(tail: list[CallRecord], last_sig: str) -> bool:
    results: dict[bool, set[str]] = {True: set(), False: set()}
    for record in tail:
        if record.result_key is None:
            return False
        results[record.args_key == last_sig].add(record.result_key)
    return len(results[True]) == 1 and len(results[False]) == 1


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")
