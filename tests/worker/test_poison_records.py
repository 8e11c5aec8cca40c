"""Records that once stopped the worker for good, sent to a running worker: one dead letter (or verdict) each.

The 3-byte record ``81 80 c0`` (a msgpack map whose key is a map) made msgpack
raise ``TypeError``; the worker crashed without a dead letter, at every restart
on the same record. The regression corpus (tests/fixtures/poison_records.txt)
goes in keyed, the 3-byte record also keyless (rekey path); garbage goes on
the rekey topic itself, and a stored state that is not a state waits in the
changelog for its key. Then a good event must get its verdict.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import msgpack
import pytest

from streams.wire.codecs import decode_event
from tests.wire.record_fuzz import poison_records
from tests.worker_harness import consume_all, create_topics, encode, produce, running_worker, worker_settings

pytestmark = [pytest.mark.kafka]

THREE_BYTES = bytes.fromhex("8180c0")


def _event(run: str, call: str) -> bytes:
    return encode({"type": "tool_call", "run_id": run, "session_id": "s1", "tool_call_id": call,
                   "tool_name": "read", "args": {"path": "a"}, "result": "ok", "event_id": f"{run}-{call}"})


@pytest.mark.timeout(150)
def test_poison_records_are_dead_letters_and_the_worker_answers_after_them(kafka_bootstrap, tmp_path):
    corpus = poison_records()

    async def run() -> None:
        settings = worker_settings(kafka_bootstrap, tmp_path, partitions=2)
        changelog = f"{settings.app_id}-states-changelog"
        # a stored state that is not one, for key r-stored (same partitioner: its event's partition)
        await create_topics(kafka_bootstrap, [changelog], settings.partitions)
        await produce(kafka_bootstrap, changelog, [(b"r-stored", THREE_BYTES)])
        async with running_worker(settings) as loopwatch:
            assert loopwatch.table.changelog_topic.get_topic_name() == changelog
            topic = settings.input_topics[0]
            records = [(b"r-poison", value) for _, value in corpus] + [(None, THREE_BYTES)]
            await produce(kafka_bootstrap, topic, records)
            rekey = f"{settings.app_id}-rekey"
            await produce(kafka_bootstrap, rekey, [(b"r-rekey", THREE_BYTES),
                                                  (b"r-rekey", msgpack.packb(["t", 0, "not an offset", b"", None]))])
            await produce(kafka_bootstrap, topic, [(b"r-good", _event("r-good", "c1")),
                                                   (b"r-stored", _event("r-stored", "c1"))])
            expected_letters = sum(1 for expect, _ in corpus if expect != "verdict") + 1 + 2 + 1
            expected_verdicts = sum(1 for expect, _ in corpus if expect == "verdict") + 2
            letters = await consume_all(kafka_bootstrap, settings.dead_letters_topic, expected_letters, timeout=60)
            verdicts = await consume_all(kafka_bootstrap, settings.verdicts_topic, expected_verdicts, timeout=60)
            assert loopwatch._failed is None and not loopwatch._tainted
            assert not loopwatch.app.should_stop

        decoded = [msgpack.unpackb(letter.value) for letter in letters]
        by_value = Counter((d["reason_class"], d["value"]) for d in decoded)
        for expect, value in corpus:
            if expect != "verdict" and value != THREE_BYTES:
                assert by_value[(expect, value)] == 1, (expect, value[:20])
        assert by_value[("decode", THREE_BYTES)] == 3  # keyed (in the corpus), keyless, on the rekey topic
        state_letters = [d for d in decoded if d["reason_class"] == "state"]
        assert len(state_letters) == 1 and state_letters[0]["key"] == b"r-stored"
        assert state_letters[0]["value"] == THREE_BYTES
        assert state_letters[0]["source"]["topic"] == changelog
        assert len(decoded) == expected_letters  # one each, no more

        answered = Counter(decode_event(v.value)["event_id"] for v in verdicts)
        assert answered["r-good-c1"] == 1 and answered["r-stored-c1"] == 1
        assert len(verdicts) == expected_verdicts

    asyncio.run(run())
