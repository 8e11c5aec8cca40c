"""The pieces of an end-to-end run: the real runner CLIs from their npm packages, a scripted model, and
loopwatch's real worker and gateway processes on the real broker.

* :data:`RUNNERS_DIR`: where ``make e2e`` installed the pinned runner versions (``npm install --prefix``;
  ``LOOPWATCH_E2E_DIR``, default ``.work/e2e`` in the repository). :func:`runner_bin` finds each CLI and
  checks its version.
* :class:`ModelServer`: :mod:`tests.e2e.fake_model` on a free local port in a thread.
* :class:`Pipeline`: a ``loopwatch worker`` (fresh app id and topics) and a ``loopwatch gateway`` as
  subprocesses; :meth:`Pipeline.verdicts` reads the verdicts of one session back from the topic.
* :func:`run_claude_code`, :func:`run_codex`: one non-interactive run of a runner with loopwatch's hook
  settings as ``loopwatch hook RUNNER --print-config`` prints them (the pasted snippet), no network but
  the local model server (no telemetry, no update checks).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from streams.importers.codex_rollout import sub_agent_parent
from streams.runners.hooks import snippets
from streams.wire.codecs import decode_event
from tests.e2e.fake_model import FakeModel, make_handler
from tests.private_broker import free_port

__all__ = ["REPO", "RUNNERS_DIR", "VERSIONS", "LOOPWATCH", "runner_bin", "ModelServer", "Pipeline",
           "RunnerRun", "run_claude_code", "run_codex", "root_rollout", "free_port"]

REPO = Path(__file__).resolve().parents[2]
RUNNERS_DIR = Path(os.environ.get("LOOPWATCH_E2E_DIR") or REPO / ".work" / "e2e")
# the pinned versions, as Makefile's e2e-install installs them: "<npm package>@<version>" a line
_PINS = dict(line.rsplit("@", 1) for line in (Path(__file__).with_name("runners.txt")).read_text().split())
VERSIONS = {"claude": _PINS["@anthropic-ai/claude-code"], "codex": _PINS["@openai/codex"]}
LOOPWATCH = str(Path(sys.executable).parent / "loopwatch")
READY_LINE = "[^Worker]: Ready"
# a base environment for the runner CLIs: nothing of ours leaks in, no telemetry, no update checks
QUIET_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
    "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_COST_WARNINGS": "1",
    "CODEX_DISABLE_UPDATE_CHECK": "1",
}




def runner_bin(name: str) -> Path | None:
    """The installed ``claude`` or ``codex`` of the pinned version; None when missing or another version."""
    path = RUNNERS_DIR / "node_modules" / ".bin" / name
    if not path.exists():
        return None
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60,
                             env={**QUIET_ENV, "HOME": str(RUNNERS_DIR)}).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if VERSIONS[name] in out else None


class ModelServer:
    """:class:`tests.e2e.fake_model.FakeModel` served on a free local port (a daemon thread)."""

    def __init__(self, command: str, max_calls: int, log: Path | None = None,
                 before_call: Callable[[int], None] | None = None, full_after: int | None = None,
                 spawn: int | None = None) -> None:
        self.model = FakeModel(command, max_calls, log, before_call, full_after, spawn)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self.model))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "ModelServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def _wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready within {timeout:g} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


def _stop(proc: subprocess.Popen | None, timeout: float = 30.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@dataclass
class Pipeline:
    """A ``loopwatch worker`` and a ``loopwatch gateway`` (subprocesses) on fresh topics of the broker."""

    bootstrap: str
    workdir: Path
    config: dict[str, Any]
    tag: str
    gateway_timeout_s: float = 2.0
    on_timeout: str = "allow"
    worker: subprocess.Popen | None = None
    gateway: subprocess.Popen | None = None
    gateway_url: str = ""
    topics: dict[str, str] = field(default_factory=dict)

    @property
    def config_path(self) -> Path:
        return self.workdir / "loopwatch.json"

    @property
    def token_file(self) -> Path:
        """The gateway's bearer token file (it makes the token on its first start)."""
        return self.workdir / "gateway-token"

    def hook_env(self) -> dict[str, str]:
        """What a runner's environment needs for the hooks: the gateway's URL and its token file."""
        return {"LOOPWATCH_GATEWAY_URL": self.gateway_url, "LOOPWATCH_GATEWAY_TOKEN_FILE": str(self.token_file)}

    def start(self) -> "Pipeline":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(self.config))
        self.topics = {name: f"e2e.{self.tag}.{name}" for name in
                       ("events", "verdicts", "loop-events", "dead-letters", "fleet-events")}
        self.start_worker()
        port = free_port()
        self.gateway_url = f"http://127.0.0.1:{port}"
        log = self.workdir / "gateway.log"
        self.gateway = subprocess.Popen(
            [LOOPWATCH, "gateway", "--bootstrap", self.bootstrap, "--port", str(port),
             "--events-topic", self.topics["events"], "--verdicts-topic", self.topics["verdicts"],
             "--timeout", str(self.gateway_timeout_s), "--on-timeout", self.on_timeout],
            stdout=log.open("ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            env={**{k: v for k, v in os.environ.items() if k != "LOOPWATCH_GATEWAY_TOKEN"},
                 "LOOPWATCH_GATEWAY_TOKEN_FILE": str(self.token_file)})
        _wait_for(lambda: _answers(port), 60, "loopwatch gateway", self.gateway, log)
        return self

    def start_worker(self) -> None:
        log = self.workdir / "worker.log"
        self._worker_log = log
        start = log.stat().st_size if log.exists() else 0
        self.worker = subprocess.Popen(
            [LOOPWATCH, "worker", "--bootstrap", self.bootstrap, "--app-id", f"e2e-{self.tag}",
             "--input-topics", self.topics["events"], "--verdicts-topic", self.topics["verdicts"],
             "--loop-events-topic", self.topics["loop-events"], "--dead-letters-topic", self.topics["dead-letters"],
             "--fleet-events-topic", self.topics["fleet-events"], "--partitions", "1",
             "--config", str(self.config_path), "--metrics-port", "0", "--output-codec", "json",
             "--data-dir", str(self.workdir / "worker-data")],
            stdout=log.open("ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            cwd=self.workdir)
        _wait_for(lambda: READY_LINE in log.read_bytes()[start:].decode("utf-8", "replace"), 120,
                  "loopwatch worker", self.worker, log)

    def stop_worker(self) -> None:
        _stop(self.worker)

    def stop(self) -> None:
        _stop(self.gateway)
        _stop(self.worker)

    def verdicts(self, session_id: str, at_least: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The verdict records of ``session_id`` on the verdicts topic, in topic order (at least ``at_least``)."""
        return asyncio.run(_read_session(self.bootstrap, self.topics["verdicts"], session_id, at_least, timeout))

    def wait_verdicts(self, count: int, timeout: float = 30.0) -> int:
        """Wait until the verdicts topic holds ``count`` records (of any session); how many it holds."""
        from tests.worker_harness import count_records  # the worker tests' count (imports Faust: only here)

        return asyncio.run(count_records(self.bootstrap, self.topics["verdicts"], count, timeout))

    def events(self, session_id: str, at_least: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The events of ``session_id`` as the gateway published them (the worker's input topic)."""
        return asyncio.run(_read_session(self.bootstrap, self.topics["events"], session_id, at_least, timeout))


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


async def _read_session(bootstrap: str, topic: str, session_id: str, at_least: int,
                         timeout: float) -> list[dict[str, Any]]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None)
    await consumer.start()
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=300)
            for batch in batches.values():
                for message in batch:
                    record = decode_event(message.value)
                    if record.get("session_id") == session_id and record.get("event_id") not in seen:
                        seen.add(record.get("event_id"))  # a re-published verdict counts once
                        found.append(record)
            if len(found) >= at_least and not batches:
                break
    finally:
        await consumer.stop()
    return found


@dataclass
class RunnerRun:
    """What one runner run left: exit status, output, its own session file, the session id."""

    status: int
    stdout: str
    stderr: str
    session_file: Path | None
    session_id: str | None
    home: Path


def run_claude_code(binary: Path, workdir: Path, model_url: str, hook_env: dict[str, str], prompt: str = "loop please",
                    http: bool = False, timeout: float = 300.0, loopwatch: str = LOOPWATCH) -> RunnerRun:
    """``claude -p PROMPT`` with loopwatch's hook settings (command hooks; ``http``: http hooks, with the
    gateway's token in ``LOOPWATCH_GATEWAY_TOKEN`` as their docs say). ``loopwatch``: the executable the
    command hooks run (``<loopwatch> hook claude-code``)."""
    home, project = workdir / "home", workdir / "project"
    project.mkdir(parents=True, exist_ok=True)
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    settings = workdir / "settings.json"
    gateway_url = hook_env.get("LOOPWATCH_GATEWAY_URL")
    settings.write_text(json.dumps(snippets.claude_code_settings(loopwatch, http_url=gateway_url if http else None)))
    env = {**QUIET_ENV, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"),
           "ANTHROPIC_BASE_URL": model_url, "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy", **hook_env}
    if http:
        env["LOOPWATCH_GATEWAY_TOKEN"] = Path(hook_env["LOOPWATCH_GATEWAY_TOKEN_FILE"]).read_text().strip()
    proc = subprocess.run([str(binary), "-p", prompt, "--settings", str(settings), "--allowedTools", "Bash",
                           "--output-format", "json"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    # the main log (<project>/<session>.jsonl), not a sub-agent's side file (<session>/subagents/agent-*.jsonl)
    files = sorted(f for f in (home / ".claude" / "projects").rglob("*.jsonl") if f.parent.name != "subagents")
    session_file = files[0] if files else None
    session_id = session_file.stem if session_file else None
    return RunnerRun(proc.returncode, proc.stdout, proc.stderr, session_file, session_id, home)


CODEX_CONFIG = """model = "e2e-model"
model_provider = "e2e"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[model_providers.e2e]
name = "e2e"
base_url = "{model_url}/v1"
wire_api = "responses"
env_key = "E2E_MODEL_KEY"
request_max_retries = 0
stream_max_retries = 0

"""


def run_codex(binary: Path, workdir: Path, model_url: str, hook_env: dict[str, str], prompt: str = "loop please",
              trust_hooks: bool = True, timeout: float = 300.0, loopwatch: str = LOOPWATCH) -> RunnerRun:
    """``codex exec --json PROMPT`` with loopwatch's hooks in ``$CODEX_HOME/config.toml``; ``trust_hooks``
    passes ``--dangerously-bypass-hook-trust`` (``codex exec`` cannot answer the trust prompt). ``loopwatch``:
    the executable the hooks run (``<loopwatch> hook codex``)."""
    home, project = workdir / "codex-home", workdir / "project"
    project.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(CODEX_CONFIG.format(model_url=model_url) + snippets.codex_config_toml(loopwatch))
    env = {**QUIET_ENV, "HOME": str(home), "CODEX_HOME": str(home), "E2E_MODEL_KEY": "e2e-dummy", **hook_env}
    args = [str(binary), "exec", "--skip-git-repo-check", "--json"]
    if trust_hooks:
        args.append("--dangerously-bypass-hook-trust")
    proc = subprocess.run(args + [prompt], cwd=project, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    session_file, session_id = root_rollout(home / "sessions")
    return RunnerRun(proc.returncode, proc.stdout, proc.stderr, session_file, session_id, home)


def root_rollout(sessions: Path) -> tuple[Path | None, str | None]:
    """``(file, session id)`` of the thread ``codex exec`` started: the rollout whose ``session_meta`` names no
    parent thread (each spawned sub-agent writes a rollout of its own, which may sort first)."""
    for path in sorted(sessions.rglob("rollout-*.jsonl")):
        lines = path.read_text().splitlines()
        meta = json.loads(lines[0]).get("payload", {}) if lines else {}
        if isinstance(meta.get("id"), str) and sub_agent_parent(meta) is None:
            return path, meta["id"]
    return None, None


def replay(fmt: str, session_file: Path, config: Path) -> list[dict[str, Any]]:
    """``loopwatch replay --format FMT --config CONFIG --key-by run FILE``: the verdict records."""
    proc = subprocess.run([LOOPWATCH, "replay", "--format", fmt, "--config", str(config), "--key-by", "run",
                           str(session_file)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
