"""Wire formats of events and verdicts: msgpack by default, JSON accepted.

An event record's value is one msgpack map, or one JSON object (UTF-8). The
decoder tells them apart by the first byte: a JSON object starts with ``{``
(or `[`, after optional whitespace), which is never the first byte of a msgpack map
(``0x80``-``0x8f``, ``0xde``, ``0xdf``).

Event files (``loopwatch replay``, ``loopwatch produce``) are JSON Lines or a
concatenated msgpack stream; :func:`read_event_file` yields each event with
its position (line number, or record number for msgpack) so that a bad
record can be reported and skipped without stopping the run.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator

import msgpack

__all__ = [
    "DecodeError",
    "decode_event",
    "unpack_msgpack",
    "encode_msgpack",
    "encode_json",
    "json_loads",
    "UnplacedJSONError",
    "non_finite",
    "record_encoder",
    "MAX_REQUEST_SIZE",
    "BROKER_MESSAGE_MAX_BYTES",
    "MAX_CARRIED_BYTES",
    "fits",
    "record_size",
    "too_large_reason",
    "read_event_file",
    "FileRecord",
]


class DecodeError(ValueError):
    """A record that is not a msgpack map or JSON object; ``str()`` gives the reason."""


_TOO_DEEP = "nested too deeply to decode"


class UnplacedJSONError(json.JSONDecodeError):
    """JSON input refused as a whole, without a position: nested too deeply for Python, or a number JSON
    cannot hold (``NaN``, ``Infinity``, ``1e999``). ``str()`` is the reason alone."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, "", 0)

    def __str__(self) -> str:
        return self.msg


def _no_constant(name: str) -> Any:
    raise UnplacedJSONError(f"{name} is not JSON")


def _finite(text: str) -> float:
    """A JSON number as a float; one beyond a double's range (``1e999``, which Python would read as
    infinity) is refused: JSON cannot hold infinity, and no encoder downstream can send it back."""
    value = float(text)
    if math.isinf(value):
        raise UnplacedJSONError(f"number {text[:40]} is beyond what JSON can hold (about 1.8e308)")
    return value


