"""Canonical serialisation and SHA-256 digests, byte-identical to OpenClaw's.

OpenClaw fingerprints tool arguments and outcomes with a ``stableStringify``
written in JavaScript (docs/detection-rules.md §4.1). This module reproduces its output for the
JSON data model as Python decodes it (``dict``/``list``/``tuple``/``str``/
``int``/``float``/``bool``/``None``), plus three values JSON cannot carry:

* :data:`UNDEFINED` -- JavaScript ``undefined`` (an absent ``args``), written as
  the bare word ``undefined``;
* ``bytes``/``bytearray`` (msgpack ``bin``) -- a ``Uint8Array``, written as
  ``{"data":<base64>,"type":"Uint8Array"}``;
* a container that is its own ancestor -- written as ``"[Circular]"``.

Where Python and JavaScript differ:

* object keys sort by UTF-16 code unit (JavaScript ``<``), not code point;
* numbers use JavaScript's ``Number#toString`` (``1.0`` -> ``1``, ``-0`` -> ``0``,
  ``1e21`` -> ``1e+21``, ``1e-7`` -> ``1e-7``, ``0.00001`` -> ``0.00001``);
  ``NaN``/``Infinity`` become the *strings* ``"NaN"``/``"Infinity"``;
* integers beyond 2**53 are rounded to the nearest double, as JavaScript's
  ``JSON.parse`` does (``9007199254740993`` -> ``9007199254740992``);
* lone surrogates in strings are escaped (``\\ud800``), as ``JSON.stringify`` does.

Speed: the C accelerator ``_canonical`` (built at install when a compiler is
present; :data:`ACCELERATED` says whether it loaded; ``LOOPWATCH_NO_ACCELERATOR=1`` in the environment
leaves it unloaded) serialises the JSON data
model straight to UTF-8, calling back into :func:`js_number` for the rare
floats and huge integers. Without it, the C JSON encoder serves the values on
which it provably agrees with JavaScript. Anything else (bytes, cycles,
non-string keys, unusual types) takes the exact pure-Python path, which is the
reference the other two are tested against.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from functools import partial
from typing import Any, Callable

__all__ = ["UNDEFINED", "NotJSONData", "ACCELERATED", "stable_stringify", "canonical_bytes", "digest",
           "normalized_digest", "normalizing_digest", "js_number", "js_string"]


class _Undefined:
    """JavaScript ``undefined``; a singleton, falsy, serialised as ``undefined``."""

    __slots__ = ()
    _instance: "_Undefined | None" = None

    def __new__(cls) -> "_Undefined":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "UNDEFINED"


UNDEFINED = _Undefined()


class NotJSONData(TypeError):
    """A value outside the data model :func:`stable_stringify` serialises (a ``set``; from msgpack input, an
    extension type such as a timestamp): nothing OpenClaw could hash. ``str()`` names the type."""

_MAX_SAFE_INT = 2**53

# Fast-path guards. A float or a >=16-digit integer in the C encoder's output
# follows a structural character; the same pattern inside a string only costs
# a trip through the exact path.
_NUMBERISH = re.compile(r"[:,\[]-?\d+(?:[.eE]|\d{15})")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")

_c_encode = json.JSONEncoder(
    ensure_ascii=False,
    separators=(",", ":"),
    sort_keys=True,
    allow_nan=False,
    default=None,
).encode


def _escape_surrogate(match: re.Match[str]) -> str:
    return "\\u%04x" % ord(match.group())


def js_string(value: str) -> str:
    """``JSON.stringify(value)`` for a string (docs/detection-rules.md §4.1): short escapes,
    ``\\u00XX`` below U+0020, lone surrogates escaped, all else raw."""
    text = json.dumps(value, ensure_ascii=False)
    if _SURROGATE.search(text):
        text = _SURROGATE.sub(_escape_surrogate, text)
    return text


def js_number(value: float | int) -> str:
    """JavaScript ``Number#toString`` of a finite number (docs/detection-rules.md §4.1).

    Integers are first rounded to the nearest double, as JavaScript holds them.
    Raises ``ValueError`` for NaN and infinities (callers quote those).
    """
    if isinstance(value, int):
        if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
            return str(value)
        try:
            value = float(value)
        except OverflowError:
            raise ValueError("integer beyond the double range") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("not a finite number")
    if value == 0:
        return "0"  # also -0
    if value.is_integer() and abs(value) <= _MAX_SAFE_INT:
        return str(int(value))  # exact below 2**53; above, JS prints shortest digits + zeros
    sign = "-" if value < 0 else ""
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    # value = 0.<digits> * 10**point
    point = len(int_part) + (int(exp_text) if exp_text else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= point <= 21:
        return sign + digits + "0" * (point - k)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * (-point) + digits
    exponent = point - 1
    exp_sign = "+" if exponent >= 0 else "-"
    head = digits[0] if k == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{head}e{exp_sign}{abs(exponent)}"


def _number(value: float | int) -> str:
    try:
        return js_number(value)
    except ValueError:
        if isinstance(value, int):
            return '"Infinity"' if value > 0 else '"-Infinity"'
        if value != value:
            return '"NaN"'
        return '"Infinity"' if value > 0 else '"-Infinity"'


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _exact(value: Any, parts: list[str], ancestors: set[int], normalize: Callable[[str], str] | None = None) -> None:
    """Exact serialiser: appends the canonical text of ``value`` to ``parts``.

    ``normalize`` (docs/detection-rules.md §11.4.1) rewrites every string value and key before it is
    encoded; keys then sort by normalised key, then by original key.
    """
    kind = type(value)
    if value is None:
        parts.append("null")
    elif value is UNDEFINED:
        parts.append("undefined")
    elif kind is bool:
        parts.append("true" if value else "false")
    elif kind is str:
        parts.append(js_string(value if normalize is None else normalize(value)))
    elif kind is int or kind is float:
        parts.append(_number(value))
    elif isinstance(value, dict):
        if id(value) in ancestors:
            parts.append('"[Circular]"')
            return
        ancestors.add(id(value))
        if normalize is None:
            items = sorted(((str(k), v) for k, v in value.items()), key=lambda kv: _utf16_key(kv[0]))
        else:
            items = sorted(((normalize(str(k)), str(k), v) for k, v in value.items()),
                           key=lambda kv: (_utf16_key(kv[0]), _utf16_key(kv[1])))
            items = [(key, item) for key, _, item in items]
        parts.append("{")
        for index, (key, item) in enumerate(items):
            if index:
                parts.append(",")
            parts.append(js_string(key))
            parts.append(":")
            _exact(item, parts, ancestors, normalize)
        parts.append("}")
        ancestors.discard(id(value))
    elif isinstance(value, (list, tuple)):
        if id(value) in ancestors:
            parts.append('"[Circular]"')
            return
        ancestors.add(id(value))
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _exact(item, parts, ancestors, normalize)
        parts.append("]")
        ancestors.discard(id(value))
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = base64.b64encode(bytes(value)).decode("ascii")
        parts.append('{"data":' + js_string(data) + ',"type":"Uint8Array"}')
    elif isinstance(value, bool):
        parts.append("true" if value else "false")
    elif isinstance(value, str):
        parts.append(js_string(str(value) if normalize is None else normalize(str(value))))
    elif isinstance(value, (int, float)):
        parts.append(_number(value))
    else:
        raise NotJSONData(f"cannot canonicalise a value of type {kind.__name__}")


def _exact_text(value: Any) -> str:
    parts: list[str] = []
    _exact(value, parts, set())
    return "".join(parts)


def _fast_text(value: Any) -> str | None:
    """The C encoder's output when it provably equals the canonical text, else None."""
    try:
        text = _c_encode(value)
    except (TypeError, ValueError):
        return None  # UNDEFINED, bytes, NaN/Infinity, cycles, non-string keys
    first = text[0]
    if first == "-" or first.isdigit():
        return None  # a top-level number
    if _NUMBERISH.search(text):
        return None
    if not text.isascii() and (_ASTRAL.search(text) or _SURROGATE.search(text)):
        return None
    return text


