"""Random and mutated record values against every path that decodes them: the oracle and a long fuzz run.

:func:`check` feeds one byte string to each reader of record values and event
files, and returns what escaped a reader's contract (empty when nothing did):

* :func:`streams.wire.codecs.decode_event` raises only ``DecodeError``;
* :func:`streams.wire.codecs.read_event_file` (``replay``, ``produce``) yields
  records, bad ones with a reason, and raises nothing;
* the worker's rekey envelope (:func:`streams.worker.rekey.decode_envelope`) and
  stored states (:func:`streams.worker.states.decode_state`) raise only ``ValueError``;
* a decoded event goes through the worker's per-record path
  (:class:`streams.worker.processor.Processor`: key, apply three times, state
  encoded and decoded back equal) without an exception and without an
  ``error`` dead letter (the class kept for engine bugs), and its verdict is
  encodable; through ``replay`` (:class:`streams.offline.replay.Replayer` raises
  only ``EventError``, its verdict record writes as JSON); and through
  ``produce``'s encoders (only ``ValueError``); read as a verdict record,
  ``report`` skips it with a reason or reports it.

The inputs (:func:`generated`) are msgpack written byte by byte from random
trees -- maps whose keys are maps, arrays, extension types, timestamps, floats
or nil, which Python's msgpack cannot write --, event-shaped maps, JSON text,
and mutations of these (bit flips, interesting bytes, cuts, repeats, splices).

The CI property test is tests/wire/test_record_fuzz.py. A long run by hand::

    .venv/bin/python -m tests.wire.record_fuzz --inputs 3000000 --seed 1 --out /tmp/findings.txt

prints inputs per second every 100,000 inputs and writes each new finding
(hex of the input, then the failure) to ``--out``; regression cases go to
tests/fixtures/poison_records.txt.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import re
import struct
import sys
import time
from typing import Any, Callable

from streams.detection import Engine, EventError, OpenClawConfig, SessionState
from streams.commands.replay import json_line
from streams.offline.replay import Replayer
from streams.wire.codecs import DecodeError, decode_event, read_event_file, record_encoder
from streams.worker.rekey import decode_envelope, encode_envelope
from streams.worker.processor import APPLIED, DEAD_LETTER, SKIPPED, Processor
from streams.worker.records import Source
from streams.worker.states import decode_state, encode_state

__all__ = ["check", "generated", "emit", "mutate", "tree", "CONFIG"]

CONFIG = OpenClawConfig({"tools": {"loopDetection": {"enabled": True, "historySize": 8, "warningThreshold": 2,
                                                     "criticalThreshold": 3, "unknownToolThreshold": 2,
                                                     "globalCircuitBreakerThreshold": 4}}})
FIELDS = ["type", "run_id", "session_id", "session_key", "tool_call_id", "tool_name", "args", "result", "error",
          "event_id", "ts", "source", "agent_id", "params", "outcome_follows"]
TYPES = ["tool_call", "tool_result", "compaction_retry"]


# ------------------------------------------------------------------ msgpack written byte by byte

class Map(list):
    """A msgpack map as its (key, value) pairs: keys of any kind, repeated keys allowed."""


class Ext:
    """A msgpack extension value (code -128..127); code -1 is a timestamp when ``data`` is 4, 8 or 12 bytes."""

    def __init__(self, code: int, data: bytes) -> None:
        self.code, self.data = code, data


class Raw(bytes):
    """Bytes emitted as they are (a header claiming more than follows, a reserved byte)."""


def emit(node: Any) -> bytes:
    """msgpack bytes of a tree of None, bool, int, float, str, bytes, list, :class:`Map`, :class:`Ext`, :class:`Raw`.

    Integers and floats take a random-looking but fixed width per value (the
    smallest that fits, or wider when the value's low bits say so), so every
    format of the spec is written."""
    if isinstance(node, Raw):
        return bytes(node)
    if node is None:
        return b"\xc0"
    if node is True:
        return b"\xc3"
    if node is False:
        return b"\xc2"
    if isinstance(node, int):
        return _int(node)
    if isinstance(node, float):
        odd = node != node or abs(node) == float("inf") or int(abs(node)) % 2
        return b"\xca" + struct.pack(">f", node) if _fits_f32(node) and odd else b"\xcb" + struct.pack(">d", node)
    if isinstance(node, str):
        data = node.encode("utf-8", "surrogatepass")  # a lone surrogate: invalid UTF-8 on the wire
        return _sized(len(data), 0xa0, 31, (0xd9, 0xda, 0xdb)) + data
    if isinstance(node, bytes):
        return _sized(len(node), None, 0, (0xc4, 0xc5, 0xc6)) + node
    if isinstance(node, Map):
        return _sized(len(node), 0x80, 15, (None, 0xde, 0xdf)) + b"".join(emit(k) + emit(v) for k, v in node)
    if isinstance(node, list):
        return _sized(len(node), 0x90, 15, (None, 0xdc, 0xdd)) + b"".join(emit(v) for v in node)
    if isinstance(node, Ext):
        n = len(node.data)
        code = struct.pack(">b", node.code)
        fixed = {1: 0xd4, 2: 0xd5, 4: 0xd6, 8: 0xd7, 16: 0xd8}
        if n in fixed:
            return bytes([fixed[n]]) + code + node.data
        return _sized(n, None, 0, (0xc7, 0xc8, 0xc9)) + code + node.data
    raise TypeError(f"cannot emit {type(node).__name__}")


def _fits_f32(value: float) -> bool:
    try:
        return struct.unpack(">f", struct.pack(">f", value))[0] == value or value != value
    except OverflowError:
        return False


def _int(value: int) -> bytes:
    if 0 <= value <= 0x7f:
        return bytes([value])
    if -32 <= value < 0:
        return struct.pack(">b", value)
    for code, fmt, low, high in ((0xcc, ">B", 0, 2**8), (0xcd, ">H", 0, 2**16), (0xce, ">I", 0, 2**32),
                                 (0xcf, ">Q", 0, 2**64), (0xd0, ">b", -2**7, 2**7), (0xd1, ">h", -2**15, 2**15),
                                 (0xd2, ">i", -2**31, 2**31), (0xd3, ">q", -2**63, 2**63)):
        if low <= value < high:
            return bytes([code]) + struct.pack(fmt, value)
    return b"\xcf" + struct.pack(">Q", value & (2**64 - 1))  # beyond 64 bits: wrapped


def _sized(n: int, fix: int | None, fix_max: int, codes: tuple[int | None, int, int]) -> bytes:
    if fix is not None and n <= fix_max:
        return bytes([fix | n])
    for code, fmt, limit in zip(codes, (">B", ">H", ">I"), (2**8, 2**16, 2**32)):
        if code is not None and n < limit:
            return bytes([code]) + struct.pack(fmt, n)
    raise ValueError("too long")


# ------------------------------------------------------------------ random trees

_TEXTS = ["", "a", "r1", "s1", "c1", "read", "exec", "process", "tool_call", "tool_result", "compaction_retry",
          "é", "\U0001F600", "\ud83d", "\udc00", "\x00", " r1 ", "poll", "x" * 40]
_INTS = [0, 1, -1, 127, 128, -32, -33, 255, 256, 2**15, 2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, -(2**63),
         2**64 - 1, 1764460800000]
_FLOATS = [0.0, -0.0, 1.5, float("nan"), float("inf"), float("-inf"), 1e308, 5e-324, 1764460800000.0]


def scalar(rng: random.Random) -> Any:
    """A random scalar: nil, bool, int of any width, float, text (lone surrogates too), bytes, extension."""
    kind = rng.randrange(9)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice(_INTS) if rng.random() < 0.7 else rng.randrange(-2**63, 2**64)
    if kind == 2:
        return rng.choice(_FLOATS) if rng.random() < 0.7 else rng.uniform(-1e6, 1e6)
    if kind in (3, 4, 5):
        return rng.choice(_TEXTS) if rng.random() < 0.8 else "".join(
            chr(rng.choice([rng.randrange(0x80), rng.randrange(0x110000)])) for _ in range(rng.randrange(6)))
    if kind == 6:
        return rng.randbytes(rng.choice([0, 1, 4, 16, 17, 32, 33]))
    if kind == 7:  # timestamps, valid and not
        return Ext(-1, rng.randbytes(rng.choice([4, 8, 12, 0, 1, 3, 5, 16])))
    return Ext(rng.randrange(-128, 128), rng.randbytes(rng.choice([0, 1, 2, 4, 8, 16, 3, 20])))


def tree(rng: random.Random, depth: int = 0) -> Any:
    """A random msgpack tree; a map's keys are of any kind (maps and arrays included)."""
    roll = rng.random()
    if depth >= 4 or roll < 0.5:
        return scalar(rng)
    if roll < 0.7:
        return [tree(rng, depth + 1) for _ in range(rng.randrange(4))]
    pairs = Map()
    for _ in range(rng.randrange(4)):
        key = tree(rng, depth + 2) if rng.random() < 0.3 else rng.choice(_TEXTS + FIELDS)
        pairs.append((key, tree(rng, depth + 1)))
    return pairs


def event_tree(rng: random.Random) -> Map:
    """A map shaped like an event: its fields mostly plausible, some of any kind, some keys not text."""
    kind = rng.choice(TYPES)
    pairs = Map([("type", kind), ("run_id", rng.choice(["r1", "r2"])), ("session_id", "s1"),
                 ("tool_call_id", f"c{rng.randrange(4)}"), ("tool_name", rng.choice(["read", "exec", "process"])),
                 ("args", Map([("path", rng.choice(["a", "b"]))])), ("result", rng.choice(["same", "other", None]))])
    for _ in range(rng.randrange(4)):
        index = rng.randrange(len(pairs) + 1)
        key = rng.choice(FIELDS) if rng.random() < 0.8 else tree(rng, 2)
        if index < len(pairs) and rng.random() < 0.5:
            pairs[index] = (pairs[index][0], tree(rng, 1))
        else:
            pairs.insert(index, (key, tree(rng, 1)))
    return pairs


def _jsonable(node: Any) -> Any:
    if isinstance(node, Map):
        return {k if isinstance(k, str) else str(k): _jsonable(v) for k, v in node}
    if isinstance(node, list):
        return [_jsonable(v) for v in node]
    if isinstance(node, (bytes, Ext)):
        return None
    if isinstance(node, int) and not isinstance(node, bool) and node > 2**64:
        return node
    return node


def json_text(rng: random.Random) -> bytes:
    """JSON of an event-shaped map: ASCII-escaped (lone surrogates as \\udxxx) or UTF-8, sometimes NaN/Infinity."""
    doc = _jsonable(event_tree(rng))
    if rng.random() < 0.2:
        doc["args"] = json.loads("[" * 40 + "]" * 40) if rng.random() < 0.5 else 10**rng.randrange(10, 400)
    ascii_only = rng.random() < 0.5
    try:
        text = json.dumps(doc, ensure_ascii=ascii_only)
    except ValueError:
        text = "{}"
    return text.encode("utf-8", "surrogatepass")


# ------------------------------------------------------------------ mutations

_INTERESTING = [0x00, 0x7f, 0x80, 0x81, 0x8f, 0x90, 0x91, 0x9f, 0xa0, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc7, 0xca,
                0xcb, 0xcc, 0xcf, 0xd3, 0xd4, 0xd6, 0xd7, 0xd8, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff,
                ord("{"), ord("}"), ord("["), ord("]"), ord('"'), ord(":"), ord(","), ord("\\"), ord("\n")]


def mutate(rng: random.Random, data: bytes, other: bytes = b"") -> bytes:
    """``data`` with 1-4 random edits: bit flip, interesting byte set or inserted, cut, repeat, splice of ``other``."""
    out = bytearray(data)
    for _ in range(rng.randrange(1, 5)):
        op = rng.randrange(7)
        at = rng.randrange(len(out) + 1)
        if op == 0 and out:
            at = min(at, len(out) - 1)
            out[at] ^= 1 << rng.randrange(8)
        elif op == 1 and out:
            out[min(at, len(out) - 1)] = rng.choice(_INTERESTING)
        elif op == 2:
            out[at:at] = bytes([rng.choice(_INTERESTING)]) * rng.choice([1, 1, 2, 3])
        elif op == 3 and out:
            del out[at:at + rng.randrange(1, 8)]
        elif op == 4 and out:
            piece = out[at:at + rng.randrange(1, 16)]
            out[at:at] = piece * rng.randrange(1, 4)
        elif op == 5 and other:
            cut = rng.randrange(len(other) + 1)
            out[at:] = other[cut:] if rng.random() < 0.5 else other[cut:] + out[at:]
        else:
            del out[at:]
    return bytes(out)


def deep(rng: random.Random) -> bytes:
    """An event with one field nested hundreds of levels deep (around msgpack's and Python's limits), either codec."""
    depth = rng.choice([rng.randrange(300, 1200), rng.randrange(490, 530), rng.randrange(960, 1010)])
    field = rng.choice(["args", "result", "error", "source", "params", "event_id", "run_id", "ts"])
    head = {"type": rng.choice(TYPES), "run_id": "r1", "session_id": "s1", "tool_call_id": "c1",
            "tool_name": "read"}
    if rng.random() < 0.5:
        body = rng.choice([("[" * depth + "]" * depth), ('{"a":' * depth + "1" + "}" * depth)])
        return (json.dumps(head)[:-1] + f', "{field}": {body}}}').encode()
    inner = rng.choice([b"\x91" * depth + b"\xc0", b"\x81\xa1a" * depth + b"\x01"])
    return bytes([0x80 | (len(head) + 1)]) + b"".join(
        emit(k) + emit(v) for k, v in head.items()) + emit(field) + inner


def generated(rng: random.Random, seeds: list[bytes]) -> bytes:
    """One fuzz input: a random tree, an event-shaped map, JSON text, a deep event, a seed, or a mutation of one."""
    roll = rng.random()
    if roll < 0.03:
        return deep(rng)
    if roll < 0.15:
        base = emit(tree(rng))
    elif roll < 0.45:
        base = emit(event_tree(rng))
    elif roll < 0.6:
        base = json_text(rng)
    else:
        base = rng.choice(seeds)
    if rng.random() < 0.6:
        base = mutate(rng, base, rng.choice(seeds))
    return base


# ------------------------------------------------------------------ the oracle

_ENGINE = Engine(CONFIG)
_ENCODERS = [record_encoder("msgpack"), record_encoder("json")]


def _guard(findings: list[str], where: str, allowed: tuple[type[BaseException], ...],
           call: Callable[[], Any]) -> Any:
    try:
        return call()
    except allowed:
        return None
    except RecursionError as exc:  # a finding too, named as such
        findings.append(f"{where}: RecursionError: {exc}")
    except Exception as exc:
        findings.append(f"{where}: {type(exc).__name__}: {exc}")
    return None


def check(data: bytes) -> list[str]:
    """The contract breaches of every reader on ``data`` (see the module docstring); empty when none."""
    findings: list[str] = []
    _guard(findings, "read_event_file", (), lambda: _read_file(findings, data))
    _guard(findings, "rekey envelope", (ValueError,), lambda: decode_envelope(data))
    _guard(findings, "stored state", (ValueError,), lambda: decode_state(data))
    event = _guard(findings, "decode_event", (DecodeError,), lambda: decode_event(data))
    if isinstance(event, dict):
        _guard(findings, "worker", (), lambda: _worker(findings, data))
        _guard(findings, "replay", (EventError,), lambda: _replay(event))
        _guard(findings, "report", (), lambda: _report(event))
        for encode in _ENCODERS:
            _guard(findings, "produce", (ValueError,), lambda: encode(dict(event)))
    elif event is not None:
        findings.append(f"decode_event returned {type(event).__name__}")
    return findings


def _read_file(findings: list[str], data: bytes) -> None:
    for record in read_event_file("f", io.BytesIO(data)):
        if (record.event is None) == (record.error is None):
            findings.append(f"read_event_file: record {record.position} has both or neither event and error")
        if record.event is not None:  # what replay and produce do with it
            _guard(findings, "replay(file)", (EventError,), lambda: _replay(record.event))
            for encode in _ENCODERS:
                _guard(findings, "produce(file)", (ValueError,), lambda: encode(dict(record.event)))


def _worker(findings: list[str], data: bytes) -> None:
    processor = Processor(_ENGINE)
    state = SessionState()
    for offset in range(3):
        source = Source("events", 0, offset)
        try:
            event = decode_event(data)
        except DecodeError:  # JSON nested to Python's limit decodes or not by the stack depth it starts at
            return
        key = processor.state_key(None, event)
        before = encode_state(state, _ENGINE)
        outcome = processor.apply(key or b"k", event, source, state, data)
        if outcome.kind == DEAD_LETTER:
            letter = decode_event(outcome.dead_letter)
            if letter["reason_class"] != "schema":
                findings.append(f"worker: {letter['reason_class']} dead letter: {letter['reason']}")
            if encode_state(state, _ENGINE) != before:
                findings.append(f"worker: a dead-lettered event changed the state ({letter['reason']})")
            return
        if outcome.kind not in (APPLIED, SKIPPED):
            findings.append(f"worker: outcome {outcome.kind}")
        if outcome.verdict is not None:
            decode_event(outcome.verdict)
    if decode_state(encode_state(state, _ENGINE)) != state:
        findings.append("worker: state does not decode back equal")


def _report(event: dict[str, Any]) -> None:
    """The map read as a verdict record (``loopwatch report`` of a verdict file): skipped with a reason,
    or reported (twice, as a republished verdict) and rendered as text and HTML."""
    from streams.commands.report import verdict_problem
    from streams.report import build_report, render_html, render_text

    record = {**event, "verdict": event.get("verdict", "allow")}
    if verdict_problem(record) is None:
        report = build_report([record, dict(record)])
        render_text(report)
        render_html(report, None)


def _replay(event: dict[str, Any]) -> None:
    for key_by in ("session", "run"):
        record = Replayer(_ENGINE, key_by=key_by).apply(event, "f:1")
        json_line(record)


# ------------------------------------------------------------------ the long run

def seeds() -> list[bytes]:
    """Valid event records (both codecs) and the regression corpus: what mutations start from."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out: list[bytes] = []
    for line in (root / "examples" / "events.jsonl").read_bytes().splitlines():
        if line.strip():
            out.append(line)
            out.append(_ENCODERS[0](json.loads(line)))
    out.extend(value for _, value in poison_records())
    out.append(encode_envelope("events", 0, 7, out[1], 1764460800000))
    state = SessionState()
    processor = Processor(_ENGINE)
    for offset, line in enumerate(out[:20:2]):
        event = json.loads(line)
        processor.apply(b"k", event, Source("events", 0, offset), state, line)
    out.append(encode_state(state, _ENGINE))
    rng = random.Random(0)
    out.extend(emit(event_tree(rng)) for _ in range(50))
    return out


def poison_records() -> list[tuple[str, bytes]]:
    """The regression corpus, tests/fixtures/poison_records.txt: ``(expected outcome, record value)`` per line;
    the outcome is the worker's: ``decode`` or ``schema`` (a dead letter of that reason class) or ``verdict``."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "fixtures" / "poison_records.txt"
    records = []
    for line in path.read_text(encoding="ascii").splitlines():
        text = line.split("#", 1)[0].split()
        if text:
            records.append((text[0], bytes.fromhex(text[1])))
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="fuzz-findings.txt")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    pool = seeds()
    seen: set[str] = set()
    started = last = time.monotonic()
    found = 0
    with open(args.out, "a", encoding="utf-8") as out:
        for count in range(1, args.inputs + 1):
            data = generated(rng, pool)
            findings = check(data)
            for finding in findings:
                kind = re.sub(r"\d+|'[^']*'|\([^)]*\)", "_", finding)[:90]
                found += 1
                if kind not in seen:  # one report per kind of breach
                    seen.add(kind)
                    out.write(f"{data.hex()}\t{finding}\n")
                    out.flush()
                    print(f"finding {len(seen)}: {finding} <- {data[:40].hex()}", flush=True)
            if findings and len(pool) < 5000:
                pool.append(data)  # a breach's neighbourhood is worth more mutations
            if count % 100_000 == 0:
                now = time.monotonic()
                print(f"{count:,} inputs in {now - started:,.0f} s ({100_000 / (now - last):,.0f}/s); "
                      f"{found} breach(es), {len(seen)} kind(s)", flush=True)
                last = now
    elapsed = time.monotonic() - started
    print(f"done: {args.inputs:,} inputs in {elapsed:,.0f} s ({args.inputs / elapsed:,.0f}/s), seed {args.seed}; "
          f"{found} breach(es) of {len(seen)} kind(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
