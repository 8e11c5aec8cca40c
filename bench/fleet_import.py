"""Importing a fleet of session files: files/s and peak memory of ``loopwatch import`` (and ``replay``) over
thousands of small sessions of mixed runners, beside the floor of reading the same bytes.

Writes ``--sessions`` files (default 10,000) into a temporary folder, in turn one of each kind: a Claude Code
log, a Codex session (rollout) file, a ``codex exec --json`` capture, an OpenClaw transcript, a SWE-agent
trajectory and a loopwatch event file, plus one OpenClaw 2026.9 agent database (SQLite) every
``--sqlite-every`` files; ``--gzip-every N`` gzips every N-th file (``<name>.gz``), which the commands read
decompressed. Each file is one of the test fixtures with its session id made unique
(``tests/importers/fixtures``, ``tests/fixtures``: small, and the Codex and SQLite ones written by the real
runners), so every runner's importer does its real work, and each session counts once.

Then each of these runs in its own process (``os.wait4`` gives that process's CPU time; its peak RSS is
the ``VmHWM`` it reads from ``/proc/self/status`` at exit, not ``ru_maxrss``, which Linux starts at the
forking process's peak), with files/s per second of wall time and per second of its CPU time (one core;
on a shared machine the wall time counts other processes' turns too):

1. **floor**: walk the folder and read every file's bytes (what any import must at least do);
2. **start-up**: ``import streams.commands`` alone (the interpreter and libraries every command loads);
3. **import**: ``loopwatch import -o /dev/null FOLDER`` (each file's format sniffed);
4. **replay**: ``loopwatch replay --format auto -q -o /dev/null FOLDER`` (import plus the detection engine),
   unless ``--no-replay``.

    python bench/fleet_import.py                         # 10,000 sessions
    python bench/fleet_import.py --sessions 2000 --keep /tmp/fleet --progress
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.host import interpreter  # noqa: E402
from bench.options import positive  # noqa: E402

FIX = ROOT / "tests" / "importers" / "fixtures"
RUNNER_FIX = ROOT / "tests" / "fixtures"

# (kind, template, the session id to make unique, path of a file under the fleet folder with {n})
KINDS = [
    ("claude-code", FIX / "claude-code" / "cc-s2.jsonl", "cc-s2", "claude/projects/p{p}/cc-s2-{n}.jsonl"),
    ("codex", RUNNER_FIX / "runners" / "codex-compaction.jsonl", "01a23aed-6e72-73a2-b55e-2613e02951e7",
     "codex/sessions/2026/12/{d}/rollout-2026-12-03T08-02-48-{n}.jsonl"),
    ("codex-exec", FIX / "codex" / "th-1.codex_stdout.jsonl", "th-1", "codex-exec/th-1-{n}.jsonl"),
    ("openclaw", FIX / "openclaw" / "agents" / "bot1" / "sessions" / "oc-s1.jsonl", "oc-s1",
     "openclaw/agents/bot{p}/sessions/oc-s1-{n}.jsonl"),
    ("swe-agent", FIX / "swe-agent" / "demo__repo-1.traj", None, "swe-agent/demo__repo-{n}.traj"),
    ("events", ROOT / "examples" / "events.jsonl", "sess-", "events/events-{n}.jsonl"),
]
SQLITE = RUNNER_FIX / "openclaw" / "builtin-loop-2026.9.6.sqlite.gz"


def generate(folder: Path, sessions: int, sqlite_every: int, gzip_every: int = 0) -> dict[str, int]:
    """Write ``sessions`` files into ``folder`` (every ``gzip_every``-th one gzipped, ``<name>.gz``); returns
    files per kind."""
    templates = {kind: path.read_text(encoding="utf-8") for kind, path, _, _ in KINDS}
    database = gzip.decompress(SQLITE.read_bytes())
    counts: dict[str, int] = {}
    made = set()
    for n in range(sessions):
        if sqlite_every and n % sqlite_every == sqlite_every - 1:
            kind, path = "openclaw-sqlite", folder / "openclaw" / "agents" / f"db{n}" / "agent" / "openclaw-agent.sqlite"
            data = database
        else:
            kind, _, session, name = KINDS[n % len(KINDS)]
            path = folder / name.format(n=f"{n:05d}", p=n % 50, d=f"{1 + n % 28:02d}")
            text = templates[kind]
            data = (text.replace(session, f"{session}{n:05d}-" if session.endswith("-") else f"{session}-{n:05d}")
                    if session else text).encode("utf-8")
        if gzip_every and n % gzip_every == 0:
            path, data = path.with_name(path.name + ".gz"), gzip.compress(data, compresslevel=6, mtime=0)
            counts["gzipped"] = counts.get("gzipped", 0) + 1
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_bytes(data)
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def measure(argv: list[str], show_stderr: bool = False) -> tuple[float, float, int, str]:
    """Run ``argv`` (a Python child wrapped by :data:`_PEAK`); returns (wall s, CPU s, peak RSS KiB, stderr)
    of that process alone."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    lines = []
    for raw in proc.stderr:
        line = raw.decode("utf-8", "replace")
        lines.append(line)
        if show_stderr and not line.startswith(_PEAK_TAG):
            sys.stderr.write(line)
            sys.stderr.flush()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    err = "".join(lines)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv[-6:])} exited {os.waitstatus_to_exitcode(status)}:\n{err}")
    peak = next((int(line.split()[1]) for line in lines if line.startswith(_PEAK_TAG)), usage.ru_maxrss)
    return wall, usage.ru_utime + usage.ru_stime, peak, err


