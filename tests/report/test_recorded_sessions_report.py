"""The report on the real recorded sessions under a sensitive configuration, against each SOURCE.md.

Configuration: warningThreshold 3, criticalThreshold 5, unknownToolThreshold 5,
globalCircuitBreakerThreshold 8 (historySize stays 30). Every detection of every file is
pinned as (detector, level, action, line); each comment says which SOURCE.md claim it is.

Where a SOURCE.md sentence and OpenClaw's rules part ways, the rules win, and the comment says why:

* the n-th identical call sees n-1 records (spec §3): with threshold 3 a repetition fires on its
  4th call, so the "3x" repeats stay silent;
* the history holds the last 30 calls of the session (historySize): repeats spread over more
  than 30 calls drop out of it;
* ping-pong fires on any A-B-A once warningThreshold is 3 (count = alternating tail + 1), so
  "edit, re-run" shows up as a (suppressed) ping-pong warning, also in the negative controls;
* warnings with count < 10 are never emitted (spec §6, bucket = count // 10): they are
  ``suppressed``.

The recordings are read in place (licences: never copied into the project) from
``../shared/realdata`` or ``$LOOPWATCH_REALDATA``; the test is skipped when they are absent.
"""

import json
import os
from pathlib import Path

import pytest

from streams.detection import Engine, load_config
from streams.importers import import_paths
from streams.offline.replay import Replayer
from streams.report import build_report

REALDATA = Path(os.environ.get("LOOPWATCH_REALDATA") or Path(__file__).resolve().parents[3] / "shared" / "realdata")

pytestmark = [
    pytest.mark.realdata,
    pytest.mark.skipif(not REALDATA.is_dir(), reason=f"no recorded sessions at {REALDATA}"),
]

SENSITIVE = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5,
                                          "unknownToolThreshold": 5, "globalCircuitBreakerThreshold": 8}}}

GR, PP, UT = "generic_repeat", "ping_pong", "unknown_tool_repeat"
W, C = "warning", "critical"
S, B = "suppressed", "block"

NUCBOX_RESET = "0ff7b343-fcdb-4bc2-8504-ccc296c7e85b.jsonl.reset.2026-05-01T16-27-13.884Z"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    config = tmp_path_factory.mktemp("cfg") / "sensitive.json"
    config.write_text(json.dumps(SENSITIVE))
    out = {}
    for fmt, folder in (("openclaw", "openclaw"), ("claude-code", "claude-code"), ("codex", "codex-cli"),
                        ("swe-agent", "swe-agent")):
        replayer = Replayer(Engine(load_config(str(config))))
        errors = []
        records = [replayer.apply(e, e["event_id"]) for e in import_paths(fmt, [REALDATA / folder], on_error=errors.append)]
        assert errors == []
        out[fmt] = build_report(records, str(config))
    return out


def _by_file(report):
    """file name -> [(detector, level, action, line)] in stream order."""
    found = {}
    for session in report.sessions.values():
        for path in session.files:
            found.setdefault(Path(path).name, [])
    for row in report.detections:
        found[Path(row.source["path"]).name].append((row.detector, row.level, row.action, row.source["line"]))
    return found


# --- OpenClaw --------------------------------------------------------------------------------

def test_openclaw_cat_backup_invalid_write_loop(reports):
    # "write {file: styles.css} 6x -> Validation failed ... (lines 9-22)" (a 7th write at line 15 uses
    # "path", which makes line 17 an A-B-A). Blocked at the 6th identical write (5 prior, same error).
    # "then exec {} 4x": the 4th (line 30) is in a message with stopReason aborted, never executed
    # (the importer skips it, as pi-agent does), so 3 calls: below the threshold.
    assert _by_file(reports["openclaw"])["de164575-fc39-43d3-b0f9-7781fe07e46d.jsonl"] == [
        (PP, W, S, 17), (GR, W, S, 19), (GR, C, B, 21)]


def test_openclaw_unknown_tool_tavily(reports):
    # "tavily-search 6 consecutive orphan results Tool tavily-search not found (lines 7-17)"
    assert _by_file(reports["openclaw"])["ef7c5f27-7a9c-47b8-af96-e856cc5138f7.jsonl"] == [
        (GR, W, S, 13), (GR, W, S, 15), (UT, C, B, 17)]


