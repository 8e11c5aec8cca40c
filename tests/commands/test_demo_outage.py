"""Ctrl-C stops `loopwatch demo` while its broker is down, and the outage does not flood its terminal.

Uses a private broker (tests/private_broker.py): the test stops it under the running demo.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.private_broker import broker  # noqa: F401  (the module's own broker)

pytestmark = [pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]


def _as_from_a_terminal() -> None:
    """Ctrl-C as a terminal delivers it, even when the test run itself was started with SIGINT ignored
    (a background job of a shell without job control: Python then keeps ignoring it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.timeout(240)
def test_ctrl_c_stops_the_demo_while_the_broker_is_down(broker, tmp_path):  # noqa: F811
    out, err = tmp_path / "demo.out", tmp_path / "demo.err"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from streams.cli import main; main()", "demo", "--rate", "5",
             "--bootstrap", broker.bootstrap, "--metrics-port", "0", "--timeout", "90",
             "--app-id", f"loopwatch-demo-test-{uuid.uuid4().hex[:8]}"],
            cwd=ROOT, stdout=stdout, stderr=stderr, preexec_fn=_as_from_a_terminal)
    try:
        deadline = time.monotonic() + 120
        while b"[   #]" not in out.read_bytes():  # the header: the worker runs and verdicts flow
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
            time.sleep(0.3)
        broker.stop()
        time.sleep(5)  # the demo's consumer meets the outage
        proc.send_signal(signal.SIGINT)
        # the demo's bound: its worker gets 30 s to stop (then SIGKILL and 10 s), the topic deletion one failed
        # start (10 s request timeout); 90 s leaves the rest to a loaded machine's scheduling
        try:
            status = proc.wait(90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the demo did not stop within 90 s of Ctrl-C:\n{err.read_text()[-3000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
        broker.start()  # the module's broker again, for the fixture's teardown
    text = err.read_text()
    assert status == 0 and "demo: interrupted: stopping" in text, text[-3000:]
    assert "could not delete the demo topics" in text  # it said so instead of waiting for the broker
    # what it gave up on is left quietly, not reported as leaks at exit
    assert "Task was destroyed" not in text and "Unclosed AIOKafka" not in text, text[-3000:]
    # aiokafka's repeated errors, one per template per interval: a handful, not thousands
    assert sum("Unable connect to node" in line for line in text.splitlines()) < 20, text[-3000:]
