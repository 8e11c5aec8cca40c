"""The Kafka client's repeated warnings and errors, rate-limited.

While a broker is down aiokafka logs the same few errors ("Unable connect to
node", "Unable to update metadata", "Failed fetch messages") for every
connection attempt, many times a second, which buries everything else. :class:`RepeatFilter` lets one record per logger and
message template through per interval and counts the rest in the next one
it lets through.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

__all__ = ["RepeatFilter", "limit_kafka_client_logs", "KAFKA_CLIENT_LOGGERS"]

KAFKA_CLIENT_LOGGERS = (
    "aiokafka", "aiokafka.conn", "aiokafka.cluster", "aiokafka.consumer.consumer",
    "aiokafka.consumer.fetcher", "aiokafka.consumer.group_coordinator", "aiokafka.producer.producer",
    "aiokafka.producer.sender", "aiokafka.admin.client",
)
"""aiokafka's loggers that warn of broker trouble (``aiokafka.client`` logs as ``aiokafka``): a logger's filters
see only its own records, not its children's."""


class RepeatFilter(logging.Filter):
    """Passes a WARNING-or-above record only if its (logger, message template) has not passed in the last
    ``interval_s`` seconds; the next one that passes says how many were held back. Lower levels all pass."""

    def __init__(self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._clock = clock
        self._passed: dict[tuple[str, str], tuple[float, int]] = {}  # -> (when it last passed, held back since)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, str(record.msg))
        now = self._clock()
        last = self._passed.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._passed[key] = (last[0], last[1] + 1)
            return False
        if last is not None and last[1]:  # the note has no "%": safe whether or not args format the message
            record.msg = f"{record.msg} (and {last[1]} more like it in the last {now - last[0]:.0f} s)"
        self._passed[key] = (now, 0)
        return True


def limit_kafka_client_logs(interval_s: float = 10.0) -> RepeatFilter:
    """Install one :class:`RepeatFilter` on every aiokafka logger (once per process); return it."""
    installed = getattr(limit_kafka_client_logs, "_filter", None)
    if installed is None:
        installed = limit_kafka_client_logs._filter = RepeatFilter(interval_s)  # type: ignore[attr-defined]
        for name in KAFKA_CLIENT_LOGGERS:
            logging.getLogger(name).addFilter(installed)
    return installed
