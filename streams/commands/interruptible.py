"""Running a command's coroutine so that Ctrl-C ends it within a bound, whatever Kafka does.

``asyncio.run`` cancels the tasks left at the end and waits for every one of them without a limit. With
the broker down, aiokafka's clients keep tasks (a metadata refresh, a sender) that can take tens of seconds
to end after their cancellation, or never end: a Ctrl-C of ``loopwatch demo`` during an outage then
hung. :func:`run_interruptible` gives the main coroutine and the rest ``cleanup_s`` each, then leaves
whatever still runs to the process's exit.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any, Coroutine, TypeVar

__all__ = ["run_interruptible"]

T = TypeVar("T")


def run_interruptible(main: Coroutine[Any, Any, T], cleanup_s: float = 10.0) -> T:
    """Run ``main`` in a new event loop and return its result.

    On ``KeyboardInterrupt`` (Ctrl-C, or a signal handler raising it), ``main`` is cancelled and given
    ``cleanup_s`` seconds for its ``finally`` blocks; then the exception propagates. Tasks still pending
    at the end are cancelled and given ``cleanup_s`` seconds more; what outlives that is abandoned, silently.

    Raises:
        whatever ``main`` raises, and ``KeyboardInterrupt``.
    """
    loop = asyncio.new_event_loop()
    previous = _interrupt_between_steps(loop)
    task = loop.create_task(main)
    try:
        return loop.run_until_complete(task)
    except KeyboardInterrupt:
        task.cancel()
        _wait(loop, [task], cleanup_s)
        raise
    finally:
        for signum, handler in previous.items():
            loop.remove_signal_handler(signum)
            signal.signal(signum, handler)
        rest = [other for other in asyncio.all_tasks(loop) if not other.done()]
        for other in rest:
            other.cancel()
        _wait(loop, rest, cleanup_s)
        if any(not other.done() for other in asyncio.all_tasks(loop)):  # cleanup may have started more
            loop.set_exception_handler(lambda _loop, _context: None)  # no "Task was destroyed" at exit
        else:
            _wait(loop, [loop.create_task(loop.shutdown_asyncgens())], cleanup_s)
        loop.close()


def _interrupt_between_steps(loop: asyncio.AbstractEventLoop) -> dict[int, Any]:
    """Have SIGINT (and SIGTERM, SIGHUP where the program handles them) raise ``KeyboardInterrupt`` from
    the event loop, between task steps, rather than inside whatever coroutine runs: a coroutine interrupted
    mid-step can await in its ``finally`` and never let the exception out. Returns the handlers replaced."""
    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        handler = signal.getsignal(signum)
        if signum != signal.SIGINT and not callable(handler):
            continue  # left as it is (default: the process ends; ignored: ignored)
        if signum == signal.SIGINT and handler is signal.SIG_IGN:
            continue  # a background job of a non-interactive shell
        try:
            loop.add_signal_handler(signum, _raise_interrupt)
        except (ValueError, RuntimeError):  # not the main thread
            continue
        previous[signum] = handler
    return previous


def _raise_interrupt() -> None:
    raise KeyboardInterrupt


def _wait(loop: asyncio.AbstractEventLoop, tasks: list[asyncio.Task], seconds: float) -> None:
    if tasks:
        try:
            loop.run_until_complete(asyncio.wait(tasks, timeout=seconds))
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting
            pass
