"""The rekey envelope: a keyless input record forwarded to ``<app_id>-rekey`` under its state key.

The value is the msgpack array ``[origin topic, origin partition, origin offset, raw value, timestamp ms]``
(raw value: bin; timestamp: int or nil), written by :func:`encode_envelope` and read back by
:func:`decode_envelope`. Anything else on the rekey topic (a record not written by a worker) is a dead letter.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgpack

__all__ = ["Envelope", "encode_envelope", "decode_envelope"]


class Envelope(NamedTuple):
    """A decoded rekey record: the keyless record's origin, value and timestamp (epoch ms, or None)."""

    topic: str
    partition: int
    offset: int
    raw: bytes | None
    timestamp_ms: int | None


def encode_envelope(topic: str, partition: int, offset: int, raw: bytes | None, timestamp_ms: int | None) -> bytes:
    """The rekey record value of a keyless record read at ``topic``/``partition``/``offset``."""
    return msgpack.packb([topic, partition, offset, raw, timestamp_ms], use_bin_type=True)


def decode_envelope(value: Any) -> Envelope:
    """Inverse of :func:`encode_envelope`.

    Raises:
        ValueError: ``value`` is not a rekey envelope ("not a loopwatch rekey record: <why>"), whatever
            it holds (any msgpack error, wrong length, a field of the wrong type).
    """
    try:
        fields = msgpack.unpackb(value, raw=False)
    except Exception as exc:  # corrupt, a map key that is a map (TypeError), not bytes at all
        raise ValueError(f"not a loopwatch rekey record: {type(exc).__name__}: {exc}") from None
    if not isinstance(fields, list) or len(fields) != 5:
        raise ValueError("not a loopwatch rekey record: not an array of 5 fields")
    topic, partition, offset, raw, timestamp_ms = fields
    if (not isinstance(topic, str) or type(partition) is not int or type(offset) is not int
            or not (raw is None or isinstance(raw, bytes))
            or not (timestamp_ms is None or type(timestamp_ms) is int)):
        raise ValueError("not a loopwatch rekey record: a field of the wrong type")
    return Envelope(topic, partition, offset, raw, timestamp_ms)
