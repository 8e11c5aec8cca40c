"""What the figures were measured on: the Python build, which sets the pace of everything in the worker."""

from __future__ import annotations

import platform
import sys
import sysconfig


def interpreter() -> str:
    """One line: version, executable, how libpython is linked, whether the build was configured optimised.

    The worker is Python code, so the interpreter's build matters: pyenv's
    default build (``--enable-shared``, no ``--enable-optimizations``, i.e.
    no PGO/LTO) needed 28-49 % more CPU per event here than Debian's
    ``/usr/bin/python3`` (libpython in the executable, profile-guided by
    Debian's own build), see ``bench/README.md``. Official builds (python.org, the ``python:3.11-slim``
    image of ``deploy/Dockerfile``) are configured ``--enable-optimizations``.
    Distribution builds may be optimised without it showing in the configure
    flags. The linkage is read from ``/proc/self/maps`` (Linux).
    """
    try:
        with open("/proc/self/maps") as maps:
            linkage = "libpython shared" if any("libpython" in line for line in maps) else "libpython in the executable"
    except OSError:
        linkage = "libpython linkage unknown"
    optimised = "--enable-optimizations" in (sysconfig.get_config_var("CONFIG_ARGS") or "")
    return (f"python {platform.python_version()} ({sys.executable}; {linkage}; "
            f"--enable-optimizations {'yes' if optimised else 'not in its configure flags'})")
