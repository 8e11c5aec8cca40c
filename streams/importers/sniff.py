"""Which recording a file is, from its first bytes: what ``--format auto`` reads each file as.

:func:`sniff` reads at most :data:`HEAD_BYTES` of a file (one ``read``), never the whole of it, and
decides from content only (a file's name never makes it a session; it only tells a companion file
apart, below):

* ``SQLite format 3\\0`` (SQLite's 16-byte header) -> an SQLite database: ``openclaw`` (OpenClaw
  2026.9.x's agent store, ``openclaw-agent.sqlite``; a damaged or other database is reported by
  that importer);
* a first byte that cannot start JSON text (a msgpack map) -> ``events`` when the first record
  decodes to a map whose ``type`` is an event type (a loopwatch event file in msgpack);
* else the first non-blank line, parsed as JSON (a UTF-8 byte-order mark is allowed):

  - ``{"type": "session", "id", "version"}`` -> ``openclaw`` (a transcript);
  - ``{"type": "session_meta"|"response_item"|..., "payload": {...}}`` (a rollout) or
    ``{"type": "thread.started"|"turn.started"}`` (``codex exec --json``) -> ``codex``;
  - ``sessionId`` or ``parentUuid`` in it, or ``type`` ``summary``/``file-history-snapshot``, with a
    ``type`` of lower-case words joined by hyphens (``user``, ``file-history-snapshot``; not a
    dotted one, which other runners' records have) -> ``claude-code`` (a main log or a sub-agent's
    side file);
  - an object with a ``trajectory`` list -> ``swe-agent`` (a trajectory written on one line);
  - ``type`` ``tool_call``/``tool_result``/``compaction_retry`` -> ``events`` (loopwatch event files,
    what ``loopwatch import`` writes);
  - ``{"traceSchema": "openclaw-trajectory"}`` -> in a file named ``<id>.trajectory.jsonl``, an
    OpenClaw trajectory sidecar: read with the transcript beside it, not alone; else ``openclaw``:
    an ``openclaw sessions export-trajectory`` bundle's ``events.jsonl``;
  - anything else -> unknown, with what was found (a verdict file is named as one);

* a first line that is not a whole JSON value: ``swe-agent`` when the head is a JSON object with a
  ``"trajectory": [`` key (SWE-agent writes ``.traj`` files pretty-printed), else unknown.

A configuration file is not a session either: a JSON, JSON5 (OpenClaw's and loopwatch's
``openclaw.json``, with comments) or TOML file (Codex's ``config.toml``) of at most 256 KB whose
top-level object has one of a runner's configuration keys and no ``type`` (:func:`config_kind`:
``tools``, ``agents``, ``policies``, ``options``, ... for OpenClaw and loopwatch; ``hooks``,
``permissions``, ... for Claude Code; ``model_provider``, ``approval_policy``, ... for Codex).
``config`` is set and the reason names it; the commands list it as left out, not as an error.

Companion files (never sessions themselves, so never "unknown" when their main file is there):
OpenClaw trajectory sidecars (``<id>.trajectory.jsonl``) and SQLite's ``-wal``, ``-shm`` and
``-journal`` files.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from streams.wire.codecs import json_loads
from . import claude_code, codex, openclaw, swe_agent
from .compressed import CompressedDataError, compression, plain_name

__all__ = ["Sniffed", "sniff", "read_head", "config_kind", "EVENTS", "HEAD_BYTES", "SQLITE_MAGIC", "companion_of", "main_file_present"]

EVENTS = "events"
"""The format name of loopwatch event files (JSON Lines or msgpack), beside the session formats."""
HEAD_BYTES = 1024 * 1024
"""At most this much of a file is read to tell its format (a Codex ``session_meta`` line carries the
model's whole instructions: tens of KB)."""
SQLITE_MAGIC = b"SQLite format 3\x00"
_BOM = b"\xef\xbb\xbf"
_EVENT_TYPES = frozenset({"tool_call", "tool_result", "compaction_retry"})
_SIDECAR_SCHEMA = "openclaw-trajectory"
# Claude Code's record types are words in lower case joined by hyphens (user, file-history-snapshot, ...); a dotted
# type is another runner's event (an OpenClaw trajectory record, `codex exec --json`) that has a sessionId
_CLAUDE_CODE_TYPE = re.compile(r"[a-z]+(?:-[a-z]+)*")
_TRAJECTORY_KEY = re.compile(rb'^\s*\{.*?"trajectory"\s*:\s*\[', re.DOTALL)
_SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")
_CONFIG_MAX_BYTES = 256 * 1024  # a configuration file is parsed whole (JSON5 is slow): larger files are no config
_SIDECAR = "an OpenClaw trajectory sidecar (read with its transcript, which is not there)"


@dataclass(frozen=True, slots=True)
class Sniffed:
    """What a file is.

    ``format``: a key of :data:`streams.importers.FORMATS`, :data:`EVENTS`, or None (not a
    recording this can read); ``reason``: why None, in words; ``companion``: the file this one is
    read with (an OpenClaw transcript for its sidecar, a database for its WAL), when ``format`` is None
    because the file is a companion; ``config``: the file is a configuration file (:func:`config_kind`).
    """

    format: str | None
    reason: str | None = None
    companion: Path | None = None
    config: bool = False


def companion_of(path: Path) -> Path | None:
    """The main file a companion file goes with, by name (it may not exist; an OpenClaw sidecar's
    transcript may also be an archived copy, ``<id>.jsonl.reset.<ts>``: :func:`main_file_present`), or None."""
    name = plain_name(path.name)
    if openclaw.SIDECAR_SUFFIX in name:
        return path.with_name(name.split(openclaw.SIDECAR_SUFFIX, 1)[0] + ".jsonl")
    for suffix in _SQLITE_COMPANIONS:
        if name.endswith(suffix) and len(name) > len(suffix):
            return path.with_name(name[: -len(suffix)])
    return None


def main_file_present(main: Path) -> bool:
    """Whether the main file of a companion (:func:`companion_of`) is there, or an archived copy of it."""
    if main.is_file():
        return True
    prefix = main.name + "."
    try:
        return any(p.name.startswith(prefix) and p.is_file() for p in main.parent.iterdir())
    except OSError:
        return False


def sniff(path: Path, sqlite_format: str | None = None) -> Sniffed:
    """Tell the format of ``path`` from its first bytes (see the module docstring).

    ``sqlite_format``: the format that reads SQLite databases (None: a database is unknown).
    Never raises: a file that cannot be read is ``Sniffed(None, "cannot read: ...")``. A file of no
    known format whose name is a companion's (:func:`companion_of`) has ``companion`` set.
    """
    path = Path(path)
    try:
        head = read_head(path)
    except OSError as exc:
        return Sniffed(None, f"cannot read: {exc.strerror or exc}")
    except CompressedDataError as exc:
        return Sniffed(None, f"cannot read: {exc}")
    found = _sniff_head(head, sqlite_format)
    if found.reason == _SIDECAR and openclaw.SIDECAR_SUFFIX not in path.name:
        return Sniffed("openclaw")  # trajectory records not beside a transcript: an export-trajectory bundle
    if found.format is None:
        companion = companion_of(path)
        if companion is not None:
            return Sniffed(None, found.reason, companion)
    return found


def read_head(path: Path) -> bytes:
    """At most :data:`HEAD_BYTES` of a file, decompressed when it is gzip or Zstandard: as much as its
    first :data:`HEAD_BYTES` compressed bytes give, so a file cut short still shows its head.

    Raises:
        OSError: cannot read. CompressedDataError: the compressed head itself is damaged.
    """
    with path.open("rb") as fh:
        head = fh.read(HEAD_BYTES)
    kind = compression(head)
    try:
        if kind == "gzip":
            gz = zlib.decompressobj(wbits=31)
            out, ended = gz.decompress(head, HEAD_BYTES), gz.eof
        elif kind == "zstd":
            import io

            import zstandard

            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(head), read_across_frames=True) as reader:
                out = reader.read(HEAD_BYTES)  # at most that much, however well the data compresses
            if not out:  # nothing came out: a frame cut short (one block holds up to 128 KiB), or an empty one
                zs = zstandard.ZstdDecompressor().decompressobj()
                zs.decompress(head)
                ended = zs.eof
        else:
            return head
    except Exception as exc:  # zlib.error, zstandard.ZstdError
        raise CompressedDataError(f"{kind} data damaged ({exc})") from None
    if not out and not ended:
        raise CompressedDataError(f"{kind} data cut short or damaged (nothing of it decompresses)")
    return out


