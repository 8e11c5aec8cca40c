"""What the figures were measured on: the Python build, which sets the pace of everything in the worker."""

from __future__ import annotations

import platform
import sys
import sysconfig


def interpreter() -> str:
    """One line: version, the interpreter's own executable (a venv's base), how libpython is linked,
    and ``--enable-optimizations`` when the build's configure flags record it.

    The worker is Python code, so the interpreter's build matters: pyenv's
    default build (``--enable-shared``, no PGO/LTO) needed 28-49 % more CPU
    per event at saturation here than Debian's ``/usr/bin/python3`` (libpython
    in the executable, profile-guided by Debian's build), see
    ``bench/README.md``. Official builds (python.org, the ``python:3.11-slim``
    image) record ``--enable-optimizations``; distributions may optimise
    without recording it (Debian does), so its absence proves nothing, while
    a shared libpython without it is pyenv's default. The linkage is read
    from ``/proc/self/maps`` (Linux).
    """
    try:
        with open("/proc/self/maps") as maps:
            linkage = "libpython shared" if any("libpython" in line for line in maps) else "libpython in the executable"
    except OSError:
        linkage = "libpython linkage unknown"
    if "--enable-optimizations" in (sysconfig.get_config_var("CONFIG_ARGS") or ""):
        linkage += "; configured --enable-optimizations"
    base = getattr(sys, "_base_executable", None) or sys.executable
    return f"python {platform.python_version()} ({base}; {linkage})"