def non_finite(value: Any) -> str | None:
    """Where in ``value`` (a decoded msgpack record) a float JSON cannot hold is (``NaN``, infinity): e.g.
    ``"NaN at args.x"``; None when there is none. Event files in msgpack are held to what JSON holds,
    as JSON Lines files are (:func:`json_loads`)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{'NaN' if item != item else 'Infinity' if item > 0 else '-Infinity'} at {where or 'the top'}"
        elif isinstance(item, dict):
            stack.extend((f"{where}.{key}" if where else str(key), inner) for key, inner in item.items())
        elif isinstance(item, list):
            stack.extend((f"{where}[{n}]", inner) for n, inner in enumerate(item))
    return None


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)
"""One decoder for every call: ``json.loads`` with hooks would build a decoder and its scanner each time."""


def json_loads(text: str | bytes) -> Any:
    """``json.loads`` as every reader of loopwatch's input takes JSON (event files, recorded sessions, the
    gateway's bodies, JSON records): only what JSON holds. ``NaN``, ``Infinity`` and numbers beyond a double
    (``1e999``), which Python's ``json`` reads by default and JavaScript's ``JSON.parse`` refuses, raise
    :class:`UnplacedJSONError` ("NaN is not JSON"), and so does a document nested too deeply for Python
    (about 1,000 levels: "nested too deeply to decode", not ``RecursionError``); both are
    ``json.JSONDecodeError``."""
    if not isinstance(text, str):  # as json.loads reads bytes
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    elif text.startswith("\ufeff"):  # as json.loads says it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise UnplacedJSONError(_TOO_DEEP) from None


def _looks_like_msgpack(first: int) -> bool:
    """Whether a value starting with byte ``first`` is msgpack rather than JSON text.

    JSON text starts with printable ASCII or whitespace; a msgpack map (the
    event) starts with 0x80-0x8f, 0xde or 0xdf, and every msgpack value
    starts with a byte >= 0x80 or a control byte unless it is a small integer.
    So a text line that is not JSON is reported as invalid JSON, not as
    broken msgpack.
    """
    return first >= 0x80 or (first < 0x20 and first not in b" \t\r\n")


def decode_event(data: bytes) -> dict[str, Any]:
    """Decode one event record value (msgpack map or JSON object).

    Raises:
        DecodeError: empty, undecodable, or not a map/object.
    """
    if not data:
        raise DecodeError("empty record value")
    first = data[0]
    if first >= 0x80 or _looks_like_msgpack(first):  # the first test alone is the usual event (a map), at no call
        value = unpack_msgpack(data)
    else:
        value = _load_json(data)
    if not isinstance(value, dict):
        raise DecodeError(f"an event must be a map/object, got {type(value).__name__}")
    return value


def unpack_msgpack(data: bytes) -> Any:
    """The one msgpack value ``data`` holds (maps with keys of any hashable kind).

    Raises:
        DecodeError: for whatever msgpack raises on it ("invalid msgpack: <reason>"): corrupt or
            truncated data, extra bytes, nesting deeper than msgpack's stack, invalid UTF-8, or a map
            key that is itself a map or an array (Python cannot hash it: msgpack raises ``TypeError``).
    """
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except TypeError as exc:  # the only TypeError msgpack raises on bytes: a map or array as a map key
        raise DecodeError(f"invalid msgpack: a map key is a map or an array ({exc})") from None
    except Exception as exc:  # any other reason: a record value must never stop a reader
        raise DecodeError(f"invalid msgpack: {str(exc) or type(exc).__name__}") from None


def _load_json(data: bytes) -> Any:
    """The JSON value of one record (a JSON Lines line, or a Kafka record value).

    Raises:
        DecodeError: "invalid JSON at column C: <why>" (C counts characters from 1 in the record, so for
            a line of a JSON Lines file the file's ``line:column`` is the reader's line and C; a record
            value that spans lines says "at line L column C of the record"), or "invalid JSON: <why>"
            without a position (not UTF-8, an integer of more than 4,300 digits, nested too deeply).
    """
    try:
        return json_loads(data)
    except json.JSONDecodeError as exc:
        if isinstance(exc, UnplacedJSONError):  # no position: the whole document
            raise DecodeError(f"invalid JSON: {exc.msg}") from None
        where = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno} column {exc.colno} of the record"
        raise DecodeError(f"invalid JSON at {where}: {exc.msg}") from None
    except Exception as exc:  # UnicodeDecodeError, ValueError (an integer of >4,300 digits)
        raise DecodeError(f"invalid JSON: {exc}") from None


def encode_msgpack(value: Any) -> bytes:
    """msgpack bytes of a JSON-like value (str as str, bytes as bin)."""
    return msgpack.packb(value, use_bin_type=True)


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON of a JSON-like value; ASCII-escaped if it holds a lone surrogate (JSON input can
    carry one, UTF-8 cannot), which reads back as the same value."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return _ascii_json(value)


def _ascii_json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def record_encoder(codec: str) -> Callable[[Any], bytes]:
    """The record value encoder of ``codec`` (``msgpack`` or ``json``): events as ``loopwatch produce``
    and the client send them, verdicts and loop events as the worker publishes them.

    A value one codec cannot carry goes in the other, which :func:`decode_event`
    (the worker, the client, ``tail``) reads too, giving back the same value: for
    msgpack, integers beyond 64 bits and lone surrogates (JSON input may hold
    them) go as ASCII-escaped JSON; for JSON, bytes and msgpack extension types
    (msgpack input may hold them, e.g. in a verdict's ``event_source``) go as
    msgpack. Every value decoded from either codec can thus be encoded.

    The encoder raises ``ValueError`` ("cannot encode the event as JSON or msgpack: <reason>") for a
    value neither can encode (e.g. one holding a set).
    """
    # a Packer of its own: packb builds one per call, a cost on the worker's per-verdict path
    pack = msgpack.Packer(use_bin_type=True).pack
    primary, fallback = (pack, _ascii_json) if codec == "msgpack" else (encode_json, pack)

    def encode(event: Any) -> bytes:
        try:
            return primary(event)
        except (OverflowError, TypeError, ValueError, UnicodeEncodeError, RecursionError):
            pass
        try:
            return fallback(event)
        except (OverflowError, TypeError, ValueError, UnicodeEncodeError) as exc:
            raise ValueError(f"cannot encode the event as JSON or msgpack: {exc}") from None
        except RecursionError:  # msgpack stops at 511 levels, JSON at about 1,000
            raise ValueError("cannot encode the event as JSON or msgpack: nested too deeply") from None

    return encode


MAX_REQUEST_SIZE = 1_048_576
"""The producer's default limit on one record, bytes (Kafka's ``max.request.size``, aiokafka's ``max_request_size``)."""

BROKER_MESSAGE_MAX_BYTES = 1_048_588
"""Kafka's default ``message.max.bytes``, bytes: a topic's default ``max.message.bytes``."""


MAX_CARRIED_BYTES = 1_000_000
"""Largest record (key and value bytes) the worker publishes: :func:`fits`, for every record the worker writes.

Kafka's default record batch limit (``message.max.bytes``) is 1,048,588
bytes; the rest is room for the batch and record headers. An input record
near that limit no longer fits once wrapped (a dead letter, a rekey forward)
or repeated (a verdict repeats the tool name), and a refused write would stop
the worker at every restart: what does not fit is cut down to fit.
"""


def fits(key: bytes | None, value: bytes) -> bool:
    """Whether a record of ``key`` and ``value`` is within :data:`MAX_CARRIED_BYTES`."""
    return len(key or b"") + len(value) <= MAX_CARRIED_BYTES


def record_size(key: bytes | None, value: bytes) -> int:
    """Bytes of one record in a Kafka record batch, as the producer counts it against ``max_request_size``."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    return DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, [])


def too_large_reason(size: int, producer_limit: int | None = None, raised_by: str = "") -> str:
    """Why Kafka refuses an event record of ``size`` bytes (:func:`record_size`), for ``produce`` and the client.

    Arguments:
        producer_limit: the producer's ``max_request_size`` when it refused the
            record; None when the broker did (over the topic's ``max.message.bytes``).
        raised_by: what raises the producer's limit (a flag, an option).
    """
    topic_limit = (f"the topic's max.message.bytes, by default the broker's message.max.bytes of "
                   f"{BROKER_MESSAGE_MAX_BYTES:,} bytes")
    if producer_limit is None:
        return (f"the broker refused the event as too large ({size:,} bytes as a Kafka record): over "
                f"{topic_limit}; raise that to send it")
    return (f"the event is {size:,} bytes as a Kafka record, over the producer's max_request_size of "
            f"{producer_limit:,} bytes ({raised_by} raises it; {topic_limit}, must allow it too)")


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One record of an event file: the event, or the reason it could not be read.

    ``position`` is the 1-based line (JSON Lines) or record number (msgpack).
    """

    path: str
    position: int
    event: dict[str, Any] | None
    error: str | None = None


_BOM = b"\xef\xbb\xbf"


def _sniff_msgpack(head: bytes) -> bool:
    stripped = head.removeprefix(_BOM).lstrip()
    return bool(stripped) and _looks_like_msgpack(stripped[0])


def read_event_file(path: str | Path, stream: IO[bytes] | None = None) -> Iterator[FileRecord]:
    """Yield every record of a JSON Lines or msgpack event file, bad ones included.

    Arguments:
        path: the file (``-`` for standard input when ``stream`` is given).
        stream: an already open binary stream to read instead of ``path``.
    The format is sniffed from the first non-blank byte: msgpack when it
    cannot start JSON text (a byte >= 0x80 or a control byte), JSON Lines
    otherwise, so a bad first line costs that line only.
    """
    name = str(path)
    handle = stream if stream is not None else open(path, "rb")
    try:
        buffered = handle if isinstance(handle, io.BufferedReader) else io.BufferedReader(handle)  # type: ignore[arg-type]
        head = buffered.peek(64)[:64]
        if _sniff_msgpack(head):
            yield from _read_msgpack(name, buffered)
        else:
            yield from _read_json_lines(name, buffered)
    finally:
        if stream is None:
            handle.close()


def _read_json_lines(name: str, handle: IO[bytes]) -> Iterator[FileRecord]:
    for number, line in enumerate(handle, start=1):
        if number == 1:
            line = line.removeprefix(_BOM)  # editors on Windows write one
        if not line.strip():
            continue
        try:
            value = _load_json(line)
        except DecodeError as exc:
            yield FileRecord(name, number, None, str(exc))
            continue
        if not isinstance(value, dict):
            yield FileRecord(name, number, None, f"an event must be an object, got {type(value).__name__}")
            continue
        yield FileRecord(name, number, value)


_CHUNK = 64 * 1024
_MAX_FILE_RECORD = 100 * 1024 * 1024
"""Largest msgpack record of an event file, bytes (msgpack's default buffer limit; Kafka takes ~1 MB)."""


def _read_msgpack(name: str, handle: IO[bytes]) -> Iterator[FileRecord]:
    """Records of a msgpack stream: boundaries found by skipping (which builds no value), then each
    record decoded alone, so one that cannot be decoded (a map key that is a map, invalid UTF-8)
    costs that record only. Only corrupt framing ends the file early: there is no boundary left."""
    skipper = msgpack.Unpacker(max_buffer_size=_MAX_FILE_RECORD)
    read = getattr(handle, "read1", handle.read)  # what is there: a pipe's records are not held back
    pending = bytearray()  # the bytes fed to the skipper from offset `base` on
    base = start = number = 0
    eof = False
    while True:
        try:
            skipper.skip()
        except msgpack.OutOfData:
            if eof:
                if start < base + len(pending):
                    yield FileRecord(name, number + 1, None, "truncated msgpack record at the end of the file")
                return
            chunk = read(_CHUNK)
            if not chunk:
                eof = True
                continue
            try:
                skipper.feed(chunk)
            except msgpack.BufferFull:
                yield FileRecord(name, number + 1, None, f"a msgpack record over {_MAX_FILE_RECORD:,} bytes; "
                                 "the rest of the file is skipped")
                return
            pending += chunk
            continue
        except Exception as exc:  # FormatError, StackError: a corrupt stream has no boundaries to resynchronise on
            reason = str(exc) or type(exc).__name__
            yield FileRecord(name, number + 1, None, f"invalid msgpack ({reason}); the rest of the file is skipped")
            return
        number += 1
        end = skipper.tell()
        data = bytes(pending[start - base:end - base])
        start = end
        if start - base >= _CHUNK:
            del pending[:start - base]
            base = start
        try:
            value = unpack_msgpack(data)
        except DecodeError as exc:
            yield FileRecord(name, number, None, str(exc))
            continue
        if not isinstance(value, dict):
            yield FileRecord(name, number, None, f"an event must be a map, got {type(value).__name__}")
            continue
        where = non_finite(value)
        if where is not None:
            yield FileRecord(name, number, None, f"a number JSON cannot hold: {where}")
            continue
        yield FileRecord(name, number, value)
