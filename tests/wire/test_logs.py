"""Repeated Kafka client warnings and errors are rate-limited (streams.wire.logs)."""

from __future__ import annotations

import logging

from streams.wire.logs import KAFKA_CLIENT_LOGGERS, RepeatFilter, limit_kafka_client_logs


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


def test_one_record_per_template_and_interval_then_a_count_of_the_rest():
    now = [0.0]
    logger = logging.getLogger("test.logs.repeat")
    logger.propagate, logger.level = False, logging.DEBUG
    records, repeat = _Records(), RepeatFilter(10.0, clock=lambda: now[0])
    logger.addHandler(records)
    logger.addFilter(repeat)
    try:
        for second in range(25):  # a broker outage: the same error from two nodes, 4 times a second
            now[0] = float(second)
            for node in (1, 2) * 2:
                logger.error("Unable connect to node with id %s: %s", node, "refused")
            logger.warning("Got error 100% of the time")  # no args: not %-formatted
            logger.info("reconnecting")
        assert records.lines[:3] == ["ERROR Unable connect to node with id 1: refused",
                                     "WARNING Got error 100% of the time", "INFO reconnecting"]
        assert [line for line in records.lines if not line.startswith("INFO")] == [
            "ERROR Unable connect to node with id 1: refused",
            "WARNING Got error 100% of the time",
            "ERROR Unable connect to node with id 1: refused (and 39 more like it in the last 10 s)",
            "WARNING Got error 100% of the time (and 9 more like it in the last 10 s)",
            "ERROR Unable connect to node with id 1: refused (and 39 more like it in the last 10 s)",
            "WARNING Got error 100% of the time (and 9 more like it in the last 10 s)",
        ]
        assert records.lines.count("INFO reconnecting") == 25  # below WARNING: all of them
    finally:
        logger.removeHandler(records)
        logger.removeFilter(repeat)


def test_installed_once_on_every_aiokafka_logger():
    first = limit_kafka_client_logs()
    assert limit_kafka_client_logs() is first
    assert all(logging.getLogger(name).filters.count(first) == 1 for name in KAFKA_CLIENT_LOGGERS)
    import aiokafka.client
    import aiokafka.consumer.fetcher

    assert {aiokafka.client.log.name, aiokafka.consumer.fetcher.log.name} <= set(KAFKA_CLIENT_LOGGERS)
