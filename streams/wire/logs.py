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

When a client cannot connect to any bootstrap address, aiokafka logs an ERROR
line per address ('Unable connect to "host:port": reason') and then raises
``KafkaConnectionError("Unable to bootstrap from [...]")``, which the command
that tried reports itself. :class:`BootstrapFailures` holds those lines back and
keeps their reasons for that one message (:func:`cannot_reach`), so a
command run with no broker says so once, in its own words.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Callable

__all__ = ["RepeatFilter", "BootstrapFailures", "limit_kafka_client_logs", "quiet_kafka_client_logs",
           "cannot_reach", "unreachable_reason", "KAFKA_CLIENT_LOGGERS", "FAUST_PRODUCER_LOGGER"]

KAFKA_CLIENT_LOGGERS = (
    "aiokafka", "aiokafka.conn", "aiokafka.cluster", "aiokafka.consumer.consumer",
    "aiokafka.consumer.fetcher", "aiokafka.consumer.group_coordinator", "aiokafka.producer.producer",
    "aiokafka.producer.sender", "aiokafka.admin.client",
)
"""aiokafka's loggers that warn of broker trouble (``aiokafka.client`` logs as ``aiokafka``): a logger's filters
see only its own records, not its children's."""

FAUST_PRODUCER_LOGGER = "faust.transport.producer"
"""Faust's producer buffer: "producer buffer full size N" (WARNING), then "producer flush took S" (INFO)."""

_BOOTSTRAP_FAILURE = 'Unable connect to "%s:%s": %s'
"""aiokafka.client's message (logger ``aiokafka``, ERROR) for a bootstrap address it cannot connect to
(aiokafka 0.8 to 0.14: ``AIOKafkaClient.bootstrap``)."""

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


class BootstrapFailures(logging.Filter):
    """Holds back aiokafka's ``Unable connect to "host:port": reason`` records (one per bootstrap address that
    refused, before ``KafkaConnectionError`` is raised), keeping the last reason per address in ``reasons``
    (``"host:port"`` -> text, e.g. ``[Errno 111] Connect call failed ('127.0.0.1', 9092)``). Every other
    record passes (aiokafka's "Unable connect to node with id N" after a bootstrap that worked among them)."""

    def __init__(self) -> None:
        super().__init__()
        self.reasons: dict[str, str] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _BOOTSTRAP_FAILURE and isinstance(record.args, tuple) and len(record.args) == 3:
            host, port, reason = record.args
            self.reasons[f"{host}:{port}"] = str(reason)
            return False
        return True


_held = BootstrapFailures()


def quiet_kafka_client_logs() -> None:
    """For a command line: aiokafka's bootstrap failures held back (the command reports them in one line with
    :func:`cannot_reach`), and its other repeated lines rate-limited (:func:`limit_kafka_client_logs`).
    Idempotent."""
    aiokafka = logging.getLogger("aiokafka")
    if _held not in aiokafka.filters:
        aiokafka.addFilter(_held)
    limit_kafka_client_logs()


def cannot_reach(bootstrap: str, exc: BaseException) -> str:
    """A command's one line for a client that could not bootstrap from ``bootstrap``: ``cannot reach Kafka at
    <bootstrap>: <why>``, why being the reasons :func:`quiet_kafka_client_logs` held back (``"host:port:
    reason"``, ``"; "``-joined, when several addresses failed), else the exception as ``"<type>: <text>"``
    (e.g. a timeout). Takes the held reasons (the next failure starts afresh)."""
    return f"cannot reach Kafka at {bootstrap}: {unreachable_reason(exc)}"


def unreachable_reason(exc: BaseException) -> str:
    """Why a Kafka client could not connect, for one line of our own: the bootstrap failures
    :func:`quiet_kafka_client_logs` held back since the last call (taken), else ``exc`` as ``"<type>: <text>"``."""
    reasons = _held.reasons
    _held.reasons = {}
    if len(reasons) == 1:
        return next(iter(reasons.values()))
    if reasons:
        return "; ".join(f"{where}: {why}" for where, why in reasons.items())
    text = str(exc)  # aiokafka's errors start with their class name already
    return text if text.startswith(type(exc).__name__) else f"{type(exc).__name__}: {text}"