# The child's own peak RSS, printed at its exit: VmHWM of /proc/self/status (its address space since exec).
# getrusage's ru_maxrss cannot give it: Linux carries the peak of the forking process (this one, 25+ MiB) into
# the child's ru_maxrss, which would hide a smaller child and add to a larger one's floor.
_PEAK_TAG = "peak-rss-kib "
_PEAK = f"""
import atexit, resource, sys
def _peak():
    try:
        with open("/proc/self/status") as fh:
            kib = next(int(l.split()[1]) for l in fh if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sys.stderr.write("{_PEAK_TAG}%d\\n" % kib)
atexit.register(_peak)
"""
_READ_ALL = _PEAK + """
import os
total = 0
for folder, dirs, names in os.walk(sys.argv[1]):
    dirs.sort()
    for name in sorted(names):
        with open(os.path.join(folder, name), "rb") as fh:
            total += len(fh.read())
"""
_LOOPWATCH = _PEAK + "from streams.cli import main\nsys.argv[0] = 'loopwatch'\nmain()\n"
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=positive(int), default=10_000, help="files to write (default 10,000)")
    parser.add_argument("--sqlite-every", type=int, default=500,
                        help="one OpenClaw agent database (900 KB, several sessions) every N files; 0 = none")
    parser.add_argument("--gzip-every", type=int, default=0,
                        help="gzip every N-th file (read decompressed, told by its first bytes); 0 = none")
    parser.add_argument("--keep", type=Path, help="write the fleet here and keep it (default: a temporary folder)")
    parser.add_argument("--progress", action="store_true", help="show the commands' progress bars (stderr)")
    parser.add_argument("--no-replay", action="store_true", help="time import only")
    args = parser.parse_args()

    print(f"interpreter: {interpreter()}")
    folder = args.keep or Path(tempfile.mkdtemp(prefix="loopwatch-fleet-"))
    try:
        started = time.perf_counter()
        counts = generate(folder, args.sessions, args.sqlite_every, args.gzip_every)
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        print(f"fleet:       {args.sessions:,} files, {size / 1e6:.1f} MB in {folder} (written in "
              f"{time.perf_counter() - started:.1f} s): " + ", ".join(f"{n:,} {k}" for k, n in counts.items()))
        py = sys.executable
        progress = ["--progress"] if args.progress else ["--no-progress"]
        runs = [
            ("floor", [py, "-c", _READ_ALL, str(folder)]),
            ("start-up", [py, "-c", _PEAK + "import streams.commands"]),
            ("import", [py, "-c", _LOOPWATCH, "import", *progress, "-o", os.devnull, str(folder)]),
        ]
        if not args.no_replay:
            runs.append(("replay", [py, "-c", _LOOPWATCH, "replay", "--format", "auto", *progress, "-q",
                                    "-o", os.devnull, str(folder)]))
        results = {}
        for name, argv in runs:
            wall, cpu, rss, err = measure(argv, show_stderr=args.progress and name in ("import", "replay"))
            results[name] = (wall, cpu, rss)
            rate = (f"{args.sessions / wall:>8,.0f} files/s, {args.sessions / max(cpu, 1e-9):>8,.0f} per core of CPU"
                    if name != "start-up" else " " * 41)
            print(f"{name + ':':<10} {rate}  wall {wall:7.2f} s  cpu {cpu:7.2f} s  peak RSS {rss / 1024:6.1f} MiB")
            if name == "import" and err:
                for line in err.splitlines():
                    if line.startswith("loopwatch import:") and "file(s)" in line:
                        print(f"           {line}")
        floor = results["floor"]
        imp = results["import"]
        print(f"import vs floor: {imp[0] / floor[0]:.1f}x the wall time of reading the bytes, "
              f"{imp[1] / max(floor[1], 1e-9):.1f}x its CPU ({1000 * imp[1] / args.sessions:.2f} ms of CPU per "
              f"file against {1000 * floor[1] / args.sessions:.2f}); peak RSS {imp[2] / 1024:.1f} MiB against "
              f"{results['start-up'][2] / 1024:.1f} MiB for loading the command alone and "
              f"{floor[2] / 1024:.1f} MiB for the floor")
        print(f"run on: {os.cpu_count()} CPU(s), load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
