"""Shared pytest fixtures.

Kafka: tests marked ``kafka`` run against the real broker of deploy/kafka/kafka.sh (make test
starts it). They FAIL, never skip, when it is unreachable: a silently skipped broker suite
would let CI go green without ever talking to Kafka.
"""

import asyncio
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator

import pytest

KAFKA_BOOTSTRAP_DEFAULT = "127.0.0.1:9092"


async def _kafka_answers(bootstrap: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await admin.start()  # bootstraps: connect + ApiVersions + Metadata
        await admin.list_topics()
    finally:
        await admin.close()


# Topics the tests create (unique_topic, worker_harness, ...) carry this session's tag and are
# removed again after the session, so a long-lived development broker does not collect them;
# the tag keeps a session from deleting the topics of another one running at the same time.
SESSION_TAG = os.environ.setdefault("LOOPWATCH_TEST_SESSION", uuid.uuid4().hex[:6])


def topic_tag() -> str:
    """A fresh tag for a test's topics and app ids: this session's tag, then a random part."""
    return SESSION_TAG + uuid.uuid4().hex[:6]


async def _topics(bootstrap: str) -> set[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def _delete_topics(bootstrap: str, names: set[str]) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    await admin.start()
    try:
        await admin.delete_topics(sorted(names))
    finally:
        await admin.close()


@pytest.fixture(scope="session", autouse=True)
def _own_gateway_token_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests never read or write the user's gateway token file (~/.config/loopwatch/gateway-token)."""
    before = os.environ.get("LOOPWATCH_GATEWAY_TOKEN_FILE")
    os.environ["LOOPWATCH_GATEWAY_TOKEN_FILE"] = str(tmp_path_factory.mktemp("token") / "gateway-token")
    yield
    if before is None:
        os.environ.pop("LOOPWATCH_GATEWAY_TOKEN_FILE", None)
    else:
        os.environ["LOOPWATCH_GATEWAY_TOKEN_FILE"] = before


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap string of the test broker (env LOOPWATCH_KAFKA_BOOTSTRAP), checked once.

    The topics the session's tests create are deleted at the end of the session.
    """
    bootstrap = os.environ.get("LOOPWATCH_KAFKA_BOOTSTRAP", KAFKA_BOOTSTRAP_DEFAULT)
    try:
        asyncio.run(asyncio.wait_for(_kafka_answers(bootstrap), 15))
        before = asyncio.run(_topics(bootstrap))
    except Exception as exc:  # refused, timeout, not a Kafka broker, ...
        detail = str(exc) or type(exc).__name__
    else:
        yield bootstrap
        try:
            created = {t for t in asyncio.run(_topics(bootstrap)) - before if SESSION_TAG in t}
            if created:
                asyncio.run(_delete_topics(bootstrap, created))
        except Exception:  # cleaning up must never fail the run
            pass
        return
    # outside the except block: no chained traceback, just the message
    pytest.fail(
        f"broker not reachable at {bootstrap}: start it with deploy/kafka/kafka.sh start ({detail})",
        pytrace=False,
    )


@pytest.fixture(autouse=True)
def _kafka_marker_needs_broker(request: pytest.FixtureRequest) -> None:
    # A test marked kafka fails with the message above even if it never asks for kafka_bootstrap.
    if request.node.get_closest_marker("kafka") is not None:
        request.getfixturevalue("kafka_bootstrap")


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test (or earlier run against a long-lived broker) uses."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", request.node.name)[:180]  # Kafka: [A-Za-z0-9._-], <=249
    return f"test.{name}.{topic_tag()}"


@pytest.fixture
def logs_of(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[str, int], None]]:
    """``logs_of(name, level)``: caplog gets what logger ``name`` says at ``level`` and above, whatever an
    earlier test did to logging. A worker started in this process configures logging with Faust's dictConfig,
    which disables the loggers existing then, and a logger that does not propagate never reaches caplog's
    root handler: until the test ends the logger is enabled, caplog's handler is on it, and it does not
    propagate (each record reaches caplog once)."""
    undo: list[Callable[[], None]] = []

    def capture(name: str, level: int = logging.WARNING) -> None:
        logger = logging.getLogger(name)
        disabled, former, propagate = logger.disabled, logger.level, logger.propagate
        logger.disabled, logger.propagate = False, False
        logger.setLevel(level)
        logger.addHandler(caplog.handler)
        caplog.handler.setLevel(level)

        def restore() -> None:
            logger.removeHandler(caplog.handler)
            logger.disabled, logger.level, logger.propagate = disabled, former, propagate
        undo.append(restore)

    yield capture
    for restore in reversed(undo):
        restore()
