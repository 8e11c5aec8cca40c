"""Worker settings: defaults, environment, and the `loopwatch worker` flags generated from them."""

import re
import sys

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from streams.commands import loopwatch
from streams.worker.settings import WorkerSettings

# The CLI checks that the metrics port is free before it connects: these tests bind none, so that a
# worker (or anything else) already serving on the default 9464 cannot change what they see.
_NO_METRICS = ("--metrics-port", "0")


@pytest.fixture(autouse=True)
def _no_broker_environment(monkeypatch):
    """The defaults as a user without LOOPWATCH_BOOTSTRAP or KAFKA_PORT gets them (a test run may set either)."""
    for name in ("LOOPWATCH_BOOTSTRAP", "KAFKA_PORT", "LOOPWATCH_BROKER"):
        monkeypatch.delenv(name, raising=False)


def test_defaults():
    s = WorkerSettings()
    assert s.broker == "kafka://127.0.0.1:9092" and s.input_topics == ["loopwatch.events"]
    assert (s.verdicts_topic, s.loop_events_topic, s.dead_letters_topic) == (
        "loopwatch.verdicts", "loopwatch.loop-events", "loopwatch.dead-letters")
    assert (s.key_by, s.store, s.state_ttl_s, s.partitions, s.metrics_port, s.app_id, s.output_codec) == (
        "run", "memory://", 1800.0, 4, 9464, "loopwatch", "msgpack")
    assert s.config is None and s.producer_linger_ms == 0 and s.producer_acks == -1
    assert (s.producer_max_batch_size, s.max_poll_records, s.checkpoint_interval_s) == (1_048_576, 2000, 0.5)


def test_environment(monkeypatch):
    monkeypatch.setenv("LOOPWATCH_INPUT_TOPICS", "a, b")
    monkeypatch.setenv("LOOPWATCH_KEY_BY", "session")
    monkeypatch.setenv("LOOPWATCH_PRODUCER_ACKS", "1")
    monkeypatch.setenv("LOOPWATCH_STORE", "rocksdb://")
    s = WorkerSettings()
    assert s.input_topics == ["a", "b"] and s.key_by == "session" and s.producer_acks == 1
    assert s.store == "rocksdb://"


@pytest.mark.parametrize("field, value", [("key_by", "user"), ("output_codec", "avro"), ("partitions", 0),
                                          ("input_topics", "")], ids=str)
def test_invalid_values(field, value):
    with pytest.raises(ValidationError, match=field):
        WorkerSettings(**{field: value})


