"""Make a small test fixture of a session file a real runner wrote: every string longer than ``limit``
characters (the runner's own system prompt, tool descriptions, environment context) is cut to a marker,
the rest of each record kept as the runner wrote it; local paths are replaced by ``/fixture``.

Run: ``python tests/e2e/trim.py SOURCE.jsonl DEST.jsonl [--root /tmp/run-dir]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["trim_value", "trim_file"]


def trim_value(value: Any, limit: int, root: str | None) -> Any:
    if isinstance(value, str):
        if root:
            value = value.replace(root, "/fixture")
        return value if len(value) <= limit else f"[{len(value)} characters trimmed for the fixture]"
    if isinstance(value, list):
        return [trim_value(v, limit, root) for v in value]
    if isinstance(value, dict):
        return {k: trim_value(v, limit, root) for k, v in value.items()}
    return value


def trim_file(source: Path, dest: Path, limit: int = 160, root: str | None = None) -> None:
    lines = []
    for raw in source.read_text("utf-8").splitlines():
        if raw.strip():
            lines.append(json.dumps(trim_value(json.loads(raw), limit, root), ensure_ascii=False))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n", "utf-8")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--root")
    args = parser.parse_args()
    trim_file(args.source, args.dest, args.limit, args.root)
