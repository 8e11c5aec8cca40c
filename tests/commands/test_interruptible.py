"""run_interruptible: a Ctrl-C ends a command within its bound even when a task will not end."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from streams.commands.interruptible import run_interruptible


async def _stubborn(cancelled: list[int]) -> None:
    """A task that outlives every cancellation, as a client's retry loop with the broker down can."""
    while True:
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            cancelled.append(1)


def test_returns_the_result_and_ends_the_tasks_left_behind():
    finished: list[str] = []

    async def helper() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            finished.append("helper")

    async def main() -> int:
        asyncio.get_running_loop().create_task(helper())
        await asyncio.sleep(0)
        return 42

    assert run_interruptible(main(), cleanup_s=5.0) == 42
    assert finished == ["helper"]


def test_ctrl_c_runs_mains_finally_and_gives_up_on_a_task_that_will_not_end():
    cancelled: list[int] = []
    cleaned: list[str] = []

    async def main() -> None:
        asyncio.get_running_loop().create_task(_stubborn(cancelled))
        try:
            await asyncio.sleep(0.1)
            raise KeyboardInterrupt  # as the signal handler raises it
        finally:
            cleaned.append("main")

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_interruptible(main(), cleanup_s=0.5)
    took = time.monotonic() - started
    assert cleaned == ["main"] and len(cancelled) >= 1  # cancelled, and it went on regardless
    assert took < 30  # two bounds of 0.5 s and scheduling, where asyncio.run would wait forever


@pytest.fixture
def _sigint_as_from_a_terminal():
    """SIGINT at Python's default, whatever this test run inherited (a background job may ignore it)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("_sigint_as_from_a_terminal")
def test_sigint_while_main_waits_cancels_it_and_gives_up_on_its_cleanup_after_the_bound():
    async def main() -> None:
        asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGINT)  # Ctrl-C
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(3600)  # e.g. a producer's stop waiting for a broker that is down

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_interruptible(main(), cleanup_s=0.5)
    assert time.monotonic() - started < 30


def test_the_programs_own_handlers_are_back_afterwards():
    before = signal.getsignal(signal.SIGINT)

    async def main() -> None:
        await asyncio.sleep(0)

    run_interruptible(main())
    assert signal.getsignal(signal.SIGINT) is before
