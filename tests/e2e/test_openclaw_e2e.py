"""Real OpenClaw (2026.7.35 and 2026.9.6 from the npm registry) with the loopwatch plugin, a scripted model
that repeats one failing tool call, the real broker, a worker and ``loopwatch gateway``.

For each version: the plugin installs with the commands of docs/runners/openclaw.md and tells
loopwatch its host's profile; the loop is blocked at the predicted call; after the block no
further call of the run executes (every later result in OpenClaw's own session is a block, none
is the tool's); on 2026.9.6 the terminal block ends the run for loopwatch (``run_ended`` on every
later call) and the model reads OpenClaw's texts (warning note, recovery and terminal paragraphs);
and the live verdicts equal ``loopwatch replay`` of OpenClaw's own recorded session (JSONL
transcript on 2026.7.35, the SQLite session store on 2026.9.6) with the same config, call by call:
decision, detector, count, model text, run end, and the result hash.

With the worker stopped mid-run (both versions, ``failMode`` open and closed): what ran follows the
plugin's fail mode, the calls run without a verdict reach loopwatch marked ``ran_without_verdict``,
and the worker's verdicts once it is back equal the offline replay of the published events.

Marker ``e2e`` (not in the default run): ``make e2e-openclaw`` (or ``make e2e``) installs what it
needs into the cache folder and runs this file. About 4 minutes on 2 cores once installed for the loop
test, and about 6 minutes more per worker-stopped run (four runs).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from streams.detection import Engine, OpenClawConfig
from streams.offline.replay import Replayer
from tests.conftest import topic_tag
from tests.e2e.compare import calls_of
from tests.e2e.harness import LOOPWATCH, Pipeline, replay
from tests.e2e.openclaw_host import VERSIONS, OpenClawHost, install, uses_entries
from tests.e2e.openclaw_model import ScriptedModel, serve

pytestmark = [pytest.mark.e2e, pytest.mark.kafka]

CALLS = 30  # the scripted model's tool calls before it answers with text
TOOL, ARGS = "read", {"path": "missing.txt"}
NOTE = "[System note: Tool-loop warning after 10 repeated calls. Change your approach or stop if you are not making progress.]"
RECOVERY = ("\n\nDo not repeat this exact tool action. Reassess the task. You may answer the user, ask for "
            "clarification, or continue with a different tool or different arguments.")
TERMINAL = "\n\nCritical tool-loop recovery failed because another critical loop was detected. This run is stopping now."


def _number(call_id: str) -> int:
    """``call_21`` (OpenClaw's id) or ``call21`` (the id OpenClaw sends the model) -> 21."""
    return int(call_id.removeprefix("call").lstrip("_"))


def _texts(records: list[dict]) -> dict[int, tuple]:
    """Per call number: what loopwatch said the model should read and whether the run had ended."""
    return {_number(r["tool_call_id"]): (r.get("block_text"), (r.get("run_ended") or {}).get("message"))
            for r in records if r.get("type") == "tool_call"}


def _keep(version: str, host: OpenClawHost, sessions: Path, live_calls: dict[str, dict]) -> None:
    """With ``LOOPWATCH_E2E_FIXTURES=tests/fixtures/openclaw``: save OpenClaw's session as it wrote it
    (gzipped; the 2026.9 database as a ``VACUUM INTO`` copy, made with Node 24's ``node:sqlite``) and
    the live verdicts, one line per call (:func:`tests.e2e.compare.calls_of`)."""
    out = os.environ.get("LOOPWATCH_E2E_FIXTURES")
    if not out:
        return
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"live-{version}"
    if uses_entries(version):
        database = next(sessions.glob("*/agent/openclaw-agent.sqlite"))
        copy = host.home / "fixture.sqlite"
        script = ("const { DatabaseSync } = require('node:sqlite');"
                  "new DatabaseSync(process.argv[1], { readOnly: true }).exec(`VACUUM INTO '${process.argv[2]}'`);")
        subprocess.run([str(host.node_bin / "node"), "-e", script, str(database), str(copy)], check=True,
                       capture_output=True)
        files = {f"{name}.sqlite.gz": copy}
    else:
        transcript = next(p for p in sessions.glob("*/sessions/*.jsonl") if ".trajectory." not in p.name)
        files = {f"{name}.jsonl.gz": transcript,
                 f"{name}.trajectory.jsonl.gz": transcript.with_name(transcript.stem + ".trajectory.jsonl")}
    for target, source in files.items():
        with source.open("rb") as src, gzip.open(out_dir / target, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    lines = [json.dumps({"tool_call_id": k, **v}) for k, v in live_calls.items()]
    (out_dir / f"{name}.live-calls.jsonl").write_text("\n".join(lines) + "\n")


def _stored_result_text(state_dir: Path, call_id: str) -> str:
    """The text OpenClaw 2026.9 stored for ``call_id``'s tool result (read-only, as the importer opens it)."""
    database = next(state_dir.glob("agents/*/agent/openclaw-agent.sqlite"))
    with contextlib.closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as db:
        for (text,) in db.execute("SELECT event_json FROM transcript_events WHERE event_json IS NOT NULL ORDER BY seq"):
            message = json.loads(text).get("message") or {}
            if message.get("role") == "toolResult" and message.get("toolCallId") == call_id:
                return "\n".join(part.get("text", "") for part in message.get("content", []))
    raise AssertionError(f"no stored result for {call_id}")


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("version", VERSIONS)
def test_openclaw_loop_is_blocked_ends_and_replays_as_it_ran(version, kafka_bootstrap, tmp_path):
    node_bin, executable = install(version)
    nine = uses_entries(version)
    profile = "openclaw-2026.9.6" if nine else "openclaw-2026.7"
    lw_config = {"tools": {"loopDetection": {"enabled": True}}, "options": {"profile": profile}}

    model = ScriptedModel(TOOL, ARGS, CALLS, tmp_path / "model.jsonl")
    server = serve(model)
    pipeline = Pipeline(kafka_bootstrap, tmp_path / "loopwatch", lw_config, topic_tag()).start()
    try:
        # the plugin finds the gateway's token as on the gateway's machine: its token file
        host = OpenClawHost(version, tmp_path / "openclaw", node_bin, executable,
                            {"LOOPWATCH_GATEWAY_TOKEN_FILE": str(pipeline.token_file)})
        host.write_config(f"http://127.0.0.1:{server.server_address[1]}/v1")
        commands = host.install_plugin({"gatewayUrl": pipeline.gateway_url, "timeoutMs": 12000})
        turn = host.agent_turn("Read missing.txt")
        (tmp_path / "openclaw.out").write_text(turn.stdout + "\n----\n" + turn.stderr)
        assert turn.returncode == 0, turn.stderr[-3000:]
        assert f"OpenClaw {version}, profile {profile}" in turn.stderr, "the plugin named its host's version and profile"

        # what OpenClaw recorded: its session as the importer reads it (JSONL up to 2026.7.x, SQLite from 2026.9)
        sessions = host.state_dir / "agents"  # agents/<id>/sessions/*.jsonl (2026.7), agents/<id>/agent/*.sqlite (2026.9)
        imported = subprocess.run([LOOPWATCH, "import", "--format", "openclaw", str(sessions)],
                                  capture_output=True, text=True, check=True).stdout
        events = [json.loads(line) for line in imported.splitlines()]
        calls = [e for e in events if e["type"] == "tool_call"]
        assert [c["tool_call_id"] for c in calls] == [f"call_{n}" for n in range(1, CALLS + 1)]
        assert {Path(e["source"]["path"]).suffix for e in events} == {".sqlite" if nine else ".jsonl"}
        live = pipeline.verdicts(calls[0]["session_id"], at_least=CALLS + 20)
    finally:
        pipeline.stop()
        server.shutdown()

    # executed: calls 1-20 (the tool's own error); blocked before running: 21 on, none executes again
    outcome_of = {c["tool_call_id"]: c for c in calls}
    for e in events:
        if e["type"] == "tool_result":
            outcome_of[e["tool_call_id"]] = e
    own_error = outcome_of["call_1"]["error"]
    ran = [n for n in range(1, CALLS + 1) if outcome_of[f"call_{n}"]["error"] == own_error]
    assert ran == list(range(1, 21)), f"calls that executed: {ran}"

    # live verdicts equal the replay of OpenClaw's own session, call by call, result hashes included
    replayed = replay("openclaw", sessions, pipeline.config_path)
    live_calls, replay_calls = calls_of(live), calls_of(replayed)
    assert list(live_calls) == [f"call_{n}" for n in range(1, CALLS + 1)]
    assert live_calls == replay_calls
    assert _texts(live) == _texts(replayed)
    hashes = {live_calls[f"call_{n}"]["result_hash"] for n in range(1, 21)}
    assert len(hashes) == 1 and next(iter(hashes)).startswith("error:"), hashes

    by_n = {_number(call_id): call for call_id, call in live_calls.items()}
    assert [by_n[n]["verdict"] for n in range(1, 21)] == ["allow"] * 10 + ["warn"] + ["allow"] * 9
    assert (by_n[21]["verdict"], by_n[21]["detector"], by_n[21]["count"]) == ("block", "generic_repeat", 20)

    # what the model read after each call (the request that followed it)
    told = {}
    for line in (tmp_path / "model.jsonl").read_text().splitlines():
        last = json.loads(line)["last_tool"]
        if last:
            content = last["content"]
            told[_number(last["tool_call_id"])] = content if isinstance(content, str) else "\n".join(
                part.get("text", "") for part in content)
    texts = _texts(live)
    if nine:
        # the warning's note: in OpenClaw's session, on call 11's result; the model reads it from the
        # session's next run on (tool_result_persist rewrites the stored result, not the live one)
        assert _stored_result_text(host.state_dir, "call_11").endswith("\n" + NOTE)
        assert NOTE not in told[11]
        assert told[21] == texts[21][0] and told[21].endswith(RECOVERY)
        assert (by_n[22]["verdict"], by_n[22]["count"]) == ("abort", 21)
        assert told[22] == texts[22][0] and told[22].endswith(TERMINAL)
        assert all(by_n[n]["verdict"] == "abort" for n in range(23, CALLS + 1))
        assert all(told[n] == texts[n][1] for n in range(23, CALLS + 1))
        assert told[23].startswith("loopwatch: this run has already ended (generic_repeat)")
    else:
        assert told[21].startswith("CRITICAL: Called read with identical arguments and identical outcomes 20 times.")
        assert all(by_n[n]["verdict"] == "block" for n in range(21, CALLS + 1))
    _keep(version, host, sessions, live_calls)
    print(f"\nOpenClaw {version}: installed with {commands}; {len(live)} live verdicts = replay; "
          f"calls executed 1-20, blocked 21-{CALLS}; after call 22 the model read: {told[22][-120:]!r}")


STOP_BEFORE = 3  # the worker stops before the model's 3rd tool call
# per version: loopwatch's config, the scripted model's tool calls, the first call the rules refuse. The
# calls run while the worker was down reach the critical level: 2026.7 with warn at 3 and critical at 5;
# 2026.9.6 fixes warn 10 and critical 20 (the 21st call gets the recovery block, the 22nd the terminal
# block that ends the run, later ones are refused as calls of an ended run)
STOP_RUNS = {"2026.7.35": ({"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3,
                                                        "criticalThreshold": 5}}}, 10, 6),
             "2026.9.6": ({"tools": {"loopDetection": {"enabled": True}}}, 24, 21)}