def test_openclaw_moltbot_near_miss_never_blocks(reports):
    # "poll/send-keys alternate from line 20 to 29, but every poll result differs: near-miss (must not
    # block)": ping-pong warns (no-progress evidence is only needed for critical), never blocks
    assert _by_file(reports["openclaw"])["f8c3e7a8-7dc1-43cc-8ce0-a9d268c29be1.jsonl"] == [
        (PP, W, S, 16), (PP, W, S, 20), (PP, W, S, 24), (PP, W, S, 26), (PP, W, S, 28)]


def test_openclaw_chairong_polling_e619(reports):
    # "process poll glow-ridge 3x identical (8-39)", "dawn-coral 3x (48-63)": 3 < 4, no
    # known_poll_no_progress. "exec ls .../top_y5.csv 5x identical (58-91)": 4th call (86) generic
    # warning, 5th (90) is also an A-B-A, where ping-pong takes precedence. "ls -la .../20260416/ 5x
    # (16-109)": only the 5th (108) still has 3 of them in the 30-call history; "cat ... 4x (22-103)":
    # at most 2 in the history at a time, silent.
    name = "e619a9c5-4bc9-4060-bdd8-6dafac385dd4.jsonl.deleted.2026-04-17T00-06-55.116Z"
    assert _by_file(reports["openclaw"])[name] == [(PP, W, S, 52), (GR, W, S, 86), (PP, W, S, 90), (GR, W, S, 108)]


def test_openclaw_chairong_wait_cycle_5783(reports):
    # "sleep 300 && ls ... 4x (116-159)": 4th at 158. "ls .../top_y5.csv 3x" silent; "ls .../20260417/
    # 4x (32-209)" spread over 107 calls, never 3 in the 30-call history. "process poll/log
    # alternation (198-205), progress": ping-pong warnings, not critical.
    assert _by_file(reports["openclaw"])["5783303d-7411-4df9-9e47-3177bf226730.jsonl"] == [
        (GR, W, S, 158), (PP, W, S, 202), (PP, W, S, 204)]


def test_openclaw_main_repeated_ls_283d(reports):
    # "exec ls -la .../20260409/ 5x in one turn (lines 8-93)": calls at 8, 46, 52, 86, 92; at 86 the
    # call at 8 has left the 30-call history, so only the 5th (92) sees 3 of them
    assert _by_file(reports["openclaw"])["283db52c-4980-4c20-b50a-1c5d37c331a3.jsonl"] == [(GR, W, S, 92)]


def test_openclaw_nucbox_heartbeats(reports):
    rows = _by_file(reports["openclaw"])[NUCBOX_RESET]
    # "lines 6523-6532 (10x read_file)": 4th and 5th warn, from the 6th the unknown-tool breaker blocks
    assert [r for r in rows if 6523 <= r[3] <= 6532] == [
        (GR, W, S, 6526), (GR, W, S, 6527)] + [(UT, C, B, line) for line in range(6528, 6533)]
    # "e.g. 2801-2810 with 10x read_file" (abandoned branch, active before the rewrite)
    assert [r for r in rows if 2801 <= r[3] <= 2810] == [
        (GR, W, S, 2804), (GR, W, S, 2805)] + [(UT, C, B, line) for line in range(2806, 2811)]
    # "google:search ... contains a ':', which extractUnknownToolName does not match": no unknown-tool
    # detection, the generic no-progress rule blocks it instead
    assert [r for r in rows if r[3] <= 2761 and r[3] >= 2753 and r[0] != UT] == [
        (GR, W, S, 2756), (GR, W, S, 2757)] + [(GR, C, B, line) for line in range(2758, 2762)]
    # every unknown-tool block is in the bursts SOURCE.md lists (2753-2856, and after the compaction 6517-6765)
    assert {r for r in rows if r[0] == UT} and all(2753 <= r[3] <= 2856 or 6517 <= r[3] <= 6765
                                                    for r in rows if r[0] == UT)
    # "cross-run identical repeat (read HEARTBEAT.md, one call per heartbeat run) ... per-run
    # detectors stay silent"; the rewritten copy (3166-6243) is imported once, so nothing there either
    assert all(r[3] >= 2753 for r in rows)
    assert not [r for r in rows if 3166 <= r[3] <= 6243]
    session = next(s for s in reports["openclaw"].sessions.values() if s.files[0].endswith(NUCBOX_RESET))
    assert all(row.tool in ("read_file", "google:search") for row in session.detections)
    # "after the compaction at 6516 every heartbeat run retries the missing read_file": each heartbeat
    # is its own run and the guard watches only the run of the compaction (one call there), so no abort
    assert (session.totals.aborts, session.totals.blocks, session.totals.warnings_suppressed) == (0, 60, 46)


