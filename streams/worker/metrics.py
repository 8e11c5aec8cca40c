"""Prometheus metrics of the worker, in one registry (served on ``/metrics``).

Names follow Prometheus conventions: ``_total`` for counters, base units
(seconds) for histograms. The Grafana dashboard in ``deploy/grafana`` queries
only these names (a test checks it).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from typing import Any, Callable, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = [
    "REGISTRY",
    "EVENTS",
    "VERDICTS",
    "DETECTIONS",
    "POST_COMPACTION_ABORTS",
    "DEAD_LETTERS",
    "ENGINE_SECONDS",
    "VERDICT_LATENCY_SECONDS",
    "ACTIVE_KEYS",
    "CONSUMER_LAG",
    "REDELIVERED",
    "CHECKPOINT_SECONDS",
    "STATES_NOT_WRITTEN",
    "FLEET_LOOPS",
    "FLEET_BREAKER",
    "FLEET_WINDOWS",
    "FENCED",
    "KAFKA_OUTAGES",
    "LATE_VERDICTS",
    "RUN_ENDED_EVENTS",
    "METRIC_NAMES",
    "DEAD_LETTER_REASONS",
    "observe_many",
    "count_finding",
    "BatchCounts",
]

REGISTRY = CollectorRegistry(auto_describe=True)

# Engine time is microseconds; end-to-end latency is milliseconds to seconds.
_ENGINE_BUCKETS = (5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 5e-3, 1e-2)
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

EVENTS = Counter("loopwatch_events", "Events applied, by event type.", ["type"], registry=REGISTRY)
VERDICTS = Counter(
    "loopwatch_verdicts", "Verdicts produced, by verdict (allow, warn, block, abort, ignore; late: a tool_call "
    "verdict produced after the deadline its runner sent, whatever it said: the runner ran the call).",
    ["verdict"], registry=REGISTRY,
)
DETECTIONS = Counter(
    "loopwatch_detections",
    "Findings of verdicts (their decided_by, one per loop event) by kind (detection, guard, policy, escalation, "
    "budget, fleet, run_end), detector, level, action (warn = emitted warning, suppressed = deduplicated warning, "
    "block, abort; would_* in shadow mode) and enforced (false: shadow).",
    ["kind", "detector", "level", "action", "enforced"], registry=REGISTRY,
)
POST_COMPACTION_ABORTS = Counter(
    "loopwatch_post_compaction_aborts", "Runs aborted by the post-compaction guard (compaction_loop_persisted).",
    registry=REGISTRY,
)
DEAD_LETTERS = Counter(
    "loopwatch_dead_letters", "Records sent to the dead-letter topic, by reason class.", ["reason"],
    registry=REGISTRY,
)
ENGINE_SECONDS = Histogram(
    "loopwatch_engine_seconds", "Engine time per event handed to the engine (events it rejects included), in seconds.", buckets=_ENGINE_BUCKETS, registry=REGISTRY,
)
VERDICT_LATENCY_SECONDS = Histogram(
    "loopwatch_verdict_latency_seconds",
    "End-to-end latency from the event's producer timestamp (ts) to its verdict being produced, in seconds.",
    buckets=_LATENCY_BUCKETS, registry=REGISTRY,
)
ACTIVE_KEYS = Gauge(
    "loopwatch_active_runs", "Partition keys (runs, or sessions with --key-by session) holding state.",
    registry=REGISTRY,
)
CONSUMER_LAG = Gauge(
    "loopwatch_consumer_lag", "Records behind the partition's high watermark, per partition the worker reads (input topics and its "
    "rekey topic).",
    ["topic", "partition"], registry=REGISTRY,
)

REDELIVERED = Counter(
    "loopwatch_redelivered_events",
    "Re-delivered events (after a crash or rebalance) found already applied to their state: not applied again.",
    registry=REGISTRY,
)

CHECKPOINT_SECONDS = Histogram(
    "loopwatch_checkpoint_seconds",
    "Duration of a state checkpoint (outputs acknowledged, dirty states written and acknowledged), in seconds.",
    buckets=_LATENCY_BUCKETS, registry=REGISTRY,
)

STATES_NOT_WRITTEN = Counter(
    "loopwatch_states_not_written",
    "State writes left out of a checkpoint because the state is too large for a changelog record (see the worker's "
    "log for the key): that key's state is kept in memory only.",
    registry=REGISTRY,
)

FLEET_LOOPS = Counter(
    "loopwatch_fleet_loops",
    "fleet_loop records published: a signature (the same failing call) seen in at least minRuns distinct runs "
    "within one window, by kind (error, unknown_tool, detector, result).",
    ["kind"], registry=REGISTRY,
)
FLEET_BREAKER = Counter(
    "loopwatch_fleet_breaker",
    "Calls matching an active fleet loop, by action: block (breaker on) or shadow (would have been blocked).",
    ["action"], registry=REGISTRY,
)
FLEET_WINDOWS = Gauge(
    "loopwatch_fleet_windows", "Signature windows held in the fleet windowed table on this worker.",
    registry=REGISTRY,
)
FENCED = Counter(
    "loopwatch_partitions_fenced",
    "Partitions whose checkpoint this worker could not commit because another worker owns them now (this one "
    "was removed from the group, e.g. paused past the session timeout): its states of them were dropped.",
    registry=REGISTRY,
)
KAFKA_OUTAGES = Counter(
    "loopwatch_kafka_outages",
    "Times Kafka did not answer a send or a checkpoint (a broker down, hung or unreachable): the worker went back "
    "to its last checkpoint and rode it out (streams.worker.outage).",
    registry=REGISTRY,
)
LATE_VERDICTS = Counter(
    "loopwatch_late_verdicts",
    "Verdicts no runner waited for, by reason: ran_without_verdict (a result the runner sent for a call it ran "
    "without its verdict, after its timeout, fail-open: applied as executed, verdict late: true) and past_deadline "
    "(a tool_call verdict produced after the deadline its runner sent, by the worker's clock).",
    ["reason"], registry=REGISTRY,
)
RUN_ENDED_EVENTS = Counter(
    "loopwatch_run_ended_events",
    "Events of a run that had already ended (guard or policy abort, terminal block), refused with verdict abort "
    "and run_ended: calls a runner tried after it was told to stop.",
    registry=REGISTRY,
)

DEAD_LETTER_REASONS = ("decode", "schema", "error", "size", "state")
"""Every ``reason_class`` of a dead letter (:mod:`streams.worker.processor`)."""

# Series present from the start at 0, so that rate() and increase() see the first one (an alert on
# dead letters fires on the first, not the second) and a dashboard shows 0 rather than "no data".
for _label in ("tool_call", "tool_result", "compaction_retry"):
    EVENTS.labels(_label)
for _label in ("allow", "warn", "block", "abort", "ignore", "late"):
    VERDICTS.labels(_label)
for _label in DEAD_LETTER_REASONS:
    DEAD_LETTERS.labels(_label)
for _label in ("block", "shadow"):
    FLEET_BREAKER.labels(_label)
for _label in ("error", "unknown_tool", "detector", "result"):
    FLEET_LOOPS.labels(_label)
for _label in ("ran_without_verdict", "past_deadline"):
    LATE_VERDICTS.labels(_label)
DETECTIONS.labels("guard", "compaction_loop_persisted", "critical", "abort", "true")


def count_finding(finding: dict) -> None:
    """Count one finding of a verdict's ``decided_by`` (a loop event) in :data:`DETECTIONS`."""
    DETECTIONS.labels(str(finding.get("kind")), str(finding.get("detector")), str(finding.get("level")),
                      str(finding.get("action")), "true" if finding.get("enforced", True) else "false").inc()
    if finding.get("kind") == "guard":
        POST_COMPACTION_ABORTS.inc()