def _strip(record: dict) -> dict:
    """A verdict record without what differs between the worker and the offline replay by design: the
    Kafka position (``source``), the evidence references built from it, and the record key."""
    return {k: v for k, v in record.items() if k not in ("source", "evidence", "key")}


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("fail_mode", ["open", "closed"])
@pytest.mark.parametrize("version", VERSIONS)
def test_openclaw_with_the_worker_stopped_mid_run(version, fail_mode, kafka_bootstrap, tmp_path):
    """The worker stops before the model's 3rd call; the plugin waits 1.5 s for each verdict (the gateway
    would wait 10 s), so its own ``failMode`` decides. Open: every call runs, each with a ``deadline``, and
    their results reach loopwatch marked ``ran_without_verdict``; once the worker is back it applies the
    backlog: the calls its rules refuse get late verdicts, their results are recorded as
    executed and say which refusal did not happen (``corrects``). Closed: no call runs from the 3rd on
    (the model reads the plugin's failing-closed text), and nothing is marked late. Either way the live
    verdicts equal the offline replay of the events as the gateway published them."""
    node_bin, executable = install(version)
    profile = "openclaw-2026.9.6" if uses_entries(version) else "openclaw-2026.7"
    config, calls_made, first_refused = STOP_RUNS[version]
    config = {**config, "options": {"profile": profile}}
    pipeline = Pipeline(kafka_bootstrap, tmp_path / "loopwatch", config, topic_tag(), gateway_timeout_s=10.0,
                        on_timeout="allow" if fail_mode == "open" else "block")

    def stop_worker(number: int) -> None:
        if number == STOP_BEFORE:
            # OpenClaw does not wait for its after-tool-call hook before asking the model again: the last
            # result must have its verdict first, or the plugin's fail mode would apply to that report too
            done = 2 * (STOP_BEFORE - 1)  # calls and results so far
            assert pipeline.wait_verdicts(done) >= done, "the verdicts before the stop did not come"
            time.sleep(1.0)  # the gateway's answer on its way to the plugin
            pipeline.stop_worker()

    model = ScriptedModel(TOOL, ARGS, calls_made, tmp_path / "model.jsonl", before_call=stop_worker)
    server = serve(model)
    pipeline.start()
    try:
        host = OpenClawHost(version, tmp_path / "openclaw", node_bin, executable,
                            {"LOOPWATCH_GATEWAY_TOKEN_FILE": str(pipeline.token_file)})
        host.write_config(f"http://127.0.0.1:{server.server_address[1]}/v1")
        host.install_plugin({"gatewayUrl": pipeline.gateway_url, "timeoutMs": 1500, "failMode": fail_mode})
        turn = host.agent_turn("Read missing.txt")
        (tmp_path / "openclaw.out").write_text(turn.stdout + "\n----\n" + turn.stderr)
        assert turn.returncode == 0, turn.stderr[-3000:]
        assert model.calls == calls_made
        imported = subprocess.run([LOOPWATCH, "import", "--format", "openclaw", str(host.state_dir / "agents")],
                                  capture_output=True, text=True, check=True).stdout
        recorded = [json.loads(line) for line in imported.splitlines()]
        session_id = next(e["session_id"] for e in recorded if e["type"] == "tool_call")
        pipeline.start_worker()  # back: it applies what was published while it was down
        published = pipeline.events(session_id, at_least=1)
        live = pipeline.verdicts(session_id, at_least=len(published), timeout=60.0)
    finally:
        pipeline.stop()
        server.shutdown()

    # what ran, by OpenClaw's own session: the tool's own error, or the plugin's block
    outcome_of = {e["tool_call_id"]: e for e in recorded if e["type"] == "tool_call"}
    for e in recorded:
        if e["type"] == "tool_result":
            outcome_of[e["tool_call_id"]] = e
    own_error = outcome_of["call_1"]["error"]
    ran = [n for n in range(1, calls_made + 1) if outcome_of[f"call_{n}"]["error"] == own_error]
    calls = [e for e in published if e["type"] == "tool_call"]
    results = {e["tool_call_id"]: e for e in published if e["type"] == "tool_result"}
    assert [c["tool_call_id"] for c in calls] == [f"call_{n}" for n in range(1, calls_made + 1)]
    stopped = [f"call_{n}" for n in range(STOP_BEFORE, calls_made + 1)]
    if fail_mode == "open":
        assert ran == list(range(1, calls_made + 1))  # nothing could be refused in time
        assert "failing open: the tool call goes ahead unchecked" in turn.stderr
        assert all(isinstance(c.get("deadline"), int) for c in calls)  # when the plugin stops waiting
        assert [i for i, r in results.items() if r.get("ran_without_verdict")] == stopped
    else:
        assert ran == list(range(1, STOP_BEFORE))  # blocked before running from the stop on
        told = [json.loads(line)["last_tool"] for line in (tmp_path / "model.jsonl").read_text().splitlines()]
        texts = [t["content"] if isinstance(t["content"], str) else "\n".join(p.get("text", "") for p in t["content"])
                 for t in told if t and t["tool_call_id"].removeprefix("call").lstrip("_") == str(STOP_BEFORE)]
        assert texts and "failing closed: the tool call is blocked" in texts[0], texts
        assert not any("deadline" in c for c in calls) and not any("ran_without_verdict" in r for r in results.values())
        assert sorted(results) == [f"call_{n}" for n in range(1, STOP_BEFORE)]  # a blocked call has no outcome

    by_id = {(r["type"], r["tool_call_id"]): r for r in live}
    verdicts = [by_id[("tool_call", f"call_{n}")]["verdict"] for n in range(1, calls_made + 1)]
    if fail_mode == "open":
        # the rules' answers after the fact (2026.9.6: a recovery block, then the terminal block ends the
        # run), but the runner had run them all
        refused = [n for n, verdict in enumerate(verdicts, 1) if verdict in ("block", "abort")]
        assert refused == list(range(first_refused, calls_made + 1)), verdicts
        for n in refused:
            call, result = by_id[("tool_call", f"call_{n}")], by_id[("tool_result", f"call_{n}")]
            assert result["late"] is True and result["outcome"]["recorded"] is True
            assert result["corrects"] == {"event_id": call["event_id"], "tool_call_id": f"call_{n}",
                                          "verdict": call["verdict"], "by": call["decided_by"]["detector"]}
        assert not [r for r in live if r["verdict"] == "ignore"]
    # the worker's verdicts equal the offline replay of the events as published, record by record
    replayer = Replayer(Engine(OpenClawConfig(config)), key_by="run")
    offline = [replayer.apply(e, e["event_id"]) for e in published]
    assert [_strip(o) for o in offline] == [_strip(r) for r in live]
    print(f"\nOpenClaw {version}, failMode {fail_mode}, worker stopped before call {STOP_BEFORE}: calls run {ran}; "
          f"verdicts after the restart {verdicts}; {len(live)} live verdicts = replay")
