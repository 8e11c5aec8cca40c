"""What the model sees under 2026.9.6: block texts of critical-tool-loop recovery and the warning note.

Verbatim texts of OpenClaw 2026.9.6 (docs/detection-rules.md §11.3.1-§11.3.3; the only model-visible
strings that profile adds). The engine puts them in a verdict's ``block_text``
and ``warning.note``; integrations hand them to the model (CONTRACTS item 2).
"""

from __future__ import annotations

__all__ = ["RECOVERY_SUFFIX", "TERMINAL_SUFFIX", "SIBLING_RECOVERY", "SIBLING_TERMINAL", "RUN_STOPPED_MESSAGE",
           "block_text", "warning_note"]

# §3.3: appended to the detection message for the call that triggered the block
RECOVERY_SUFFIX = ("Do not repeat this exact tool action. Reassess the task. You may answer the user, ask for "
                   "clarification, or continue with a different tool or different arguments.")
TERMINAL_SUFFIX = ("Critical tool-loop recovery failed because another critical loop was detected. "
                   "This run is stopping now.")
# §3.2: the text of a call that is not the block's recorded call (a batch sibling, or a call without an id)
SIBLING_RECOVERY = ("This tool was not executed because another call in the batch triggered critical tool-loop "
                    "recovery. Reassess the task before choosing the next action.")
SIBLING_TERMINAL = ("This tool was not executed because another call in the batch repeated a critical tool loop. "
                    "This run is stopping now.")
# §3.3: the assistant message a terminal block ends the run with
RUN_STOPPED_MESSAGE = ("OpenClaw stopped this run because tool-loop recovery encountered another critical loop. "
                       "No blocked tool action was executed.")


def block_text(message: str, terminal: bool, has_call_id: bool) -> str:
    """The tool result text of a vetoed call (§3.1 step 3, §3.3).

    Arguments:
        message: the detection message (the verdict's ``block_reason``).
        terminal: the run's recovery flag was already set (the second critical of the attempt).
        has_call_id: the call carries a tool-call id (``""`` counts): only such a call equals the id the
            block recorded and gets ``message`` with the suffix; one without gets the sibling text.
    """
    if not has_call_id:
        return SIBLING_TERMINAL if terminal else SIBLING_RECOVERY
    return f"{message}\n\n{TERMINAL_SUFFIX if terminal else RECOVERY_SUFFIX}"


def warning_note(count: int) -> str:
    """The note appended to the tool result of a call whose warning was emitted (§3.1 step 4)."""
    return (f"[System note: Tool-loop warning after {count} repeated calls. Change your approach or stop if you are "
            "not making progress.]")
