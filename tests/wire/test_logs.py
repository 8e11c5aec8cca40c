"""Repeated Kafka client warnings and errors are rate-limited (streams.wire.logs)."""

from __future__ import annotations

import logging

from streams.wire.logs import FAUST_PRODUCER_LOGGER, KAFKA_CLIENT_LOGGERS, RepeatFilter, limit_kafka_client_logs


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


def test_messages_formatted_before_logging_count_as_one_template_and_info_can_be_limited_too():
    # Faust's producer buffer: f"producer buffer full size {size}" (WARNING), f"producer flush took {s}" (INFO)
    now = [0.0]
    logger = logging.getLogger("test.logs.faust-producer")
    logger.propagate, logger.level = False, logging.DEBUG
    records, repeat = _Records(), RepeatFilter(10.0, clock=lambda: now[0], level=logging.INFO)
    logger.addHandler(records)
    logger.addFilter(repeat)
    try:
        for tick in range(120):  # 12 s of a buffer filling 10 times a second, 3 sizes each time
            now[0] = tick / 10
            for size in (101, 153, 2040):
                logger.warning(f"producer buffer full size {size}")
                logger.info(f"producer flush took {0.0123 * size}")
            logger.debug("sent")
        full = [line for line in records.lines if "buffer full" in line]
        took = [line for line in records.lines if "flush took" in line]
        assert full[0] == "WARNING producer buffer full size 101" and len(full) == len(took) == 2
        assert full[1] == "WARNING producer buffer full size 101 (and 299 more like it in the last 10 s)"
        assert records.lines.count("DEBUG sent") == 120
    finally:
        logger.removeHandler(records)
        logger.removeFilter(repeat)


def test_faust_producer_buffer_is_limited_from_info_up():
    limit_kafka_client_logs()
    filters = logging.getLogger(FAUST_PRODUCER_LOGGER).filters
    assert [f.level for f in filters if isinstance(f, RepeatFilter)] == [logging.INFO]
    import faust.transport.producer

    assert faust.transport.producer.logger.name == FAUST_PRODUCER_LOGGER
