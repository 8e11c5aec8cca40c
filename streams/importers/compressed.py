"""Compressed session files read as if they were not: gzip (``.jsonl.gz``, ``.json.gz``, ``.traj.gz``,
``.sqlite.gz``, ...) and Zstandard (``.zst``, what OpenClaw 2026.9 compresses its archived transcripts with).

What a file is compressed with is told from its first bytes (gzip ``1f 8b``, a Zstandard frame ``28 b5 2f
fd``), never from its name; the name only loses its compression suffix (:func:`plain_name`) where an importer
reads meaning from names (an OpenClaw sidecar, a Codex rollout, an SQLite database). Every importer opens
its files through :func:`open_binary`, and a database, which SQLite can only open as a file, through
:func:`local_copy`.

Errors: a compressed stream cut short or damaged raises :class:`CompressedDataError` (a ``ValueError``)
where reading reaches the damage, so an importer keeps what it read before and reports the rest of the
file as unreadable.
"""

from __future__ import annotations

import contextlib
import io
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["GZIP_MAGIC", "ZSTD_MAGIC", "SUFFIXES", "compression", "open_binary", "plain_name", "present_copy",
           "local_copy",
           "CompressedDataError"]

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SUFFIXES = (".gz", ".zst")
"""Name suffixes :func:`plain_name` takes off."""
_CHUNK = 1024 * 1024
_ZSTD_INPUT = 64 * 1024


class CompressedDataError(ValueError):
    """A gzip or Zstandard stream that is cut short or damaged; ``str()`` says which and how."""


def compression(head: bytes) -> str | None:
    """``"gzip"``, ``"zstd"`` or None, from a file's first bytes."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


def present_copy(path: Path) -> Path:
    """``path`` when it is a file, else its compressed copy (``<path>.gz``, ``<path>.zst``) when that is,
    else ``path`` (a companion file looked up by name: a sidecar, a sub-agent's log)."""
    return next((c for c in (path, *(path.with_name(path.name + s) for s in SUFFIXES)) if c.is_file()), path)


def plain_name(name: str) -> str:
    """``name`` without a trailing ``.gz`` / ``.zst`` (``a.jsonl.gz`` -> ``a.jsonl``)."""
    for suffix in SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


class _Checked(io.RawIOBase):
    """A decompressing reader whose damage surfaces as :class:`CompressedDataError` (gzip raises
    ``EOFError``, ``BadGzipFile``, ``zlib.error``; zstandard its ``ZstdError``)."""

    def __init__(self, inner: BinaryIO, kind: str, path: Path) -> None:
        self._inner, self._kind, self._path = inner, kind, path

    def readable(self) -> bool:
        return True

    _rest = b""

    def readinto(self, buffer) -> int:
        try:
            data = self._rest or self._inner.read1(len(buffer))  # read(n) would wait for n bytes, lost at damage
        except (EOFError, OSError, zlib.error) as exc:
            raise CompressedDataError(f"{self._kind} data cut short or damaged ({exc})") from None
        except Exception as exc:  # zstandard.ZstdError (not imported unless a zstd file is met)
            if type(exc).__name__ == "ZstdError":
                raise CompressedDataError(f"{self._kind} data cut short or damaged ({exc})") from None
            raise
        data, self._rest = data[: len(buffer)], data[len(buffer):]
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()


class _ZstdReader:
    """Zstandard frames decompressed one input chunk at a time, ``read1`` giving what each chunk gave; input
    that ends inside a frame raises ``EOFError`` (zstandard's own stream reader ends there without a word)."""

    def __init__(self, raw: BinaryIO) -> None:
        import zstandard

        self._raw, self._new = raw, zstandard.ZstdDecompressor().decompressobj
        self._obj, self._started = self._new(), False

    def read1(self, size: int) -> bytes:
        while True:
            chunk = self._raw.read(_ZSTD_INPUT)  # small: what one chunk expands to is held at once
            if not chunk:
                if self._started and not self._obj.eof:
                    raise EOFError("the file ends inside a Zstandard frame")
                return b""
            out = []
            while chunk:
                self._started = True
                out.append(self._obj.decompress(chunk))
                chunk = self._obj.unused_data if self._obj.eof else b""
                if self._obj.eof:
                    self._obj, self._started = self._new(), bool(chunk)
            data = b"".join(out)
            if data:
                return data  # may exceed size: _Checked keeps the rest

    def close(self) -> None:
        self._raw.close()


def open_binary(path: str | Path) -> BinaryIO:
    """``path`` opened for reading bytes, decompressed when its first bytes say gzip or Zstandard.

    Raises:
        OSError: the file cannot be opened. Reading raises :class:`CompressedDataError` at damage.
    """
    path = Path(path)
    raw = path.open("rb")
    try:
        kind = compression(raw.read(4))
        raw.seek(0)
        if kind == "gzip":
            import gzip  # these imports only when a compressed file is met: they cost the command memory

            inner: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb")
        elif kind == "zstd":
            inner = _ZstdReader(raw)
        else:
            return raw
    except BaseException:
        raw.close()
        raise
    return io.BufferedReader(_Checked(inner, kind, path), buffer_size=_CHUNK)


@contextlib.contextmanager
def local_copy(path: str | Path) -> Iterator[Path]:
    """``path`` itself when it is not compressed, else its decompressed bytes in a temporary file (removed
    on exit): for SQLite, which opens files only.

    Raises:
        OSError: cannot read or write; CompressedDataError: the compressed data is damaged.
    """
    path = Path(path)
    with path.open("rb") as fh:
        kind = compression(fh.read(4))
    if kind is None:
        yield path
        return
    import shutil
    import tempfile

    fd, name = tempfile.mkstemp(prefix="loopwatch-", suffix="-" + plain_name(path.name))
    try:
        with os.fdopen(fd, "wb") as out, open_binary(path) as src:
            shutil.copyfileobj(src, out, _CHUNK)
        yield Path(name)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)

