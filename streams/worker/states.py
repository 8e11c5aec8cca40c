"""The worker's session states in memory: decoded once, ahead of the table by the keys changed since a checkpoint.

Key = state key (bytes, the record key), value = :class:`~streams.detection.SessionState`.
A state is decoded from the table (:class:`streams.worker.table.StateTable`, value
``SessionState.to_bytes()``: :func:`encode_state`) on its key's first event after a
start or rebalance, then kept here; the table gets it back, encoded, at checkpoints
(:mod:`streams.worker.checkpoint`). Everything here is dropped at a rebalance: the table
is the truth again. The dropped states are freed a slice at a time in the background
(:meth:`States.clear`): freed at once, the states of a long-running worker held its
event loop for seconds at each rebalance.

Copy on write for the checkpoint in flight: a checkpoint takes the keys changed so
far (:meth:`States.snapshot`) and encodes their states a few at a time between
events (:meth:`States.encode_snapshot`); an event about to change one of them first
has it encoded as it is (:meth:`States.get`), so every state of a snapshot is
encoded as it was when the snapshot was taken.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from streams.detection import Engine, SessionState

__all__ = ["States", "UnreadableState", "decode_state", "encode_state"]

# A checkpoint encodes states for this long, then pauses (events that arrived meanwhile are
# handled): an event never waits more than a slice behind a checkpoint.
ENCODE_SLICE_S = 0.0005
ENCODE_PAUSE_S = 0.0005
_RELEASING: set[asyncio.Task] = set()  # the tasks freeing dropped states (held: asyncio keeps weak references)


def _release_later(states: dict) -> None:
    """Free ``states`` (emptied) a slice at a time from a task of the running loop; at once without one."""
    if not states:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        states.clear()
        return
    task = loop.create_task(_release(states))
    _RELEASING.add(task)
    task.add_done_callback(_RELEASING.discard)


async def _release(states: dict) -> None:
    clock = time.perf_counter
    while states:
        until = clock() + ENCODE_SLICE_S
        while states and clock() < until:
            for _ in range(min(64, len(states))):
                states.popitem()  # the state (and what only it holds) is freed here
        await asyncio.sleep(ENCODE_PAUSE_S)


def encode_state(state: SessionState, engine: Engine) -> bytes:
    """The state table value of ``state``: ``SessionState.to_bytes`` (full result hashes only where printable)."""
    return state.to_bytes(engine.config.smallest_warning_threshold)


def decode_state(data: bytes) -> SessionState:
    """Inverse of :func:`encode_state`.

    Raises:
        ValueError: ``data`` is not a state ("not a loopwatch session state: <why>"), whatever it holds.
    """
    try:
        return SessionState.from_bytes(data)
    except ValueError as exc:
        if str(exc).startswith("not a loopwatch session state"):
            raise
        raise ValueError(f"not a loopwatch session state: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # a value of the wrong shape fails anywhere in from_bytes
        raise ValueError(f"not a loopwatch session state: {type(exc).__name__}: {exc}") from None


class UnreadableState(ValueError):
    """The table holds a value for the key that is not a state (written by something else).

    Attributes:
        stored: the value's bytes; reason: why it is not a state.
    """

    def __init__(self, stored: bytes, reason: str) -> None:
        super().__init__(reason)
        self.stored = stored


class States:
    """Decoded states of the keys this worker handles.

    Arguments:
        table: where a state missing here is read from: ``table.get(key) -> bytes | None``.
        encode: ``encode(state) -> bytes``, the table value of a state (:func:`encode_state`).
    Attributes:
        cache: key -> decoded state; last_seen: key -> ``time.monotonic()`` of its last event (idle expiry).
    """

    __slots__ = ("cache", "last_seen", "_table", "_encode", "_unencoded", "_encoded")

    def __init__(self, table: Any, encode: Callable[[SessionState], bytes]) -> None:
        self.cache: dict[bytes, SessionState] = {}
        self.last_seen: dict[bytes, float] = {}
        self._table = table
        self._encode = encode
        self._unencoded: dict[bytes, int] = {}  # keys of the snapshot in flight not encoded yet -> partition
        self._encoded: list[tuple[bytes, bytes, int]] = []  # (key, state bytes, partition) of that snapshot

    def get(self, key: bytes) -> SessionState | None:
        """The cached state of ``key``, about to be changed (encoded first if the snapshot in flight holds it
        unencoded); None if not cached (:meth:`load` it)."""
        state = self.cache.get(key)
        if state is not None and key in self._unencoded:
            self._encoded.append((key, self._encode(state), self._unencoded.pop(key)))
        return state

    def load(self, key: bytes) -> SessionState:
        """The state of ``key`` from the table (an empty one if it has none), now cached.

        Raises:
            UnreadableState: the table's value is not a state; nothing is cached (:meth:`fresh` starts the key
                afresh).
        """
        stored = self._table.get(key)
        if stored:
            try:
                state = decode_state(stored)
            except ValueError as exc:
                raise UnreadableState(stored, str(exc)) from None
        else:
            state = SessionState()
        self.cache[key] = state
        return state

    def fresh(self, key: bytes) -> SessionState:
        """An empty state for ``key``, cached."""
        state = self.cache[key] = SessionState()
        return state

    def discard(self, key: bytes) -> None:
        """Forget ``key`` here (a key nothing was applied to, or an expired one)."""
        self.cache.pop(key, None)
        self.last_seen.pop(key, None)

    def clear(self) -> None:
        """Forget every state and the snapshot in flight (a rebalance or a stop: the table is the truth).

        The states are freed a slice at a time in the background (:func:`_release`), as a checkpoint
        encodes them: freed at once, after 1,000,000 events of the failover benchmark (about 700,000
        objects), they held the event loop for 3.6 s at a failover's revocation on the loaded 2-core
        machine, and the survivor rejoined the group that much later.
        """
        dropped, self.cache = self.cache, {}
        _release_later(dropped)
        self.last_seen.clear()
        self._unencoded.clear()  # a checkpoint encoding it stops
        self._encoded = []

    # ------------------------------------------------------------ checkpoints

    def snapshot(self, changed: dict[bytes, int]) -> None:
        """Take ``changed`` (key -> changelog partition) as the snapshot to encode, as the states are now."""
        self._unencoded, self._encoded = changed, []

    async def encode_snapshot(self) -> list[tuple[bytes, bytes, int]]:
        """The snapshot's ``(key, state bytes, partition)``; the states not encoded yet are encoded a slice at a
        time (events are handled in between)."""
        unencoded, encoded, cache, encode = self._unencoded, self._encoded, self.cache, self._encode
        clock = time.perf_counter
        while unencoded:
            until = clock() + ENCODE_SLICE_S
            while unencoded and clock() < until:
                key, partition = unencoded.popitem()
                encoded.append((key, encode(cache[key]), partition))
            # A real pause, not sleep(0): the loop then blocks in select, handles what arrived, and
            # Faust's consumer thread (heartbeats, changelogs) gets the GIL without a switch-interval wait.
            await asyncio.sleep(ENCODE_PAUSE_S)
        self._encoded = []
        return encoded
