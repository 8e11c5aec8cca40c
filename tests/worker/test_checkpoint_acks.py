"""Step (a) of a checkpoint: acknowledgements awaited in order, one failure reported once."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from streams.worker.checkpoint import _all_acknowledged


def test_first_failure_raised_and_the_others_not_logged_as_never_retrieved() -> None:
    logged: list[str] = []

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: logged.append(context["message"]))
        done, first, second, late = (loop.create_future() for _ in range(4))
        done.set_result("ok")
        first.set_exception(RuntimeError("broker down"))
        second.set_exception(RuntimeError("broker down too"))
        with pytest.raises(RuntimeError, match="^broker down$"):
            await _all_acknowledged([done, first, second, late])
        late.set_exception(RuntimeError("failed after the first"))  # still in flight when the first failed
        futures: list[Any] = [done, first, second, late]
        await asyncio.sleep(0)
        del futures, done, first, second, late
        gc.collect()

    asyncio.run(run())
    assert logged == []


def test_without_marking_asyncio_would_log_them() -> None:
    """The control: the same unawaited failure is logged, so the test above can fail."""
    logged: list[str] = []

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: logged.append(context["message"]))
        future = loop.create_future()
        future.set_exception(RuntimeError("never looked at"))
        del future
        gc.collect()

    asyncio.run(run())
    assert logged == ["Future exception was never retrieved"]


def test_all_awaited_in_order_when_none_fails() -> None:
    async def run() -> list[str]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(3)]
        seen: list[str] = []
        for index, future in enumerate(futures):
            future.add_done_callback(lambda f, i=index: seen.append(f"acked {i}"))
        waiter = asyncio.ensure_future(_all_acknowledged(futures))
        for future in reversed(futures):
            future.set_result(None)
            await asyncio.sleep(0)
            seen.append(f"done: {waiter.done()}")
        await waiter
        return seen

    assert asyncio.run(run()) == ["acked 2", "done: False", "acked 1", "done: False", "acked 0", "done: True"]
