"""deploy/kafka/kafka.sh keeps one broker per port, without Java: a stand-in ``java`` on PATH.

The stand-in "formats" by making the log dir and "runs the broker" by listening on the
config's ports and printing the line kafka.sh waits for, so start / status / with / stop run
for real, in seconds. Each test has its own KAFKA_WORK and free ports, never 9092.
(tests/deploy/test_kafka_sh_ports.py does the same with real brokers.)
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KAFKA_SH = ROOT / "deploy" / "kafka" / "kafka.sh"

FAKE_JAVA = '''#!{python}
import os, re, signal, socket, sys, threading, time
args = sys.argv[1:]
def props(path):
    return dict(l.split("=", 1) for l in open(path).read().splitlines() if "=" in l and not l.startswith("#"))
if "kafka.tools.StorageTool" in args:
    log_dir = props(args[args.index("-c") + 1])["log.dirs"]
    os.makedirs(log_dir, exist_ok=True)
    open(os.path.join(log_dir, "meta.properties"), "w").write("cluster.id=fake\\n")
    sys.exit(0)
if "kafka.Kafka" in args:
    with open({pids!r}, "a") as f:
        f.write(f"{{os.getpid()}}\\n")
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    time.sleep(float(os.environ.get("FAKE_JAVA_DELAY", "0")))  # a slow start-up
    for port in re.findall(r":(\\d+)", props(args[args.index("kafka.Kafka") + 1])["listeners"]):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", int(port)))
        sock.listen(50)
        threading.Thread(target=lambda s=sock: [s.accept()[0].close() for _ in iter(int, 1)], daemon=True).start()
    print("[fake] Kafka Server started", flush=True)
    while True:
        time.sleep(1)
sys.exit(2)
'''


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _free_port_pairs(n: int) -> list[int]:
    """``n`` ports ``p`` with ``p`` and ``p + 1`` both free, no two pairs overlapping."""
    found: list[int] = []
    while len(found) < n:
        port = _free_ports(1)[0]
        if port < 65535 and not any(abs(port - p) <= 1 for p in found):
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            found.append(port)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not yet reaped by its parent) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def kafka_sh(tmp_path):
    """Runs kafka.sh with a stand-in java and KAFKA_WORK=tmp_path/work; kills what it started afterwards."""
    work, bin_dir, pids = tmp_path / "work", tmp_path / "bin", tmp_path / "java.pids"
    (work / "libs").mkdir(parents=True)
    (work / "libs" / "kafka_2.13-3.9.2.jar").write_bytes(b"")
    pom = hashlib.sha256((ROOT / "deploy" / "kafka" / "pom.xml").read_bytes()).hexdigest()
    (work / "libs" / ".pom.sha256").write_text(pom + "\n")  # jars "cached": no Maven
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text(FAKE_JAVA.format(python=sys.executable, pids=str(pids)))
    java.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "LOOPWATCH_KAFKA"))}
    base.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", KAFKA_WORK=str(work),
                KAFKA_PYTHON=str(tmp_path / "no-python"), KAFKA_START_TIMEOUT="20")

    def env(port: int, cport: int | None, **extra: str) -> dict[str, str]:
        """``cport`` None: no KAFKA_CONTROLLER_PORT (kafka.sh's default, KAFKA_PORT + 1)."""
        controller = {} if cport is None else {"KAFKA_CONTROLLER_PORT": str(cport)}
        return {**base, "KAFKA_PORT": str(port), **controller, **extra}

    def run(action: str, port: int, cport: int | None, *cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(KAFKA_SH), action, *cmd], env=env(port, cport), capture_output=True, text=True,
                              timeout=60)

    run.work, run.env = work, env
    yield run
    if pids.exists():
        for pid in map(int, pids.read_text().split()):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.timeout(120)
