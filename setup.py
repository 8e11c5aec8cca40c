"""Build hook for the optional C accelerator of canonical serialisation.

Everything else is declared in pyproject.toml. The extension is optional: if
it cannot be compiled, loopwatch falls back to the pure-Python serialiser,
which produces the same bytes more slowly. Where OpenSSL's headers are
installed (Debian: libssl-dev) it also hashes in C.
"""

import os

from setuptools import Extension, setup

_OPENSSL = os.path.exists("/usr/include/openssl/evp.h") and os.environ.get("LOOPWATCH_NO_OPENSSL") != "1"

setup(
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