# Every series name a scrape can show (counters gain _total, histograms _bucket/_sum/_count).
METRIC_NAMES = frozenset(
    name
    for metric in (EVENTS, VERDICTS, DETECTIONS, POST_COMPACTION_ABORTS, DEAD_LETTERS, REDELIVERED,
                   STATES_NOT_WRITTEN, FLEET_LOOPS, FLEET_BREAKER, FENCED, KAFKA_OUTAGES, LATE_VERDICTS,
                   RUN_ENDED_EVENTS)
    for name in (metric._name + "_total",)
) | frozenset(
    metric._name + suffix
    for metric in (ENGINE_SECONDS, VERDICT_LATENCY_SECONDS, CHECKPOINT_SECONDS)
    for suffix in ("_bucket", "_sum", "_count")
) | {ACTIVE_KEYS._name, CONSUMER_LAG._name, FLEET_WINDOWS._name}


def observe_many(histogram: Histogram, values: Sequence[float]) -> None:
    """``histogram.observe(value)`` for every value, as one update per bucket.

    The worker times every event; one ``observe`` per event (a lock per
    bucket and sum) costs more than a tenth of its time per event at
    saturation, so it gathers a batch's values and adds them here. Uses the
    histogram's own buckets and values (prometheus_client's ``_upper_bounds``,
    ``_buckets``, ``_sum``); where a prometheus_client lacks them, falls back
    to ``observe``. ``histogram`` must have no labels (or be a child).
    """
    if not values:
        return
    buckets = getattr(histogram, "_buckets", None)
    bounds = getattr(histogram, "_upper_bounds", None)
    if buckets is None or bounds is None or len(buckets) != len(bounds):
        for value in values:
            histogram.observe(value)
        return
    counts = [0] * len(bounds)
    for value in values:
        counts[bisect_left(bounds, value)] += 1  # the first bucket with value <= bound, as observe()
    histogram._sum.inc(sum(values))
    for bucket, count in zip(buckets, counts):
        if count:
            bucket.inc(count)