def test_every_setting_is_a_flag_naming_its_default_and_the_docs_name_its_env_var():
    from streams.commands.worker import settings_reference

    result = CliRunner().invoke(loopwatch, ["worker", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    reference = settings_reference()
    for name, field in WorkerSettings.model_fields.items():
        flag = "--bootstrap" if name == "broker" else f"--{name.replace('_', '-')}"
        assert flag in text
        assert f"`LOOPWATCH_{name.upper()}" in reference and field.description in reference
    assert "--state-ttl-s is LOOPWATCH_STATE_TTL_S, and so on for every flag" in text
    assert "default: kafka://127.0.0.1:9092" in text and "default: 1800.0" in text


def test_bad_flag_value_names_flag_and_env_var(tmp_path):
    result = CliRunner().invoke(loopwatch, ["worker", "--input-topics", " , "])
    assert result.exit_code == 2 and "LOOPWATCH_INPUT_TOPICS" in result.output


@pytest.mark.parametrize("given, url", [
    ("kafka://k1:9092", "kafka://k1:9092"),
    ("127.0.0.1:9192", "kafka://127.0.0.1:9192"),
    ("k1:9092,k2:9092", "kafka://k1:9092;kafka://k2:9092"),
])
def test_broker_takes_a_url_or_host_port(given, url):
    assert WorkerSettings(broker=given).broker == url


def test_an_empty_broker_is_refused():
    with pytest.raises(ValueError, match="a broker address is needed"):
        WorkerSettings(broker=" , ")


@pytest.mark.parametrize("given, says", [
    ("127.0.0.1", "'127.0.0.1' has no port: give host:port (e.g. 127.0.0.1:9092)"),
    ("kafka://127.0.0.1", "'127.0.0.1' has no port"),
    ("k1:9092;k2", "'k2' has no port"),
    ("127.0.0.1:notaport", "'127.0.0.1:notaport': the port must be a number from 1 to 65535"),
    ("127.0.0.1:99999", "the port must be a number from 1 to 65535"),
])
def test_a_broker_without_a_valid_port_is_refused(given, says):
    # Kafka clients would take a missing port for 9092: whatever broker listens there
    with pytest.raises(ValueError, match=re.escape(says)):
        WorkerSettings(broker=given)


def test_the_worker_takes_loopwatch_bootstrap_when_its_own_variable_is_not_set(monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the worker command trims sys.argv for faust
    port = _closed_port()
    result = CliRunner().invoke(loopwatch, ["worker", *_NO_METRICS], env={"LOOPWATCH_BOOTSTRAP": f"127.0.0.1:{port}"})
    assert result.output.splitlines()[0].startswith(f"loopwatch worker: broker 127.0.0.1:{port}, app id loopwatch")
    assert f"Error: cannot reach Kafka at 127.0.0.1:{port}: " in result.output
    other = _closed_port()
    result = CliRunner().invoke(loopwatch, ["worker", *_NO_METRICS], env={"LOOPWATCH_BOOTSTRAP": f"127.0.0.1:{port}",
                                                       "LOOPWATCH_BROKER": f"127.0.0.1:{other}"})
    assert f"Error: cannot reach Kafka at 127.0.0.1:{other}: " in result.output  # its own variable first


def test_worker_with_an_invalid_or_missing_config_file_exits_2_before_connecting(tmp_path, monkeypatch):
    # Same status and message as `loopwatch replay`; no broker is needed to find out.
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the worker command trims sys.argv for faust
    config = tmp_path / "openclaw.json"
    config.write_text('{tools: {loopDetection: {enabled: "yes"}}}', encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(loopwatch, ["worker", *_NO_METRICS, "--config", str(config), "--broker", "127.0.0.1:1"])
    assert result.exit_code == 2
    assert result.output == ("loopwatch: invalid configuration:\n"
                             f"{config}: tools.loopDetection.enabled: Expected boolean, received string\n")
    missing = tmp_path / "missing.json"
    result = runner.invoke(loopwatch, ["worker", *_NO_METRICS, "--config", str(missing), "--broker", "127.0.0.1:1"])
    assert result.exit_code == 2
    assert result.output.startswith("loopwatch: cannot read the configuration: [Errno 2]")


@pytest.mark.parametrize("flag, value, says", [
    ("--store", "redis://", "the store is memory:// or rocksdb://"),
    ("--broker", "http://127.0.0.1:9092", "'http://127.0.0.1:9092': a broker URL is kafka://host:port"),
    ("--log-level", "loud", "'loud' is not one of 'debug', 'info', 'warning', 'error'"),
])
def test_worker_rejects_unknown_store_broker_scheme_and_log_level(flag, value, says):
    result = CliRunner().invoke(loopwatch, ["worker", flag, value])
    assert result.exit_code == 2
    assert says in result.output
    assert "Traceback" not in result.output


def test_log_level_is_case_insensitive():
    assert WorkerSettings(log_level="WARNING").log_level == "warning"


def test_worker_says_in_one_line_when_no_broker_answers(monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the worker command trims sys.argv for faust
    port = _closed_port()
    result = CliRunner().invoke(loopwatch, ["worker", *_NO_METRICS, "--broker", f"127.0.0.1:{port}"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == (f"loopwatch worker: broker 127.0.0.1:{port}, app id loopwatch, input loopwatch.events "
                        "(4 partitions), key by run, store memory://")
    assert lines[1].startswith("loopwatch worker: no --config: loopDetection enabled=unset")
    assert lines[2].startswith(f"Error: cannot reach Kafka at 127.0.0.1:{port}: ") and len(lines) == 3


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:  # bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_worker_says_which_config_is_in_effect_and_flags_a_file_without_loop_detection(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    config = tmp_path / "openclaw.json"
    config.write_text("{tolls: {loopDetection: {enabled: true, warningThreshold: 4}}}", encoding="utf-8")  # typo
    result = CliRunner().invoke(loopwatch, ["worker", *_NO_METRICS, "--config", str(config),
                                       "--broker", f"127.0.0.1:{_closed_port()}"])
    assert result.output.splitlines()[1] == (
        f"loopwatch worker: config {config}: loopDetection enabled=unset (rolling detectors off, guard on), "
        "historySize=30, warningThreshold=10, criticalThreshold=20, unknownToolThreshold=10, "
        "globalCircuitBreakerThreshold=30, postCompactionGuard.windowSize=3 -- the file has no "
        "tools.loopDetection block: OpenClaw's defaults apply")
    assert result.output.splitlines()[2] == (
        f"loopwatch worker: warning: {config} holds nothing loop detection reads (no tools.loopDetection block, "
        "no agent with its own; its top-level keys not read: tolls): OpenClaw's defaults apply, rolling detectors off")
    config.write_text("{tools: {loopDetection: {enabled: true, warningThreshold: 4}}}", encoding="utf-8")
    result = CliRunner().invoke(loopwatch, ["worker", *_NO_METRICS, "--config", str(config),
                                       "--broker", f"127.0.0.1:{_closed_port()}"])
    assert result.output.splitlines()[1] == (
        f"loopwatch worker: config {config}: loopDetection enabled=true, historySize=30, warningThreshold=4, "
        "criticalThreshold=20, unknownToolThreshold=10, globalCircuitBreakerThreshold=30, "
        "postCompactionGuard.windowSize=3")
    config.write_text("{tools: {loopDetection: {enabled: true}}, agents: {list: [{id: 'ops', tools: {loopDetection: "
                      "{warningThreshold: 5}}}, {id: 'plain'}, {id: 'review', tools: {loopDetection: {}}}]}}",
                      encoding="utf-8")
    result = CliRunner().invoke(loopwatch, ["worker", *_NO_METRICS, "--config", str(config),
                                       "--broker", f"127.0.0.1:{_closed_port()}"])
    assert result.output.splitlines()[1].endswith(
        "postCompactionGuard.windowSize=3; agents with their own block, overlaid on it: ops, review")


def test_worker_refuses_a_metrics_port_in_use(monkeypatch):
    import socket

    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(loopwatch, ["worker", "--metrics-addr", "127.0.0.1", "--metrics-port", str(port),
                                           "--broker", f"127.0.0.1:{_closed_port()}"])
    assert result.exit_code == 1
    assert f"Error: cannot serve metrics on 127.0.0.1:{port}: Address already in use" in result.output


def test_the_settings_model_itself_takes_loopwatch_bootstrap(monkeypatch):
    # `faust -A streams.app worker` builds WorkerSettings() from the environment alone
    monkeypatch.setenv("LOOPWATCH_BOOTSTRAP", "10.0.0.5:9093")
    monkeypatch.delenv("LOOPWATCH_BROKER", raising=False)
    assert WorkerSettings().broker == "kafka://10.0.0.5:9093"
    monkeypatch.setenv("LOOPWATCH_BROKER", "k1:9092")
    assert WorkerSettings().broker == "kafka://k1:9092"
    assert WorkerSettings(broker="k2:9092").broker == "kafka://k2:9092"


def test_an_empty_loopwatch_broker_counts_as_unset(monkeypatch):
    monkeypatch.setenv("LOOPWATCH_BROKER", "")
    monkeypatch.setenv("LOOPWATCH_BOOTSTRAP", "b:1")
    assert WorkerSettings().broker == "kafka://b:1"


def test_metrics_endpoint_binds_loopback_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("LOOPWATCH_METRICS_ADDR", raising=False)
    assert WorkerSettings().metrics_addr == "127.0.0.1"
    monkeypatch.setenv("LOOPWATCH_METRICS_ADDR", "0.0.0.0")
    assert WorkerSettings().metrics_addr == "0.0.0.0"


def test_worker_help_groups_every_setting_and_the_docs_have_each_in_full():
    """--help: every WorkerSettings field under a section heading with one line; docs/worker.md's
    "Every setting" is the generated reference (so a new setting shows up in both or this fails)."""
    from pathlib import Path

    from streams.commands import worker as worker_command

    placed = [name for fields in worker_command.SECTIONS.values() for name in fields]
    assert sorted(placed) == sorted(WorkerSettings.model_fields) and len(placed) == len(set(placed))
    shown = CliRunner().invoke(loopwatch, ["worker", "--help"]).output
    headings = [line[:-1] for line in shown.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert headings == [*worker_command.SECTIONS, "Other options"]
    assert len(shown.splitlines()) < 130  # was 236: one line of purpose per flag, the full text in the docs
    assert "--bootstrap, --broker TEXT" in shown and "docs/worker.md" in shown
    page = (Path(__file__).resolve().parents[2] / "docs" / "worker.md").read_text(encoding="utf-8")
    assert worker_command.settings_reference() in page


def test_worker_takes_the_broker_as_bootstrap_and_broker_is_its_alias(monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the worker command trims sys.argv for faust
    port = _closed_port()
    for flag in ("--bootstrap", "--broker"):
        result = CliRunner().invoke(loopwatch, ["worker", *_NO_METRICS, flag, f"127.0.0.1:{port}"])
        assert result.exit_code == 1, result.output
        assert f"cannot reach Kafka at 127.0.0.1:{port}" in result.output
    bad = CliRunner().invoke(loopwatch, ["worker", "--bootstrap", "http://127.0.0.1:9092"])
    assert bad.exit_code == 2 and "--bootstrap (LOOPWATCH_BROKER, else LOOPWATCH_BOOTSTRAP)" in bad.output
