"""Real OpenClaw for the end-to-end runs: installed from the npm registry into a cache folder, set up
in a throw-away state directory with the loopwatch plugin, driven through one agent turn.

* :func:`install` puts Node 24 (npm package ``node``, whose install brings the binary as a registry
  package) and each pinned ``openclaw`` version in its own npm prefix under the cache folder
  (``$LOOPWATCH_E2E_DIR/openclaw``, default ``.work/e2e/openclaw``), once; OpenClaw 2026.9.6 needs
  Node >= 24.16, 2026.7.35 >= 22.22.3 (both run on the Node 24 used here). Nothing is installed
  system-wide.
* :class:`OpenClawHost` writes ``openclaw.json`` (a custom OpenAI-compatible provider pointing at
  the scripted model, OpenClaw's own loop detection off, the agent declared in the version's layout:
  ``agents.list`` up to 2026.7.x, ``agents.entries`` from 2026.9), installs the plugin with the
  commands of docs/runners/openclaw.md, and runs ``openclaw agent --local`` (the embedded runner
  with the plugin registry loaded: ``openclaw agent exec`` of 2026.9.6 does not run plugin hooks).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "openclaw-plugin"
NODE_VERSION = "24.21.0"
VERSIONS = ("2026.7.35", "2026.9.6")


def cache_dir() -> Path:
    base = os.environ.get("LOOPWATCH_E2E_DIR") or str(ROOT / ".work" / "e2e")
    return Path(base) / "openclaw"


def _npm_install(prefix: Path, spec: str, env: dict[str, str]) -> None:
    prefix.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-update-notifier", spec],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=900)


def install(version: str) -> tuple[Path, Path]:
    """``(node bin dir, openclaw executable)`` for ``version``, installing what is missing."""
    cache = cache_dir()
    node_bin = cache / f"node-{NODE_VERSION}" / "node_modules" / ".bin"
    if not (node_bin / "node").exists():
        _npm_install(node_bin.parents[1], f"node@{NODE_VERSION}", dict(os.environ))
    openclaw = cache / f"openclaw-{version}" / "node_modules" / ".bin" / "openclaw"
    if not openclaw.exists():
        env = {**os.environ, "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
        _npm_install(openclaw.parents[2], f"openclaw@{version}", env)
    return node_bin, openclaw


def uses_entries(version: str) -> bool:
    """2026.9 moved the agent list to ``agents.entries`` (keyed by agent id) and asks for install consent."""
    year, month = (int(part) for part in version.split(".")[:2])
    return (year, month) >= (2026, 9)


@dataclass
class OpenClawHost:
    """One OpenClaw version with its own state directory and config, for one test."""

    version: str
    home: Path
    node_bin: Path
    openclaw: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def state_dir(self) -> Path:
        return self.home / "state"

    @property
    def config_path(self) -> Path:
        return self.home / "openclaw.json"

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.extra_env, "HOME": str(self.home), "OPENCLAW_STATE_DIR": str(self.state_dir),
                "OPENCLAW_CONFIG_PATH": str(self.config_path), "NO_COLOR": "1",
                "PATH": f"{self.node_bin}{os.pathsep}{os.environ.get('PATH', '')}"}

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.openclaw), *args], env=self.env(), cwd=self.home, capture_output=True,
                              text=True, timeout=timeout)

    def write_config(self, model_url: str) -> None:
        """The model provider, the agent in this version's layout, OpenClaw's own loop detection off."""
        agent = {"id": "main", "default": True}
        agents: dict[str, Any] = {"defaults": {"model": {"primary": "fake/loop-model"}}}
        if uses_entries(self.version):
            agents["entries"] = {"main": {"default": True}}
        else:
            agents["list"] = [agent]
        config = {
            "models": {"providers": {"fake": {
                "baseUrl": model_url, "apiKey": "e2e-key", "api": "openai-completions",
                "models": [{"id": "loop-model", "name": "Loop model", "reasoning": False, "input": ["text"],
                            "contextWindow": 128000, "maxTokens": 4096}],
            }}},
            "agents": agents,
            "tools": {"loopDetection": {"enabled": False}},
        }
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(config, indent=2))

    def install_plugin(self, plugin_config: dict[str, Any]) -> list[str]:
        """The install commands of docs/runners/openclaw.md, then the plugin's settings; the commands run."""
        install = ["plugins", "install", "--link"]
        if uses_entries(self.version):
            install += ["--force", "--accept-capabilities"]
        commands = [[*install, str(PLUGIN)], ["plugins", "enable", "loopwatch"]]
        for command in commands:
            done = self.cli(*command)
            if done.returncode != 0:
                raise AssertionError(f"openclaw {' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        config = json.loads(self.config_path.read_text())
        entry = config.setdefault("plugins", {}).setdefault("entries", {}).setdefault("loopwatch", {})
        assert entry.get("enabled") is True, f"plugin not enabled by the install commands: {config.get('plugins')}"
        entry["config"] = plugin_config
        self.config_path.write_text(json.dumps(config, indent=2))
        return [" ".join(["openclaw", *command]) for command in commands]

    def agent_turn(self, message: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return self.cli("agent", "--local", "--agent", "main", "--message", message, "--json",
                        "--timeout", str(int(timeout)), timeout=timeout + 60)