@pytest.mark.parametrize("name", [
    "29330952-50b3-43df-bbfe-a0e2046f3800.jsonl",  # compaction storm, no tool calls
    "5e9096eb-a13b-48ae-990d-ca9d6f231b05.jsonl",  # "no loop"
])
def test_openclaw_quiet_sessions(reports, name):
    assert _by_file(reports["openclaw"])[name] == []


def test_openclaw_verve_negative_control(reports):
    # "only benign repeats (git status -sb 3x across edits, lines 213-240; a backup script run 3x,
    # lines 279-301)": nothing there. What remains are two "run, fix, run again" A-B-A sequences
    # (93-95-97 script/edit/script, 181-183-185 commit/config/commit) that the ping-pong rule counts
    # as 3 alternating calls: suppressed warnings, never emitted, never blocking.
    assert _by_file(reports["openclaw"])["22a2a42e-6f87-47d6-958d-e10a0a8f4361.jsonl"] == [
        (PP, W, S, 97), (PP, W, S, 185)]


def test_openclaw_fleet_totals(reports):
    t = reports["openclaw"].totals
    assert (t.sessions, t.calls, t.warnings_emitted, t.warnings_suppressed, t.blocks, t.aborts) == (10, 880, 0, 65, 62, 0)


# --- Claude Code -----------------------------------------------------------------------------

def test_claude_code(reports):
    found = _by_file(reports["claude-code"])
    # "identical git add -A && git commit ... repeated 5x (1338, 1361, 1384, 1414, 1442) ... results
    # not all identical, a near-miss for no-progress": warnings at the 4th and 5th, no block.
    # "mix test 3x (1712-2108), mix dialyzer 3x (1900-2320) ... negative cases": nothing there.
    # 672 (commit, mix format, commit) and 1122 (Read, Edit, Read of one file) are A-B-A ping-pongs.
    assert found["ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"] == [
        (PP, W, S, 672), (PP, W, S, 1122), (GR, W, S, 1414), (GR, W, S, 1442)]
    # "tool_heavy.jsonl, short.jsonl: no loops (negative controls)"; the sub-agent files
    for name in ("tool_heavy.jsonl", "short.jsonl", "agent-aac57f5.jsonl"):
        assert found.get(name, []) == [], name
    assert reports["claude-code"].totals.blocks == 0


# --- Codex -----------------------------------------------------------------------------------

def test_codex_has_no_tool_loop(reports):
    # eval-15: transport retry loop outside the tool layer (no tool calls); eval-5: sed / read notes /
    # apply_patch / sed is not even an A-B-A; eval-12: no repetition
    report = reports["codex"]
    assert report.detections == []
    assert report.totals.calls == 64


# --- SWE-agent -------------------------------------------------------------------------------

def test_swe_agent(reports):
    rows = [(r.detector, r.level, r.action, Path(r.source["path"]).name, r.source.get("step"))
            for r in reports["swe-agent"].detections]
    # eps: "steps 9-12 are submit flag{...} four times, each answered Wrong flag!": the 4th warns (count
    # 3); 4 < 5, no block. pydicom (2 identical edits), marshmallow (2 different), 6e44b9: nothing.
    assert rows == [(GR, W, S, "eps.traj", 12)]
    assert reports["swe-agent"].detections[0].count == 3
