"""The Docker deployment files, checked without Docker (none on CI).

docker-compose.yml, Prometheus and Grafana provisioning parse; every metric a
dashboard query names is exported by the worker (streams.worker.metrics) or the
gateway (streams.runners.gateway.metrics); Prometheus scrapes both and loads the
alert rules (tests/deploy/test_alert_rules.py evaluates them); every file a
service mounts or builds from exists.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra: pip install -e '.[test]'")

from streams.runners.gateway.metrics import GatewayMetrics  # noqa: E402
from streams.worker.metrics import METRIC_NAMES  # noqa: E402
from streams.worker.settings import WorkerSettings  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
METRIC = re.compile(r"\bloopwatch_[a-z_]+\b")


def _gateway_names() -> set[str]:
    """Every series name of the gateway's /metrics (its registry, every series created)."""
    gateway = GatewayMetrics()
    gateway.initialise(["/v1/events"])
    gateway.roundtrip.labels("/v1/events")
    return {line.split("{")[0].split(" ")[0] for line in gateway.render().decode().splitlines()
            if line.startswith("loopwatch_")}


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _exprs(node) -> list[str]:
    """Every PromQL ``expr`` anywhere in a dashboard (panels, rows, nested panels)."""
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [e for value in node.values() for e in _exprs(value)]
    if isinstance(node, list):
        return [e for value in node for e in _exprs(value)]
    return []


def test_compose_has_the_five_services():
    compose = _compose()
    assert set(compose["services"]) == {"kafka", "worker", "gateway", "prometheus", "grafana"}
    assert compose["services"]["kafka"]["image"].startswith("apache/kafka:3.9")
    env = compose["services"]["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, one node
    worker_env = compose["services"]["worker"]["environment"]
    assert worker_env["LOOPWATCH_BROKER"] == "kafka://kafka:19092"
    assert "PLAINTEXT://kafka:19092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert int(env["KAFKA_NUM_PARTITIONS"]) == int(worker_env["LOOPWATCH_PARTITIONS"])


SETUP = ROOT / "docs" / "setup.md"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def test_compose_gives_what_the_docs_promise():
    """docs/setup.md and the compose file's own header promise a URL per service, on 127.0.0.1: each is
    published by that service (container port = the port it listens on); the images are pinned; the
    worker and the gateway run the loopwatch image's entry point with their sub-command."""
    compose = _compose()
    services = compose["services"]
    setup = " ".join(SETUP.read_text().split())
    # what docs/setup.md names: the five services, and where three of them answer
    for words in ("brings up Kafka, the worker, the HTTP gateway (http://localhost:8787",
                  "Prometheus with loopwatch's alert rules (http://localhost:9090",
                  "Grafana (dashboard on http://localhost:3000"):
        assert words in setup, words
    listening = {"gateway": int(services["gateway"]["environment"]["LOOPWATCH_GATEWAY_PORT"]),
                 "prometheus": 9090, "grafana": 3000,  # the images' own ports
                 "worker": int(services["worker"]["environment"]["LOOPWATCH_METRICS_PORT"]), "kafka": 9092}
    header = [line for line in COMPOSE.read_text().splitlines() if line.startswith("#")]
    promised = {int(port) for line in header + [setup] for port in re.findall(r"localhost:(\d+)", line)}
    published = {}
    for name, service in services.items():
        for mapping in service.get("ports", []):
            address, host, container = mapping.split(":")
            assert address == "127.0.0.1", f"{name}: {mapping} is not on 127.0.0.1 only"
            published[int(host)] = name
            assert int(container) == listening[name], f"{name} listens on {listening[name]}, not {container}"
    assert promised == {8787, 9090, 3000, 9464, 9092} and promised <= set(published)
    assert {published[p] for p in promised} == set(services)  # every service answers where the docs say
    # images: pinned versions; loopwatch's own built from deploy/Dockerfile, one image for worker and gateway
    for name in ("kafka", "prometheus", "grafana"):
        image, _, tag = services[name]["image"].partition(":")
        assert tag and tag != "latest" and re.fullmatch(r"v?\d+(\.\d+)+", tag), services[name]["image"]
    assert services["worker"]["image"] == services["gateway"]["image"] == "loopwatch:dev"
    assert services["worker"]["build"] == services["gateway"]["build"] == {"context": ".",
                                                                          "dockerfile": "deploy/Dockerfile"}
    dockerfile = DOCKERFILE.read_text()
    assert 'ENTRYPOINT ["loopwatch"]' in dockerfile
    assert (services["worker"]["command"], services["gateway"]["command"]) == (["worker"], ["gateway"])
    # the worker's metrics reachable from the prometheus container (docs/metrics.md: the Docker set-up uses 0.0.0.0)
    assert services["worker"]["environment"]["LOOPWATCH_METRICS_ADDR"] == "0.0.0.0"
    assert "the Docker set-up uses 0.0.0.0" in (ROOT / "docs" / "metrics.md").read_text()


def test_compose_references_files_that_exist():
    compose = _compose()
    checked = 0
    for name, service in compose["services"].items():
        build = service.get("build")
        if build:
            context = ROOT / build["context"]
            assert context.is_dir(), name
            assert (context / build.get("dockerfile", "Dockerfile")).is_file(), name
            checked += 1
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):  # bind mount (named volumes have no path)
                assert (ROOT / source).exists(), f"{name}: {source}"
                checked += 1
        env = service.get("environment", {})
        if "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH" in env:
            home = env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
            assert home.startswith("/var/lib/grafana/dashboards/")
            assert (GRAFANA / "dashboards" / Path(home).name).is_file()
    assert checked >= 5


