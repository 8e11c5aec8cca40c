"""The benchmark scripts' option checks and interpreter line (bench/options.py, bench/host.py)."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from bench.host import interpreter

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("args, message", [
    (["--runs", "0"], "argument --runs: must be above 0, got 0"),
    (["--repeat", "-1"], "argument --repeat: must be above 0, got -1"),
    (["--runs", "x"], "argument --runs: not a number: 'x'"),
])
def test_engine_bench_refuses_bad_options_with_a_usage_error(args, message):
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "engine.py"), *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1].startswith(f"engine.py: error: {message}")


def test_engine_bench_reports_a_missing_config_as_the_commands_do():
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "engine.py"), "--config", "/no/such/openclaw.json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == ("loopwatch: cannot read the configuration: [Errno 2] No such file or directory: "
                             "'/no/such/openclaw.json'\n")


def test_pipeline_bench_checks_its_config_before_building_the_workload(tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text("{tools: 5}")
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "pipeline.py"), "--config", str(config)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stdout == ""  # no workload line: it stopped before generating events
    assert result.stderr.splitlines() == ["loopwatch: invalid configuration:",
                                          f"{config}: tools: Expected object, received number"]


def test_interpreter_line_names_the_version_the_base_executable_and_the_linkage():
    line = interpreter()
    assert line.startswith(f"python {platform.python_version()} ({sys._base_executable}; libpython ")
    maps = Path("/proc/self/maps").read_text()
    assert ("libpython shared" in line) == ("libpython" in maps)


def test_fleet_import_bench_refuses_zero_sessions():
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "fleet_import.py"), "--sessions", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith("fleet_import.py: error: argument --sessions: must be above 0")


def test_fleet_import_bench_imports_every_file_it_writes(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "fleet_import.py"), "--sessions", "14",
                             "--sqlite-every", "7", "--no-replay", "--keep", str(tmp_path / "fleet")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].startswith("fleet:       14 files") and lines[1].endswith(
        "2 claude-code, 2 codex, 2 codex-exec, 2 openclaw, 2 swe-agent, 2 events, 2 openclaw-sqlite")
    assert [line.split(":")[0] for line in lines[2:5]] == ["floor", "start-up", "import"]
    summary = [line.strip() for line in lines if line.strip().startswith("loopwatch import:")]
    assert summary[0].startswith("loopwatch import: 14 file(s), ") and summary[0].endswith(" 0 error(s)")
    assert [line.split(":")[1].strip() for line in summary[1:]] == ["claude-code", "codex", "events", "openclaw",
                                                                    "swe-agent"]
    assert "codex: 4 file(s)" in summary[2] and "openclaw: 4 file(s)" in summary[4]  # rollouts + exec, + SQLite


def test_worker_path_bench_takes_every_event_through_the_workers_path():
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "worker_path.py"), "--runs", "12", "--passes", "1",
                             "--fetch", "7", "--checkpoint-events", "20"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    events = int(result.stdout.split("workload: ", 1)[1].split(" events", 1)[0].replace(",", ""))
    assert events > 100
    records = result.stdout.split("records of a pass: ", 1)[1].splitlines()[0]
    assert f"verdicts {events:,}" in records.split(", ")  # one verdict per event, none lost in the batches
    assert "worker path with the fleet view: CPU µs per event per pass " in result.stdout
