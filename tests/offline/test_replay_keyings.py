"""`loopwatch replay` under both keyings on the shape OpenClaw's runner sends: calls with a session key, the
compaction retry with its session id only (Spec §7: one guard per run id, whatever the session)."""

import json

from click.testing import CliRunner

from streams.commands import loopwatch

RESULT = {"content": [{"type": "text", "text": "same file contents"}], "details": {"ok": True}}


def _call(n: int) -> dict:
    return {"event_id": f"c{n}", "type": "tool_call", "run_id": "r1", "session_id": "s1",
            "session_key": "agent:main:s1", "tool_call_id": f"call-{n}", "tool_name": "read",
            "args": {"path": "/workspace/notes.md"}, "result": RESULT, "error": None}


EVENTS = [_call(0), _call(1), {"event_id": "x", "type": "compaction_retry", "run_id": "r1", "session_id": "s1"},
          *(_call(n) for n in range(2, 5))]


def test_a_keyless_compaction_retry_arms_the_guard_of_its_run_under_both_keyings(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in EVENTS), encoding="utf-8")
    for key_by in ("session", "run"):
        result = CliRunner().invoke(loopwatch, ["replay", "--key-by", key_by, str(path)], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        verdicts = [json.loads(line) for line in result.stdout.splitlines()]
        assert [v["verdict"] for v in verdicts] == ["allow"] * 5 + ["abort"], key_by
        assert verdicts[-1]["guard"]["detector"] == "compaction_loop_persisted"
        assert verdicts[-1]["evidence"] == ["c2", "c3", "c4"]
