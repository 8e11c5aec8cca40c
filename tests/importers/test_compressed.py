"""Gzip- and Zstandard-compressed session files read as the files they hold (streams/importers/compressed.py)."""

import gzip
import shutil
from pathlib import Path

import pytest
import zstandard

from streams.importers import FORMATS, detect_format, import_paths, session_files
from streams.importers.compressed import CompressedDataError, open_binary, plain_name
from tests.importers.test_inputs import fleet  # noqa: F401 (a fixture)

COMPRESS = {".gz": gzip.compress, ".zst": zstandard.ZstdCompressor().compress}


def _compressed_copy(root: Path, dest: Path, suffix: str) -> Path:
    """``root`` copied to ``dest`` with every file (hidden ones too) compressed and named ``<name><suffix>``."""
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        target = dest / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.with_name(target.name + suffix).write_bytes(COMPRESS[suffix](path.read_bytes()))
    return dest


def _comparable(events: list[dict], root: Path) -> list[dict]:
    out = []
    for event in events:
        source = dict(event["source"])
        path = Path(source.pop("path"))
        source["path"] = str(path.relative_to(root).with_name(plain_name(path.name)))
        out.append({**event, "source": source})
    return sorted(out, key=lambda e: (e["source"]["path"], str(e.get("event_id"))))


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_a_fleet_compressed_file_by_file_gives_the_same_events_and_the_same_files_left_out(fleet, tmp_path, suffix):
    packed = _compressed_copy(fleet, tmp_path / "packed", suffix)
    plain_errors: list = []
    packed_errors: list = []
    plain = list(import_paths("auto", [fleet], plain_errors.append))
    events = list(import_paths("auto", [packed], packed_errors.append))
    assert len(plain) > 100
    assert _comparable(events, packed) == _comparable(plain, fleet)
    assert sorted((Path(e.path).relative_to(packed).with_name(plain_name(Path(e.path).name)), e.reason)
                  for e in packed_errors) == sorted((Path(e.path).relative_to(fleet), e.reason) for e in plain_errors)
    formats = {str(Path(f.path).relative_to(packed)): f.format for f in session_files("auto", [packed])}
    assert formats[f"openclaw/agents/bot9/agent/openclaw-agent.sqlite{suffix}"] == "openclaw"
    assert formats[f"events.jsonl{suffix}"] == "events"


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_each_format_named_explicitly_reads_its_gzipped_files(fleet, tmp_path, fmt):
    packed = _compressed_copy(fleet, tmp_path / "packed", ".gz")
    plain = list(import_paths(fmt, [fleet], lambda e: None))
    events = list(import_paths(fmt, [packed], lambda e: None))
    assert plain and _comparable(events, packed) == _comparable(plain, fleet)


def test_a_single_gzipped_file_is_sniffed_by_its_content_not_its_name(tmp_path):
    source = Path(__file__).parent.parent / "fixtures" / "runners" / "codex-compaction.jsonl"
    odd = tmp_path / "backup.bin"
    odd.write_bytes(gzip.compress(source.read_bytes()))
    assert detect_format(odd) == "codex"
    assert [e.get("tool_call_id") for e in import_paths("auto", [odd])] == \
        [e.get("tool_call_id") for e in import_paths("codex", [source])]


def test_a_compressed_file_cut_short_keeps_the_lines_before_the_cut_and_says_so(tmp_path):
    source = Path(__file__).parent.parent / "fixtures" / "runners" / "codex-compaction.jsonl"
    data = gzip.compress(source.read_bytes())
    cut = tmp_path / "rollout.jsonl.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    errors: list = []
    events = list(import_paths("auto", [cut], errors.append))
    whole = list(import_paths("codex", [source]))
    assert 0 < len(events) < len(whole)
    assert [e.get("tool_call_id") for e in events] == [e.get("tool_call_id") for e in whole[: len(events)]]
    assert len(errors) == 1 and errors[0].line is None and "gzip data cut short or damaged" in errors[0].reason
    with open_binary(cut) as fh, pytest.raises(CompressedDataError):
        fh.read()


def test_telling_a_format_decompresses_at_most_the_head_and_a_head_that_decompresses_to_nothing_is_said(tmp_path):
    from streams.importers.sniff import HEAD_BYTES, read_head, sniff

    bomb = tmp_path / "bomb.jsonl.zst"  # 200 MiB of spaces in a few KB
    bomb.write_bytes(zstandard.ZstdCompressor().compress(b'{"type": "x"}' + b" " * (200 * 1024 * 1024)))
    assert bomb.stat().st_size < 20_000 and len(read_head(bomb)) == HEAD_BYTES
    source = (Path(__file__).parent.parent / "fixtures" / "runners" / "codex-compaction.jsonl").read_bytes()
    for name, data in (("cut.zst", zstandard.ZstdCompressor().compress(source)), ("cut.gz", gzip.compress(source))):
        cut = tmp_path / name
        cut.write_bytes(data[:10] if name.endswith(".gz") else data[: len(data) // 2])  # one zstd block: nothing out
        kind = "gzip" if name.endswith(".gz") else "zstd"
        assert sniff(cut).reason == f"cannot read: {kind} data cut short or damaged (nothing of it decompresses)"
    empty = tmp_path / "empty.gz"
    empty.write_bytes(gzip.compress(b""))
    assert sniff(empty).reason == "no known format (empty file)"