def test_prometheus_scrapes_the_workers_metrics_port():
    config = yaml.safe_load(PROMETHEUS.read_text())
    targets = [t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    worker = _compose()["services"]["worker"]
    port = int(worker["environment"].get("LOOPWATCH_METRICS_PORT", WorkerSettings().metrics_port))
    assert f"worker:{port}" in targets
    assert f"127.0.0.1:{port}:{port}" in worker.get("ports", [])
    mounts = [v for v in _compose()["services"]["prometheus"]["volumes"] if v.startswith("./")]
    assert "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts
    # the gateway, on the port its service listens on, and the alert rules, where rule_files says
    gateway = _compose()["services"]["gateway"]
    assert f"gateway:{gateway['environment']['LOOPWATCH_GATEWAY_PORT']}" in targets
    assert gateway["environment"]["LOOPWATCH_GATEWAY_HOST"] == "0.0.0.0"
    assert gateway["environment"]["LOOPWATCH_GATEWAY_TOKEN"].startswith("${LOOPWATCH_GATEWAY_TOKEN:?")  # no default
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    assert "./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro" in mounts


def test_grafana_provisioning_points_at_the_mounted_dashboards():
    datasources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "loopwatch.yaml").read_text())
    assert datasources["apiVersion"] == 1 and providers["apiVersion"] == 1
    uids = {d["uid"] for d in datasources["datasources"]}
    assert datasources["datasources"][0]["url"] == "http://prometheus:9090"
    mounts = dict(v.split(":")[:2] for v in _compose()["services"]["grafana"]["volumes"])
    assert mounts["./deploy/grafana/dashboards"] == providers["providers"][0]["options"]["path"]
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    for path in DASHBOARDS:
        used = {p["datasource"]["uid"] for p in json.loads(path.read_text())["panels"]}
        assert used <= uids, path.name


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_dashboard_queries_name_only_real_metrics(path):
    dashboard = json.loads(path.read_text())
    exprs = _exprs(dashboard)
    assert len(exprs) >= 10
    names = {name for expr in exprs for name in METRIC.findall(expr)}
    assert names - METRIC_NAMES - _gateway_names() == set()
    # the panels the dashboard promises
    assert "loopwatch_verdict_latency_seconds_bucket" in names
    assert {"loopwatch_events_total", "loopwatch_detections_total",
            "loopwatch_dead_letters_total", "loopwatch_consumer_lag", "loopwatch_checkpoint_seconds_bucket",
            "loopwatch_redelivered_events_total", "loopwatch_states_not_written_total",
            "loopwatch_gateway_requests_total", "loopwatch_gateway_timeouts_total",
            "loopwatch_gateway_roundtrip_seconds_bucket"} <= names
    # "Aborts" counts every cause that ends a run (not only the guard's), enforced only; shadow apart
    stats = {panel["title"]: panel["targets"][0]["expr"] for panel in dashboard["panels"] if panel["type"] == "stat"}
    assert stats["Aborts"] == ('sum(increase(loopwatch_detections_total{action="abort",enforced="true",'
                               'kind!="run_end"}[$__range]))')
    assert any('enforced="false"' in e for e in exprs)
    assert all('enforced="' in e for e in exprs if "loopwatch_detections_total" in e)
    assert any(e.startswith("histogram_quantile(0.99") for e in exprs)
    assert any(e.startswith("histogram_quantile(0.5") for e in exprs)