class BatchCounts:
    """The metric updates of the events of a batch, gathered per event at a dict increment's cost and
    published once per batch (:meth:`publish`): a Prometheus update takes a lock.

    Arguments:
        clock: the wall clock, seconds since the epoch, for the ``past_deadline`` count of
            :data:`LATE_VERDICTS` only (no verdict depends on it; tests pass a fake).
    Attributes:
        engine_times: the engine's seconds per event (:data:`ENGINE_SECONDS`); redelivered: events skipped
            as already applied (:data:`REDELIVERED`).
    """

    __slots__ = ("clock", "engine_times", "redelivered", "_events", "_verdicts", "_late", "_run_ended")

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.engine_times: list[float] = []
        self.redelivered = 0
        self._events: dict[Any, int] = {}
        self._verdicts: dict[Any, int] = {}
        self._late: dict[str, int] = {}
        self._run_ended = 0

    def verdict(self, event_type: Any, record: Mapping[str, Any]) -> None:
        """Count one event applied and its verdict ``record`` (:data:`EVENTS`, :data:`VERDICTS`,
        :data:`LATE_VERDICTS`, :data:`RUN_ENDED_EVENTS`).

        A call's verdict produced after its runner stopped waiting (past its ``deadline`` by
        :attr:`clock`) counts as ``late``, not as what it said: the runner ran the call (the blocks
        counted are calls that were blocked). A ``late: true`` record counts as ``ran_without_verdict``.
        """
        events = self._events
        events[event_type] = events.get(event_type, 0) + 1
        kind = None
        if "late" in record or "deadline" in record or "run_ended" in record:  # else the usual record: counted
            reason = None
            if record.get("late"):
                reason = "ran_without_verdict"
            elif record.get("type") == "tool_call":
                deadline = record.get("deadline")
                if isinstance(deadline, (int, float)) and not isinstance(deadline, bool) and \
                        self.clock() * 1000.0 > deadline:
                    reason = "past_deadline"
                    kind = "late"
            if reason is not None:
                self._late[reason] = self._late.get(reason, 0) + 1
            if "run_ended" in record:
                self._run_ended += 1
        if kind is None:
            kind = record["verdict"]
        verdicts = self._verdicts
        verdicts[kind] = verdicts.get(kind, 0) + 1

    @staticmethod
    def detections(loop_events: list[dict[str, Any]]) -> None:
        """Count the findings of a verdict's loop events in :data:`DETECTIONS` (a correction is counted as a
        late verdict already); few verdicts have any, so these go at once."""
        for loop_event in loop_events:
            if loop_event["kind"] != "correction":
                count_finding(loop_event)

    def publish(self) -> None:
        """Add what was counted since the last call to the metrics."""
        for counts, metric in ((self._events, EVENTS), (self._verdicts, VERDICTS)):
            for label, count in counts.items():
                metric.labels(str(label)).inc(count)
            counts.clear()
        observe_many(ENGINE_SECONDS, self.engine_times)
        self.engine_times.clear()
        if self.redelivered:
            REDELIVERED.inc(self.redelivered)
            self.redelivered = 0
        for reason, count in self._late.items():
            LATE_VERDICTS.labels(reason).inc(count)
        self._late.clear()
        if self._run_ended:
            RUN_ENDED_EVENTS.inc(self._run_ended)
            self._run_ended = 0
