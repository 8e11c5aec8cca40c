"""Build hook for the optional C accelerator of canonical serialisation.

Everything else is declared in pyproject.toml. The extension is optional: if
it cannot be compiled, loopwatch falls back to the pure-Python serialiser,
which produces the same bytes more slowly.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "streams.detection._canonical",
            ["streams/detection/_canonical.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