def _label_names() -> dict[str, set[str]]:
    """Series name -> its label names, from the worker's and the gateway's metric definitions (a labelled
    gauge such as the consumer lag has no series before it is set; a histogram's buckets add ``le``)."""
    from streams.worker import metrics

    out: dict[str, set[str]] = {}
    for registry in (metrics.REGISTRY, GatewayMetrics().registry):
        for collector, names in registry._collector_to_names.items():  # prometheus_client has no public way
            labels = set(getattr(collector, "_labelnames", ()))
            for name in names:
                out[name] = labels | ({"le"} if name.endswith("_bucket") else set())
    return out


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_dashboard_selectors_name_only_labels_the_metrics_have(path):
    known = _label_names()
    selectors = [(name, body) for expr in _exprs(json.loads(path.read_text()))
                 for name, body in re.findall(r"\b(loopwatch_[a-z_]+)\{([^}]*)\}", expr)]
    assert len(selectors) >= 5
    for name, body in selectors:
        used = set(re.findall(r"([a-z_]+)\s*(?:=~|!~|!=|=)", body))
        assert used <= known[name], f"{name}{{{body}}}: no label {used - known[name]}"
    # sum by (...) / by (...) clauses group by labels the summed metric has
    for expr in _exprs(json.loads(path.read_text())):
        for by in re.findall(r"\bby\s*\(([^)]*)\)", expr):
            names = set(METRIC.findall(expr))
            labels = {label.strip() for label in by.split(",") if label.strip()}
            assert any(labels <= known[n] for n in names), f"{expr}: by ({by})"


def test_metric_regex_sees_every_name():
    # a name the regex would cut short (digits, capitals) would escape the check above
    assert all(METRIC.fullmatch(name) for name in METRIC_NAMES)


def test_every_port_is_published_on_loopback_only():
    ports = [p for service in _compose()["services"].values() for p in service.get("ports", [])]
    assert len(ports) == 5 and all(p.startswith("127.0.0.1:") for p in ports)


def test_the_worker_container_gives_its_commands_the_broker_address():
    env = _compose()["services"]["worker"]["environment"]
    # produce, tail and demo read LOOPWATCH_BOOTSTRAP (streams.wire.brokers): docker compose exec works as is
    assert env["LOOPWATCH_BOOTSTRAP"] == env["LOOPWATCH_BROKER"].removeprefix("kafka://") == "kafka:19092"


def test_grafana_needs_a_password_from_the_environment_and_has_no_anonymous_access():
    env = _compose()["services"]["grafana"]["environment"]
    assert env["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")  # no default: compose stops
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false" and env["GF_USERS_ALLOW_SIGN_UP"] == "false"
    setup = (ROOT / "docs" / "setup.md").read_text(encoding="utf-8")
    assert "GRAFANA_ADMIN_PASSWORD" in setup and "docker compose up --build" in setup.replace(" -d", "")

