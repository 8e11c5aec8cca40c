"""The worker's Faust app (streams/worker/faust_app.py) as Faust's own command line configures it."""

from __future__ import annotations

from streams.worker.faust_app import new_faust_app
from tests.worker_harness import worker_settings


def test_faust_s_worker_command_does_not_turn_the_web_server_on(tmp_path):
    app = new_faust_app(worker_settings("127.0.0.1:9", tmp_path))
    app.conf.web_enabled = True  # what `faust -A streams.app worker` sets (its --with-web, on by default)
    assert list(app.boot_strategy.web_server()) == []
    assert not app.boot_strategy._should_enable_web()