def _sniff_head(head: bytes, sqlite_format: str | None) -> Sniffed:
    if head.startswith(SQLITE_MAGIC):
        if sqlite_format is not None:
            return Sniffed(sqlite_format)
        return _unknown("an SQLite database this loopwatch has no importer for")
    stripped = head.removeprefix(_BOM).lstrip()
    if not stripped:
        return _unknown("empty file" if not head else "blank file")
    if stripped[0] >= 0x80 or (stripped[0] < 0x20 and stripped[0] not in b"\t\n\r"):
        return _sniff_msgpack(stripped)
    newline = stripped.find(b"\n")
    line = stripped if newline < 0 else stripped[:newline]
    try:
        first = json_loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return _unknown(f"not UTF-8 text (at byte {exc.start} of the first line)")
    except json.JSONDecodeError as exc:
        if _TRAJECTORY_KEY.match(stripped):
            return Sniffed("swe-agent")
        if len(head) <= _CONFIG_MAX_BYTES:  # the whole file: a pretty-printed, JSON5 or TOML configuration?
            found = _config_document(stripped)
            if found is not None:
                return found
        if newline < 0 and len(head) >= HEAD_BYTES:
            return _unknown(f"first line longer than {HEAD_BYTES:,} bytes and not a SWE-agent trajectory")
        return _unknown(f"first line is not JSON ({exc.msg})")
    return _sniff_json(first)


