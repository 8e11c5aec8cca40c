"""``OffsetFetch`` v7 with ``require_stable`` (KIP-447): the request aiokafka 0.14 cannot send.

aiokafka's admin client and consumer send ``OffsetFetch`` up to v3, which has
no ``require_stable`` flag: the group coordinator answers the last offset
committed, even while a transaction that holds a newer offset commit for the
partition (``TxnOffsetCommit``) is still open or its commit marker is not yet
applied. v7 (Kafka 2.5+; flexible encoding since v6) adds the flag: with it
the coordinator answers such a partition with error ``UNSTABLE_OFFSET_COMMIT``
(88) instead, and the client asks again later. v8 and later ask for several
groups at once; v7 is the last single-group version and every broker since
2.5 answers it (deploy/kafka runs 3.9).

Wire shapes (Kafka's ``OffsetFetchRequest.json`` / ``OffsetFetchResponse.json``,
version 7, every struct closed by its tagged fields)::

    request:  group_id: compact string
              topics: compact nullable array of {name: compact string, partition_indexes: compact array of int32}
              require_stable: bool
    response: throttle_time_ms: int32
              topics: compact array of {name, partitions: compact array of {partition_index: int32,
                  committed_offset: int64 (-1: none), committed_leader_epoch: int32,
                  metadata: compact nullable string, error_code: int16}}
              error_code: int16 (group level)

The classes plug into aiokafka's own protocol machinery (``Request``,
``RequestStruct``, flexible request header v2), so any aiokafka client sends
it: ``await client.send(coordinator_id, StableOffsetFetch(group, topics))``.
A broker that does not answer v7 makes aiokafka raise ``NotImplementedError``
when the request is prepared.
"""

from __future__ import annotations

from typing import Iterable

from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

__all__ = ["StableOffsetFetch", "UNSTABLE_OFFSET_COMMIT"]

UNSTABLE_OFFSET_COMMIT = 88  # Kafka's error code; aiokafka's errors module does not know it


class OffsetFetchResponse_v7(Response):
    API_KEY = 9
    API_VERSION = 7
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("topics", CompactArray(
            ("name", CompactString("utf-8")),
            ("partitions", CompactArray(
                ("partition_index", Int32),
                ("committed_offset", Int64),
                ("committed_leader_epoch", Int32),
                ("metadata", CompactString("utf-8")),
                ("error_code", Int16),
                ("tags", TaggedFields),
            )),
            ("tags", TaggedFields),
        )),
        ("error_code", Int16),
        ("tags", TaggedFields),
    )


class OffsetFetchRequest_v7(RequestStruct):
    FLEXIBLE_VERSION = True
    API_KEY = 9
    API_VERSION = 7
    RESPONSE_TYPE = OffsetFetchResponse_v7
    SCHEMA = Schema(
        ("group_id", CompactString("utf-8")),
        ("topics", CompactArray(
            ("name", CompactString("utf-8")),
            ("partition_indexes", CompactArray(Int32)),
            ("tags", TaggedFields),
        )),
        ("require_stable", Boolean),
        ("tags", TaggedFields),
    )


class StableOffsetFetch(Request[OffsetFetchRequest_v7]):
    """``OffsetFetch`` of ``group_id``'s committed offsets of ``topics`` (``{topic: [partition, ...]}``), with
    ``require_stable`` set (a partition with a transactional offset commit pending answers error 88)."""

    API_KEY = 9

    def __init__(self, group_id: str, topics: dict[str, Iterable[int]], require_stable: bool = True) -> None:
        self._group_id = group_id
        self._topics = [(topic, sorted(partitions), {}) for topic, partitions in sorted(topics.items())]
        self._require_stable = require_stable

    def build(self, request_struct_class: type[OffsetFetchRequest_v7]) -> OffsetFetchRequest_v7:
        return request_struct_class(self._group_id, self._topics, self._require_stable, {})