# LOOPWATCH_NO_ACCELERATOR=1 leaves the accelerator unloaded (the tests compare both paths this way)
_PURE = os.environ.get("LOOPWATCH_NO_ACCELERATOR") == "1"
try:
    if _PURE:
        raise ImportError("LOOPWATCH_NO_ACCELERATOR=1")
    from ._canonical import canonical_bytes as _c_canonical_bytes
except ImportError:  # no compiler at install time: same bytes, more slowly
    _c_canonical_bytes = None
try:
    if _PURE:
        raise ImportError("LOOPWATCH_NO_ACCELERATOR=1")
    from ._canonical import digest_hex as _c_digest_hex
except ImportError:  # built without OpenSSL's headers: hashlib hashes instead
    _c_digest_hex = None

ACCELERATED = _c_canonical_bytes is not None


def _plain_outcome() -> Callable[[Any, bytes | None], str | None] | None:
    c_plain = accelerated("plain_outcome_hex")
    return None if c_plain is None else partial(c_plain, _number, UNDEFINED)


def accelerated(name: str) -> Callable[..., Any] | None:
    """The C accelerator's function ``name``, or None when the accelerator is not loaded (or predates it)."""
    if _PURE:
        return None
    try:
        from . import _canonical
    except ImportError:
        return None
    return getattr(_canonical, name, None)


