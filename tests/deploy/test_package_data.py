"""The wheel carries what `loopwatch demo` and the docs need: the example fleet and config, the broker script.

setup.py's ``build_py`` copies them into ``streams/bundled/`` (the step a wheel
build runs); :func:`streams.assets.asset` finds them there when no checkout is
around. The whole install (wheel, fresh virtualenv, demo against a broker,
replay of the example) is deploy/check-wheel.sh, run by make test (and so CI) after the tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streams import assets

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The package as a wheel build lays it out (setup.py build_py), in a folder outside the checkout."""
    out = tmp_path_factory.mktemp("build")
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "-d", str(out)], cwd=ROOT, check=True,
                   capture_output=True)
    return out


def test_the_sdist_carries_the_shipped_files():
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8").split()
    assert set(assets.BUNDLED) <= set(manifest)
    # what the demo needs is listed: the files kafka.sh reads beside it, and the examples it replays
    assert {p.name for p in (ROOT / "deploy" / "kafka").iterdir() if p.is_file()} == {
        Path(p).name for p in assets.BUNDLED if p.startswith("deploy/kafka/")}


def test_the_build_puts_each_file_in_the_package_unchanged_and_the_script_executable(built):
    bundled = built / "streams" / "bundled"
    assert sorted(str(p.relative_to(bundled)) for p in bundled.rglob("*") if p.is_file()) == sorted(assets.BUNDLED)
    for relative in assets.BUNDLED:
        copy = built / "streams" / "bundled" / relative
        assert copy.read_bytes() == (ROOT / relative).read_bytes(), relative
    assert os.access(built / "streams" / "bundled" / "deploy" / "kafka" / "kafka.sh", os.X_OK)


def test_outside_a_checkout_the_files_and_the_work_folder_come_from_the_install(built, monkeypatch, tmp_path):
    installed = built / "streams"
    monkeypatch.setattr(assets, "_HERE", installed)  # as if imported from site-packages/streams
    monkeypatch.delenv("LOOPWATCH_WORK", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert assets.checkout() is None
    assert assets.asset("examples/events.jsonl") == installed / "bundled" / "examples" / "events.jsonl"
    assert assets.work_dir() == tmp_path / "cache" / "loopwatch"
    with pytest.raises(FileNotFoundError, match="README.md is not shipped"):
        assets.asset("README.md")


def test_in_the_checkout_the_files_are_read_where_they_are(monkeypatch):
    monkeypatch.delenv("LOOPWATCH_WORK", raising=False)
    assert assets.checkout() == ROOT
    assert assets.asset("deploy/kafka/kafka.sh") == ROOT / "deploy" / "kafka" / "kafka.sh"
    assert assets.work_dir() == ROOT / ".work"
    monkeypatch.setenv("LOOPWATCH_WORK", "/somewhere")
    assert assets.work_dir() == Path("/somewhere")
