"""One input record through :meth:`streams.worker.processor.Processor.handle`, the worker's own path."""

from __future__ import annotations

from types import SimpleNamespace

from streams.worker.processor import Handled, Processor


def handle_one(processor: Processor, raw: bytes | None, key: bytes | None = None, offset: int = 0,
               topic: str = "events", partition: int = 0, timestamp: int | None = None) -> Handled:
    """What the worker publishes and stores for one record of ``topic``/``partition`` at ``offset``."""
    record = SimpleNamespace(key=key, value=raw, offset=offset, timestamp=timestamp)
    return processor.handle([(SimpleNamespace(topic=topic, partition=partition), [record])], now=0.0)