def canonical_bytes(value: Any) -> bytes:
    """UTF-8 bytes of :func:`stable_stringify` -- what OpenClaw hashes (docs/detection-rules.md §4.1)."""
    if _c_canonical_bytes is not None:
        try:
            return _c_canonical_bytes(value, _number, UNDEFINED)
        except TypeError:
            pass  # bytes, cycles, non-str keys, subclasses: the exact path knows them
    else:
        text = _fast_text(value)
        if text is not None:
            try:
                return text.encode("utf-8")
            except UnicodeEncodeError:
                pass
    return _exact_text(value).encode("utf-8")


def stable_stringify(value: Any) -> str:
    """OpenClaw's canonical text of ``value`` (docs/detection-rules.md §4.1).

    Arguments:
        value: JSON data as Python decodes it, or :data:`UNDEFINED`, ``bytes``.
    Returns:
        The canonical text (not always valid JSON: ``undefined`` may appear).
    Raises:
        NotJSONData: (a ``TypeError``) for a value outside that data model (e.g. a ``set``).
    """
    return canonical_bytes(value).decode("utf-8")


def digest(value: Any, prefix: str = "") -> str:
    """``prefix`` + lower-case hex SHA-256 of the UTF-8 canonical text of ``value`` (docs/detection-rules.md §4.1)."""
    if _c_digest_hex is not None:
        try:  # the engine's hottest call: serialise and hash without leaving C
            return _c_digest_hex(value, _number, UNDEFINED, prefix)
        except TypeError:
            pass
        except UnicodeEncodeError:  # C takes the prefix as UTF-8; a tool name may hold a lone surrogate
            return prefix + digest(value)
    elif _c_canonical_bytes is not None:
        try:
            return prefix + _sha256(_c_canonical_bytes(value, _number, UNDEFINED)).hexdigest()
        except TypeError:
            pass
    return prefix + _sha256(canonical_bytes(value)).hexdigest()


_sha256 = hashlib.sha256


def normalized_digest(value: Any, normalize: Callable[[str], str], needle: bytes, prefix: str = "") -> str:
    """:func:`digest` of ``stableStringify(value, normalize)`` (docs/detection-rules.md §11.4.1).

    ``needle`` is a byte string that every string ``normalize`` changes contains, and
    that JSON encoding leaves as it is: when the canonical text does not hold it,
    nothing would change and the plain digest is the answer (the usual case; one
    serialisation). Otherwise the exact path serialises with the normaliser.
    """
    return normalizing_digest(normalize, needle)(value, prefix)


def normalizing_digest(normalize: Callable[[str], str], needle: bytes) -> Callable[[Any, str], str]:
    """:func:`normalized_digest` with ``normalize`` and ``needle`` bound: ``(value, prefix="") -> str``.

    The usual case (no ``needle`` in the canonical text) is one call into the C accelerator.
    """
    c_digest = _c_digest_hex

    def slow(value: Any, prefix: str) -> str:
        parts: list[str] = []
        _exact(value, parts, set(), normalize)
        return prefix + _sha256("".join(parts).encode("utf-8", "surrogatepass")).hexdigest()

    def hexed(value: Any, prefix: str = "") -> str:
        if c_digest is not None:
            try:  # one C call: serialise, look for the needle, hash
                found = c_digest(value, _number, UNDEFINED, prefix, needle)
            except (TypeError, UnicodeEncodeError):  # see digest(); an accelerator built before the needle argument
                found = _plain_unless(value, needle, prefix)
        else:
            found = _plain_unless(value, needle, prefix)
        return found if found is not None else slow(value, prefix)

    return hexed


def _plain_unless(value: Any, needle: bytes, prefix: str) -> str | None:
    """:func:`digest` of ``value`` unless its canonical text contains ``needle`` (then None)."""
    data = canonical_bytes(value)
    return None if needle in data else prefix + _sha256(data).hexdigest()


plain_outcome_hex = _plain_outcome()
"""``(result, needle) -> str | None``, or None without the accelerator: the hex digest of the plain outcome
fingerprint ``{"details": <details or {}>, "text": <the one content block's text, trimmed>}`` of a result
(docs/detection-rules.md §4.3 rule 8) for the usual shape (a dict with one text block of ASCII text,
details a dict or absent, no ``"blocked"`` status, no ``changed: false``); None for any other, or when the canonical text holds
``needle`` (bytes; None: no needle). The caller's Python path then decides."""
