"""Every setting of the stream worker, in one typed place.

Each field has a default, a unit (in its name or description) and an
environment variable ``LOOPWATCH_<FIELD>`` (upper case), e.g.
``LOOPWATCH_KEY_BY=session``. ``loopwatch worker`` exposes each field as a
``--field-name`` flag; a flag wins over the environment, which wins over the
default. List-valued settings take a comma-separated string in the
environment (``LOOPWATCH_INPUT_TOPICS=a,b``) or a JSON list.

Latency-relevant defaults (runners wait for each verdict): producer linger 0 ms,
``acks=all`` (the checkpoint design relies on acknowledged writes, see
:mod:`streams.worker.app`), checkpoints looked for every 0.5 s, a partition's after 1,000 of its events or
5 s (off the verdict path; sooner only shortens the input re-applied after a crash, and costs a Kafka
transaction per partition each time).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from streams.wire.outages import DEFAULT_RECONNECT_BACKOFF_MAX_MS, DEFAULT_RETRY_BACKOFF_MS
from streams.wire.brokers import bootstrap_servers, default_bootstrap
from streams.detection.config import VALIDATE_BY_DEFAULT, VALIDATE_DESCRIPTION

__all__ = ["WorkerSettings", "ENV_PREFIX", "DEFAULT_STATE_TTL_S"]

ENV_PREFIX = "LOOPWATCH_"
DEFAULT_STATE_TTL_S = 1800.0  # OpenClaw prunes idle session state after 30 min


class WorkerSettings(BaseSettings):
    """Settings of the Faust worker (``loopwatch worker``, ``faust -A streams.app worker``)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", validate_default=True)

    # ------------------------------------------------------------------ Kafka
    broker: str = Field(
        "kafka://127.0.0.1:9092",
        description="Kafka bootstrap server(s) as a Faust broker URL (kafka://host:port; several separated by "
                    "';'); a bare host:port[,host:port] is accepted too. Without a flag or LOOPWATCH_BROKER: "
                    "LOOPWATCH_BOOTSTRAP (the variable of every command), else 127.0.0.1:$KAFKA_PORT when "
                    "KAFKA_PORT is exported, else 127.0.0.1:9092.",
    )
    app_id: str = Field(
        "loopwatch",
        description="Faust app id = Kafka consumer group id; also prefixes the changelog and rekey topics.",
    )
    input_topics: Annotated[list[str], NoDecode] = Field(
        ["loopwatch.events"],
        description="Topics the runners publish events to (comma-separated).",
    )
    verdicts_topic: str = Field(
        "loopwatch.verdicts", description="Topic of the verdicts: one record per input event, same key.",
    )
    loop_events_topic: str = Field(
        "loopwatch.loop-events",
        description="Topic of the loop events: one record per warning (emitted or suppressed), block or abort.",
    )
    dead_letters_topic: str = Field(
        "loopwatch.dead-letters",
        description="Topic of the records that could not be decoded or failed event validation.",
    )
    fleet_events_topic: str = Field(
        "loopwatch.fleet-events",
        description="Topic of the fleet view: fleet_loop records (the same failing call in many runs within a "
                    "window) and fleet_block records (calls the fleet breaker blocked or, in shadow, would block). "
                    "Fleet settings are in the config file's options.fleet.",
    )
    partitions: int = Field(
        4, ge=1,
        description="Partitions of every topic the worker creates (changelog, rekey, missing input/output "
                    "topics); must equal the input topics' partition count.",
    )
    replication_factor: int = Field(1, ge=1, description="Replication factor of the topics the worker creates.")

    # ------------------------------------------------------------- detection
    key_by: Literal["run", "session"] = Field(
        "run",
        description="State key of a record without a Kafka key: 'run' = run id, else session key, else "
                    "session id (state bounded per run, load spread); 'session' = session key, else session "
                    "id (OpenClaw's exact session-level semantics: history cap and warning dedupe shared by "
                    "a session's runs). A record's Kafka key, when present, is used as is. Keyless records are "
                    "forwarded through the rekey topic: a run's order is kept only if all its keyless records "
                    "share one input partition (key your records: runners publish with key = the state key).",
    )
    config: Path | None = Field(
        None, description="OpenClaw config file (openclaw.json, JSON5) with tools.loopDetection; "
                          "unset = OpenClaw's defaults.",
    )
    config_validate: bool = Field(VALIDATE_BY_DEFAULT, description=VALIDATE_DESCRIPTION)  # replay and report too

    # ------------------------------------------------------------------ state
    store: str = Field(
        "memory://",
        description="Faust table store: memory:// (in memory, rebuilt from the whole changelog at every start) "
                    "or rocksdb:// (needs the rocksdb extra, which installs rocksdict: one RocksDB database per "
                    "changelog partition under data_dir, kept across restarts, so a start reads only the "
                    "changelog records written after the database's last one).",
    )
    state_ttl_s: float = Field(
        DEFAULT_STATE_TTL_S, gt=0,
        description="Seconds a key may stay idle before its state is deleted (tombstone in the changelog); "
                    "OpenClaw prunes idle session state after 30 min.",
    )
    expiry_interval_s: float = Field(
        60.0, gt=0, description="Seconds between scans for idle keys.",
    )
    data_dir: str = Field(
        "{app_id}-data",
        description="Directory of Faust's local files (the rocksdb:// databases; two workers on one machine need "
                    "one each); {app_id} is replaced.",
    )
    standby_replicas: int = Field(
        1, ge=0, description="Faust table standby replicas (warm copies of state on other workers).",
    )

    # -------------------------------------------------------------- outputs
    output_codec: Literal["msgpack", "json"] = Field(
        "msgpack", description="Encoding of verdict and loop-event values (dead letters are always msgpack).",
    )
    metrics_port: int = Field(
        9464, ge=0, le=65535, description="TCP port of the Prometheus /metrics endpoint (0 = off).",
    )
    metrics_addr: str = Field(
        "127.0.0.1",
        description=(
            "Address the /metrics endpoint binds to: loopback unless told otherwise "
            "(0.0.0.0 for every interface, as a container needs for Prometheus to reach it)."
        ),
    )

    # ------------------------------------------------------ latency tuning
    producer_linger_ms: float = Field(
        0.0, ge=0, description="Milliseconds the producer waits to batch records (0 = send at once).",
    )
    producer_max_batch_size: int = Field(
        1_048_576, ge=16_384,
        description="Largest batch of records, bytes, the producer sends to one partition in one request "
                    "(Kafka's batch.size; Faust's default 16 KiB holds only ~5 verdicts, which caps throughput "
                    "at a few thousand per second on a local broker).",
    )
    producer_acks: Literal[-1, 1] = Field(
        -1, description="Producer acks: -1 = all in-sync replicas (needed for the crash guarantees), 1 = leader.",
    )
    max_poll_records: int = Field(
        2000, ge=1,
        description="Most records one fetch hands to the worker; they are handled as one batch (their verdicts "
                    "go out in one produce request per partition).",
    )
    checkpoint_interval_s: float = Field(
        0.5, gt=0,
        description="Seconds between looks for partitions due a state checkpoint (see "
                    "checkpoint_partition_events and checkpoint_partition_interval_s): wait for the verdicts "
                    "published so far, write the partitions' changed states to the changelog, then let their input "
                    "offsets be committed. Off the verdict path.",
    )
    checkpoint_partition_events: int = Field(
        1000, ge=1,
        description="Events of one partition handled since its last checkpoint that make it due at the next look "
                    "(one Kafka transaction per partition and checkpoint: a partition with fewer waits up to "
                    "checkpoint_partition_interval_s, so a quiet partition costs little).",
    )
    checkpoint_partition_interval_s: float = Field(
        5.0, gt=0,
        description="Longest a partition's handled events wait for their checkpoint. After a crash up to this "
                    "much of a partition's input (or checkpoint_partition_events events) is re-applied (its "
                    "verdicts may be sent again, byte-identical).",
    )
    checkpoint_max_events: int = Field(
        10000, ge=1,
        description="Events handled since the last checkpoint that start one of every partition at once "
                    "(bounds the memory and the re-applied input after a crash under load).",
    )
    fetch_max_wait_ms: float = Field(
        25.0, ge=1,
        description="Longest time, ms, the broker holds an input fetch while no new record arrives (it returns "
                    "as soon as one does). Lower = more idle fetch requests; higher = a partition just resumed or "
                    "sought (after a rebalance) may wait this long for its first fetch.",
    )
    session_timeout_s: float = Field(
        6.0, ge=6,
        description="Consumer group session timeout, seconds (the broker's group.min.session.timeout.ms, 6 s by "
                    "default, is the floor). A worker that dies (kill -9, a lost machine) is noticed this long after "
                    "its last heartbeat: its partitions get no verdict for this long plus ~1 s of rebalance and "
                    "recovery. Shorter = faster failover; a worker paused or cut off for longer (GC, a stalled VM, "
                    "a network blip) is removed from the group and its partitions move (safe: it is fenced, see "
                    "streams.worker.checkpoint), at the cost of a rebalance.",
    )
    heartbeat_interval_s: float = Field(
        0.25, gt=0,
        description="Consumer group heartbeat interval, seconds (well under the session timeout: a few missed "
                    "heartbeats must not end a session). A worker learns of a rebalance (a dead worker's session "
                    "expiring) at its next heartbeat, so this is added to a failover and to the pause of a "
                    "rebalance at most; a shorter one costs a small request per interval.",
    )
    rebalance_timeout_s: float = Field(10.0, gt=0, description="Consumer group rebalance timeout, seconds.")
    transaction_timeout_s: float = Field(
        30.0, ge=1,
        description="Longest time, seconds, a checkpoint's Kafka transaction may stay open before the broker's "
                    "transaction coordinator aborts it and fences its writer (transaction.timeout.ms; at most the "
                    "broker's transaction.max.timeout.ms). A transaction lasts a few round trips; one outlives this "
                    "only if the worker or the broker stalls (then the worker drops the partitions and rejoins the "
                    "group: nothing is lost). A worker killed with a transaction open holds back read_committed "
                    "readers of its changelog partition and the stable committed offsets until a new owner's writer "
                    "ends it, or this long.",
    )

    # ------------------------------------------------------- broker outages
    kafka_retry_backoff_ms: int = Field(
        DEFAULT_RETRY_BACKOFF_MS, ge=0,
        description="Milliseconds every Kafka client of the worker (Faust's consumer and producer included) waits "
                    "before retrying a failed request (aiokafka's retry_backoff_ms), and after a first failed "
                    "metadata refresh.",
    )
    kafka_reconnect_backoff_max_ms: int = Field(
        DEFAULT_RECONNECT_BACKOFF_MAX_MS, ge=0,
        description="Longest wait, ms, between metadata refreshes that keep failing (the broker is down): the wait "
                    "doubles from kafka_retry_backoff_ms up to this, so an outage costs little CPU, and the worker "
                    "finds the broker again at most this long after it is back.",
    )
    broker_outage_limit_s: float = Field(
        300.0, ge=0,
        description="Longest time, seconds, the worker rides out a Kafka broker that does not answer (down, hung, "
                    "unreachable): a checkpoint or a send that times out makes it stop reading, go back to its last "
                    "checkpoint and retry with backoff, then go on from there once Kafka answers (nothing lost, no "
                    "event applied twice). It exits (status 1) only if Kafka has not answered for this long "
                    "(0 = at the first such failure, as before).",
    )
    shutdown_timeout_s: float = Field(
        10.0, ge=6,
        description="Longest time, seconds, from SIGINT or SIGTERM to the end of the worker process, whatever "
                    "Kafka is doing: a last checkpoint if the broker acknowledges it within this time less 5 s "
                    "(else one warning says there was none), then the exit. A second signal exits at once.",
    )

    gc_full_interval_s: float = Field(
        3600.0, ge=0,
        description="Python's cyclic garbage collector skips the objects alive at each checkpoint (gc.freeze): "
                    "a full collection over a fleet's states pauses the worker, which would show in the verdict "
                    "latency. Every this many seconds they are collected once in full, a pause that grows with "
                    "the live states (3.1-3.4 s over about 700,000 objects after 600,000 events of the failover "
                    "benchmark, on the loaded 2-core machine; logged when 0.5 s or more) and found a few hundred "
                    "unreachable objects in 10 minutes (0 = never freeze: Python's default collections).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Worker log level.")

    @field_validator("input_topics", mode="before")
    @classmethod
    def _split_topics(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                import json

                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        if isinstance(value, (list, tuple)):
            return [part for item in value for part in cls._split_topics(item)] if any(
                isinstance(item, str) and "," in item for item in value) else list(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _bootstrap_fallback(cls, data: Any) -> Any:
        # the broker every command takes without a flag (streams.wire.brokers): LOOPWATCH_BOOTSTRAP, else
        # 127.0.0.1:$KAFKA_PORT, else 127.0.0.1:9092; an empty variable is unset
        if isinstance(data, dict) and not data.get("broker"):
            data = {**data, "broker": default_bootstrap()}
        return data

    @field_validator("broker")
    @classmethod
    def _broker_url(cls, value: str) -> str:
        # host:port (as produce/tail/the client take it) is accepted and made a Faust URL
        for url in value.replace(";", ",").split(","):
            if "://" in url and not url.strip().startswith("kafka://"):
                raise ValueError(f"{url.strip()!r}: a broker URL is kafka://host:port (or just host:port)")
        return ";".join(f"kafka://{host}" for host in bootstrap_servers(value).split(","))

    @field_validator("store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        if not value.startswith(("memory://", "rocksdb://")):
            raise ValueError("the store is memory:// or rocksdb://")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_level(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("producer_acks", mode="before")
    @classmethod
    def _acks_from_text(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        return value

    @model_validator(mode="after")
    def _backoff_order(self) -> "WorkerSettings":
        if self.kafka_reconnect_backoff_max_ms < self.kafka_retry_backoff_ms:
            raise ValueError(f"kafka_reconnect_backoff_max_ms ({self.kafka_reconnect_backoff_max_ms}) must be at "
                             f"least kafka_retry_backoff_ms ({self.kafka_retry_backoff_ms})")
        return self

    @field_validator("input_topics")
    @classmethod
    def _some_topic(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one input topic is needed")
        return value

    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable of a field, e.g. ``LOOPWATCH_KEY_BY``."""
        return ENV_PREFIX + field.upper()