def _sniff_json(first: Any) -> Sniffed:
    if not isinstance(first, dict):
        return _unknown(f"first line is a JSON {type(first).__name__}, not a record")
    if first.get("traceSchema") == _SIDECAR_SCHEMA:  # before Claude Code's test: it has a sessionId too
        return Sniffed(None, _SIDECAR)
    if openclaw.looks_like(first):
        return Sniffed("openclaw")
    if codex.looks_like(first):
        return Sniffed("codex")
    if claude_code.looks_like(first) and _CLAUDE_CODE_TYPE.fullmatch(str(first.get("type", ""))):
        return Sniffed("claude-code")
    if swe_agent.looks_like(first):
        return Sniffed("swe-agent")
    if first.get("type") in _EVENT_TYPES:
        return Sniffed(EVENTS)
    if isinstance(first.get("verdict"), str):
        return Sniffed(None, "a verdict file, not recorded sessions (give it to loopwatch report)")
    if config_kind(first) is not None:
        return _config(first)
    keys = ", ".join(repr(k) for k in list(first)[:5]) or "none"
    return _unknown(f"first record is no known session format (its keys: {keys})")


# top-level keys of the configuration files a fleet folder holds beside sessions: OpenClaw's openclaw.json (and
# loopwatch's, which adds policies and options), Claude Code's settings.json, Codex's config.toml
_CONFIG_KEYS = {
    "OpenClaw or loopwatch": frozenset({"tools", "policies", "options", "agents", "models", "gateway", "plugins",
                                        "channels", "skills"}),
    "Claude Code": frozenset({"hooks", "permissions", "enabledPlugins", "statusLine", "apiKeyHelper"}),
    "Codex": frozenset({"model_provider", "model_providers", "approval_policy", "sandbox_mode", "mcp_servers",
                        "profiles", "features", "notify"}),
}


def config_kind(document: Any) -> str | None:
    """Whose configuration file a parsed document looks like (``OpenClaw or loopwatch``, ``Claude Code``,
    ``Codex``), by its top-level keys, or None: an object with one of the keys only that runner's
    configuration has at its top, and no ``type`` (a record)."""
    if not isinstance(document, dict) or "type" in document:
        return None
    return next((kind for kind, keys in _CONFIG_KEYS.items() if keys & document.keys()), None)


def _config(document: dict) -> Sniffed:
    kind = config_kind(document)
    keys = ", ".join(sorted(k for k in document if k in _CONFIG_KEYS[kind])[:4])
    return Sniffed(None, f"a configuration file ({kind}: {keys}), not a session", config=True)


def _config_document(text: bytes) -> Sniffed | None:
    """A whole file that parses as JSON5 (JSON with comments, pretty-printed JSON) or TOML and is a
    configuration (:func:`config_kind`), else None."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        return None
    document: Any = None
    if decoded[:1] in ("{", "/"):
        import json5

        try:
            document = json5.loads(decoded)
        except (ValueError, RecursionError):
            return None
    else:
        import tomllib

        try:
            document = tomllib.loads(decoded)
        except (tomllib.TOMLDecodeError, RecursionError):
            return None
    return _config(document) if config_kind(document) is not None else None


def _sniff_msgpack(data: bytes) -> Sniffed:
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(data) + 1)
    unpacker.feed(data)
    try:
        first = unpacker.unpack()
    except msgpack.OutOfData:  # the head ends inside the first record: a map at least
        return Sniffed(EVENTS) if data[0] in range(0x80, 0x90) or data[0] in (0xDE, 0xDF) else _BINARY
    except Exception:  # msgpack raises several types (ExtraData, FormatError, ValueError, ...)
        return _BINARY
    if isinstance(first, dict) and first.get("type") in _EVENT_TYPES:
        return Sniffed(EVENTS)
    return _BINARY


def _unknown(detail: str) -> Sniffed:
    return Sniffed(None, f"no known format ({detail})")


_BINARY = _unknown("binary, neither SQLite nor msgpack events")
