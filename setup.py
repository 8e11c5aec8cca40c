"""Build hooks: the optional C accelerator of canonical serialisation, and the shipped files.

Everything else is declared in pyproject.toml. The extension is optional: if
it cannot be compiled, loopwatch falls back to the pure-Python serialiser,
which produces the same bytes more slowly. Where OpenSSL's headers are
installed (Debian: libssl-dev) it also hashes in C.
"""

import os
import runpy
import shutil

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

_HERE = os.path.dirname(os.path.abspath(__file__))

# The files `loopwatch demo` and the docs need beside the code, copied into the package as
# streams/bundled/<path> so that an installed wheel has them. The list is streams/assets.py's
# BUNDLED, read from the file: setup.py runs before the package can be imported.
BUNDLED = runpy.run_path(os.path.join(_HERE, "streams", "assets.py"))["BUNDLED"]


class BuildWithAssets(build_py):
    """build_py, then the shipped files into <build>/streams/bundled/ (modes kept: kafka.sh stays executable)."""

    def run(self):
        super().run()
        for relative in BUNDLED:
            target = os.path.join(self.build_lib, "streams", "bundled", relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(os.path.join(_HERE, relative), target)


_OPENSSL = os.path.exists("/usr/include/openssl/evp.h") and os.environ.get("LOOPWATCH_NO_OPENSSL") != "1"

setup(
    cmdclass={"build_py": BuildWithAssets},
    ext_modules=[
        Extension(
            "streams.detection._canonical",
            ["streams/detection/_canonical.c"],
            optional=True,
            extra_compile_args=["-O2"],
            define_macros=[("LOOPWATCH_OPENSSL", "1")] if _OPENSSL else [],
            libraries=["crypto"] if _OPENSSL else [],
        )
    ]
)