def test_brokers_on_two_ports_neither_see_nor_stop_nor_wipe_each_other(kafka_sh):
    port_a, cport_a, port_b, cport_b = _free_ports(4)
    work = kafka_sh.work

    started = kafka_sh("start", port_a, cport_a)
    assert started.returncode == 0, started.stderr + started.stdout
    assert f"ready on 127.0.0.1:{port_a}" in started.stdout
    pid_a = int((work / f"port-{port_a}" / "kafka.pid").read_text())
    assert _alive(pid_a) and _open(port_a)
    marker = work / f"port-{port_a}" / "data" / "marker"
    marker.write_text("A's data")

    # status on another port does not report A (was: "running on 127.0.0.1:<B> (pid <A>)")
    other = kafka_sh("status", port_b, cport_b)
    assert (other.returncode, other.stdout.strip()) == (3, f"kafka.sh: not running (127.0.0.1:{port_b} closed)")
    mine = kafka_sh("status", port_a, cport_a)
    assert mine.returncode == 0
    assert mine.stdout.strip() == (f"kafka.sh: running on 127.0.0.1:{port_a} (pid {pid_a}, "
                                   f"pidfile {work}/port-{port_a}/kafka.pid)")

    # `with` on B starts B's own broker, runs the command against it and stops only B
    script = 'echo "bootstrap=$LOOPWATCH_KAFKA_BOOTSTRAP"; (exec 3<>/dev/tcp/127.0.0.1/$KAFKA_PORT) && echo open; exit 7'
    with_b = kafka_sh("with", port_b, cport_b, "bash", "-c", script)
    assert with_b.returncode == 7, with_b.stderr + with_b.stdout
    assert f"bootstrap=127.0.0.1:{port_b}\nopen\n" in with_b.stdout
    assert f"starting broker on 127.0.0.1:{port_b} (controller :{cport_b}" in with_b.stdout
    pid_b = int(re.search(r"stopping broker \(pid (\d+)\)", with_b.stdout).group(1))
    assert pid_b != pid_a and _wait_gone(pid_b)
    assert not _open(port_b) and not (work / f"port-{port_b}" / "kafka.pid").exists()
    assert _alive(pid_a) and _open(port_a)
    assert marker.read_text() == "A's data"  # B's start did not wipe A's data dir
    assert (work / f"port-{port_b}" / "logs" / "kafka.out").exists()

    # `with` on A uses A and leaves it running
    with_a = kafka_sh("with", port_a, cport_a, "true")
    assert with_a.returncode == 0
    assert f"already running on 127.0.0.1:{port_a}: leaving it running afterwards" in with_a.stdout
    assert _alive(pid_a)

    # stop on B touches nothing; stop on A stops A
    stop_b = kafka_sh("stop", port_b, cport_b)
    assert stop_b.stdout.strip() == "kafka.sh: not running" and _alive(pid_a)
    stop_a = kafka_sh("stop", port_a, cport_a)
    assert f"stopping broker (pid {pid_a})" in stop_a.stdout
    assert _wait_gone(pid_a) and not _open(port_a)
    assert not (work / f"port-{port_a}" / "kafka.pid").exists()


@pytest.mark.timeout(120)
def test_a_broker_started_with_the_old_shared_pidfile_is_recognised_on_its_own_port_only(kafka_sh):
    """Before per-port state, kafka.sh kept $KAFKA_WORK/kafka.pid for every port."""
    port_a, cport_a, port_b, cport_b = _free_ports(4)
    work = kafka_sh.work
    assert kafka_sh("start", port_a, cport_a).returncode == 0
    legacy = work / "kafka.pid"
    (work / f"port-{port_a}" / "kafka.pid").rename(legacy)
    pid_a = int(legacy.read_text())

    status_a = kafka_sh("status", port_a, cport_a)
    assert status_a.returncode == 0
    assert status_a.stdout.strip() == f"kafka.sh: running on 127.0.0.1:{port_a} (pid {pid_a}, pidfile {legacy})"
    status_b = kafka_sh("status", port_b, cport_b)
    assert status_b.returncode == 3
    assert kafka_sh("start", port_a, cport_a).stdout.strip() == f"kafka.sh: already running on 127.0.0.1:{port_a} (pid {pid_a})"

    # stop on another port keeps both the broker and its pidfile
    assert kafka_sh("stop", port_b, cport_b).stdout.strip() == "kafka.sh: not running"
    assert _alive(pid_a) and legacy.read_text().strip() == str(pid_a)

    stop_a = kafka_sh("stop", port_a, cport_a)
    assert f"stopping broker (pid {pid_a})" in stop_a.stdout
    assert _wait_gone(pid_a) and not legacy.exists()


@pytest.mark.timeout(60)
def test_with_stops_nothing_when_the_start_fails(kafka_sh, tmp_path):
    port_a, cport_a = _free_ports(2)
    blocker = socket.socket()  # the controller port is taken: start refuses before launching anything
    blocker.bind(("127.0.0.1", cport_a))
    blocker.listen(1)
    try:
        result = kafka_sh("with", port_a, cport_a, "touch", str(tmp_path / "ran"))
    finally:
        blocker.close()
    assert result.returncode == 1
    assert f"controller port 127.0.0.1:{cport_a} is in use" in result.stderr
    assert "stopping" not in result.stdout and not (tmp_path / "ran").exists()


