"""The Kafka client's repeated warnings and errors, rate-limited.

While a broker is down aiokafka logs the same few errors ("Unable connect to
node", "Unable to update metadata", "Failed fetch messages") for every
connection attempt, many times a second, which buries everything else.
Under load Faust's producer buffer says "producer buffer full size 153" (and,
at INFO, how long the flush took) each time its back-pressure holds a stream
back: over a thousand lines in two minutes of the fleet benchmark.
:class:`RepeatFilter` lets one record per logger and message template through
per interval (numbers in a message built with an f-string count as the same
template) and counts the rest in the next one it lets through.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Callable

__all__ = ["RepeatFilter", "limit_kafka_client_logs", "KAFKA_CLIENT_LOGGERS", "FAUST_PRODUCER_LOGGER"]

KAFKA_CLIENT_LOGGERS = (
    "aiokafka", "aiokafka.conn", "aiokafka.cluster", "aiokafka.consumer.consumer",
    "aiokafka.consumer.fetcher", "aiokafka.consumer.group_coordinator", "aiokafka.producer.producer",
    "aiokafka.producer.sender", "aiokafka.admin.client",
)
"""aiokafka's loggers that warn of broker trouble (``aiokafka.client`` logs as ``aiokafka``): a logger's filters
see only its own records, not its children's."""

FAUST_PRODUCER_LOGGER = "faust.transport.producer"
"""Faust's producer buffer: "producer buffer full size N" (WARNING), then "producer flush took S" (INFO)."""

_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?")


class RepeatFilter(logging.Filter):
    """Passes a record at ``level`` or above only if its (logger, message template) has not passed in the last
    ``interval_s`` seconds; the next one that passes says how many were held back. Lower levels all pass.

    The template is the record's ``msg`` with its numbers taken out, so that a
    message formatted before logging ("... size 153") counts as one.
    """

    def __init__(self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 level: int = logging.WARNING) -> None:
        super().__init__()
        self.interval_s = interval_s
        self.level = level
        self._clock = clock
        self._passed: dict[tuple[str, str], tuple[float, int]] = {}  # -> (when it last passed, held back since)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.level:
            return True
        key = (record.name, _NUMBER.sub("#", str(record.msg)))
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
    """Install one :class:`RepeatFilter` on every aiokafka logger, and one from INFO up on Faust's producer
    buffer's (once per process); return the first."""
    installed = getattr(limit_kafka_client_logs, "_filter", None)
    if installed is None:
        installed = limit_kafka_client_logs._filter = RepeatFilter(interval_s)  # type: ignore[attr-defined]
        for name in KAFKA_CLIENT_LOGGERS:
            logging.getLogger(name).addFilter(installed)
        logging.getLogger(FAUST_PRODUCER_LOGGER).addFilter(RepeatFilter(interval_s, level=logging.INFO))
    return installed