@pytest.mark.timeout(120)
def test_a_start_past_its_timeout_says_the_machines_load_and_stops_the_broker(kafka_sh, tmp_path):
    port_a, cport_a = _free_ports(2)
    env = kafka_sh.env(port_a, cport_a, FAKE_JAVA_DELAY="120", KAFKA_START_TIMEOUT="2")
    result = subprocess.run([str(KAFKA_SH), "start"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    said = re.search(r"broker not ready within 2s \(KAFKA_START_TIMEOUT; load average ([0-9.]+) on (\d+) CPUs\)",
                     result.stderr)
    assert said and int(said.group(2)) == len(os.sched_getaffinity(0)), result.stderr
    pid = int(re.search(r"stopping broker \(pid (\d+)\)", result.stdout).group(1))
    assert _wait_gone(pid) and not (kafka_sh.work / f"port-{port_a}" / "kafka.pid").exists()


@pytest.mark.timeout(150)
def test_with_during_another_calls_start_up_waits_and_leaves_the_broker_to_that_call(kafka_sh):
    port_a, cport_a = _free_ports(2)
    pidfile = kafka_sh.work / f"port-{port_a}" / "kafka.pid"
    starting = subprocess.Popen([str(KAFKA_SH), "start"], env=kafka_sh.env(port_a, cport_a, FAKE_JAVA_DELAY="10"),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pid_a = int(pidfile.read_text())
        assert not _open(port_a)  # still starting (for 10 s: the `with` below must come during the start-up)
        with_a = kafka_sh("with", port_a, cport_a, "bash", "-c", f"(exec 3<>/dev/tcp/127.0.0.1/{port_a}) && echo open")
        assert with_a.returncode == 0, with_a.stdout + with_a.stderr
        assert f"the broker this script started on 127.0.0.1:{port_a} (pid {pid_a}) is starting: waiting" in with_a.stdout
        assert with_a.stdout.rstrip().endswith("open") and "stopping" not in with_a.stdout
        assert starting.wait(60) == 0
        assert f"ready on 127.0.0.1:{port_a}" in starting.stdout.read()
        assert _alive(pid_a) and _open(port_a)
    finally:
        if starting.poll() is None:
            starting.kill()
            starting.wait()
        starting.stdout.close()
    assert f"stopping broker (pid {pid_a})" in kafka_sh("stop", port_a, cport_a).stdout
    assert _wait_gone(pid_a)


@pytest.mark.timeout(120)
def test_the_controller_port_defaults_to_the_broker_port_plus_one_so_two_brokers_do_not_clash(kafka_sh):
    port_a, port_b = _free_port_pairs(2)
    work = kafka_sh.work
    started = {}
    try:
        for port in (port_a, port_b):  # KAFKA_PORT only, as a user moving the broker off 9092 sets it
            started[port] = kafka_sh("start", port, None)
            assert started[port].returncode == 0, started[port].stderr + started[port].stdout
            assert f"starting broker on 127.0.0.1:{port} (controller :{port + 1}," in started[port].stdout
            conf = (work / f"port-{port}" / "server.properties").read_text().splitlines()
            assert f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1}" in conf
            assert f"controller.quorum.voters=1@127.0.0.1:{port + 1}" in conf
        pids = [int((work / f"port-{port}" / "kafka.pid").read_text()) for port in (port_a, port_b)]
        assert pids[0] != pids[1] and all(map(_alive, pids))
        assert all(_open(port) for port in (port_a, port_a + 1, port_b, port_b + 1))
    finally:
        for port in started:
            kafka_sh("stop", port, None)


@pytest.mark.timeout(60)
def test_an_explicit_controller_port_still_wins(kafka_sh):
    port_a, cport_a = _free_ports(2)
    started = kafka_sh("start", port_a, cport_a)
    try:
        assert started.returncode == 0, started.stderr + started.stdout
        assert f"starting broker on 127.0.0.1:{port_a} (controller :{cport_a}," in started.stdout
        conf = (kafka_sh.work / f"port-{port_a}" / "server.properties").read_text().splitlines()
        assert f"listeners=PLAINTEXT://127.0.0.1:{port_a},CONTROLLER://127.0.0.1:{cport_a}" in conf
    finally:
        kafka_sh("stop", port_a, cport_a)


@pytest.mark.timeout(60)
def test_the_default_controller_port_is_taken_says_which_variable_to_set(kafka_sh, tmp_path):
    [port_a] = _free_port_pairs(1)
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", port_a + 1))
    blocker.listen(1)
    try:
        result = kafka_sh("start", port_a, None)
    finally:
        blocker.close()
    assert result.returncode == 1
    assert result.stderr == (f"kafka.sh: ERROR: controller port 127.0.0.1:{port_a + 1} is in use "
                             "(set KAFKA_CONTROLLER_PORT)\n")
    assert not (kafka_sh.work / f"port-{port_a}" / "kafka.pid").exists()


def test_port_65535_has_no_default_controller_port(kafka_sh):
    result = kafka_sh("start", 65535, None)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == ("kafka.sh: ERROR: controller port 65536 is not a port (KAFKA_CONTROLLER_PORT, default "
                             "KAFKA_PORT + 1): set KAFKA_CONTROLLER_PORT\n")


def test_a_kafka_port_that_is_not_a_number_is_refused(kafka_sh):
    result = kafka_sh("status", "90 92", None)  # type: ignore[arg-type]
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "kafka.sh: ERROR: KAFKA_PORT must be a port number, got '90 92'\n"


def test_help_describes_the_controller_port_default():
    shown = subprocess.run([str(KAFKA_SH), "help"], capture_output=True, text=True, timeout=10)
    assert shown.returncode == 0 and shown.stderr == ""
    assert shown.stdout.splitlines()[3] == "usage: kafka.sh fetch|start|stop|status|with CMD...|help"
    assert ("     KAFKA_CONTROLLER_PORT (KAFKA_PORT + 1: 9093 by default; KAFKA_PORT=9192 alone gives 9193),"
            in shown.stdout.splitlines())
    wrong = subprocess.run([str(KAFKA_SH), "restart"], capture_output=True, text=True, timeout=10)
    assert (wrong.returncode, wrong.stdout, wrong.stderr) == (2, "", shown.stdout)
