"""The core's cache of what reads each schema id: filled by the service, read by the extractor.

Bounded (see :class:`SchemaCache`); pure (no clock of its own: the service passes its time to
:meth:`SchemaCache.trim`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from timesync_wire.formats.base import TimeReader
from timesync_wire.framing import HEADER_SIZE, MAGIC, FramingError, message_indexes


class UnreadableSchemaError(ValueError):
    """The value's schema id gives no event time; the message is the :class:`Unreadable`'s reason."""


class UnresolvedSchemaError(LookupError):
    """The core met a schema id the service did not resolve first: a bug, never a bad record."""


class Unreadable:
    """A schema id that gives no event time, and why (unknown to the registry, no such field)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def millis(self, value: bytes, start: int = 0) -> int:
        raise UnreadableSchemaError(self.reason)


#: Entries kept per table (ids; Protobuf message paths) before the least recently used go.
CACHE_CAPACITY = 10_000


class SchemaCache:
    """Schema id → what reads its values. Filled by the service, read by the core.

    For Protobuf a value's message indexes choose the message inside the schema's file, so an
    entry is kept per (id, indexes); :meth:`missing` reports ids, and the service builds every
    message of the file the batch needs (:meth:`put`).

    **Bounded.** Each table (ids; Protobuf message paths) keeps at most ``capacity`` entries,
    the least recently used going first, and an entry may carry an expiry (a known failure — a
    404, a schema that does not compile — is believed for a while, then asked again). The core
    never reads a clock: the service calls :meth:`trim` with its own, and only *between*
    batches — never between the resolve of a batch and its push, where an eviction would leave
    the core an id it was promised. So the tables may exceed ``capacity`` by what one batch adds
    (the service's per-fetch budget of new ids bounds it) until the next :meth:`trim`.
    """

    def __init__(self, indexes: bool, capacity: int = CACHE_CAPACITY) -> None:
        """``indexes``: the format's framing names a message of the schema's file (Protobuf)."""
        self.indexes = indexes
        self.capacity = capacity
        # Plain dicts, in least-recently-used-first order: the Avro hot path reads _by_id directly.
        self._by_id: dict[int, TimeReader | Unreadable] = {}
        self._by_message: dict[tuple[int, tuple[int, ...]], TimeReader | Unreadable] = {}
        #: (table, key) → when the entry expires, and a heap of (when, order, table, key) to find
        #: the due ones without a scan (stale rows are skipped, and the heap rebuilt if they pile up).
        self._expires: dict[tuple[int, Any], float] = {}
        self._due: list[tuple[float, int, int, Any]] = []
        self._order = 0

    def __len__(self) -> int:
        return len(self._by_id) + len(self._by_message)

    def missing(self, values: Iterable[bytes | None]) -> dict[int, set[tuple[int, ...]]]:
        """Schema ids of framed values not cached yet, in the order the values first name them,
        each with the message indexes wanted (always ``{()}`` for Avro); the cached ones the
        values name become the most recently used. Values that are not framed are left to the
        extractor."""
        if not self.indexes:
            return self._missing_ids(values)
        wanted: dict[int, set[tuple[int, ...]]] = {}
        by_id, by_message = self._by_id, self._by_message
        used_ids: set[int] = set()
        used: set[tuple[int, tuple[int, ...]]] = set()
        for value in values:
            if value is None or len(value) < HEADER_SIZE or value[0] != MAGIC:
                continue
            sid = int.from_bytes(value[1:HEADER_SIZE], "big")
            if sid in by_id:  # the whole id is unreadable (404, no compile)
                used_ids.add(sid)
                continue
            try:
                indexes, _ = message_indexes(value)
            except FramingError:
                continue
            if (sid, indexes) in by_message:
                used.add((sid, indexes))
            else:
                wanted.setdefault(sid, set()).add(indexes)
        _touch(by_id, used_ids)
        _touch(by_message, used)
        return wanted

    def _missing_ids(self, values: Iterable[bytes | None]) -> dict[int, set[tuple[int, ...]]]:
        heads = dict.fromkeys(  # each distinct id once, in order: a batch holds few
            v[1:HEADER_SIZE] for v in values if v is not None and len(v) >= HEADER_SIZE and v[0] == MAGIC
        )
        by_id = self._by_id
        wanted: dict[int, set[tuple[int, ...]]] = {}
        for head in heads:
            sid = int.from_bytes(head, "big")
            entry = by_id.pop(sid, None)
            if entry is None:
                wanted[sid] = {()}
            else:
                by_id[sid] = entry  # the most recently used
        return wanted

    def put(
        self,
        sid: int,
        reader: TimeReader | Unreadable,
        indexes: tuple[int, ...] = (),
        expires: float | None = None,
    ) -> None:
        """Cache what reads schema ``sid`` (for Protobuf: its message at ``indexes``; an
        :class:`Unreadable` without indexes marks every message of the id), as the most recently
        used; ``expires`` (on the service's clock): the first :meth:`trim` at or after it drops
        the entry, ``None`` keeps it until it is the least recently used beyond ``capacity``."""
        table, key = (1, (sid, indexes)) if self.indexes and indexes else (0, sid)
        entries: dict[Any, TimeReader | Unreadable] = self._by_message if table else self._by_id
        entries.pop(key, None)
        entries[key] = reader
        if expires is None:
            self._expires.pop((table, key), None)
            return
        self._expires[(table, key)] = expires
        self._order += 1
        heapq.heappush(self._due, (expires, self._order, table, key))

    def trim(self, now: float) -> int:
        """Drop the entries expired at ``now`` and the least recently used beyond ``capacity``;
        how many went. Call between batches only (see the class)."""
        dropped = 0
        tables: tuple[dict[Any, TimeReader | Unreadable], ...] = (self._by_id, self._by_message)
        due, expires = self._due, self._expires
        while due and due[0][0] <= now:
            when, _, table, key = heapq.heappop(due)
            if expires.get((table, key)) == when:  # else stale: the entry was put again or evicted
                del expires[(table, key)]
                dropped += tables[table].pop(key, None) is not None
        for table, entries in enumerate(tables):
            while len(entries) > self.capacity:
                oldest = next(iter(entries))
                del entries[oldest]
                expires.pop((table, oldest), None)
                dropped += 1
        if len(due) > 2 * len(expires) + 64:  # stale rows piled up: keep the heap as large as the cache
            self._due = [row for row in due if expires.get((row[2], row[3])) == row[0]]
            heapq.heapify(self._due)
        return dropped

    def reader(self, sid: int, value: bytes) -> tuple[TimeReader | Unreadable, int]:
        """The reader of a framed value and where its body starts."""
        entry = self._by_id.get(sid)
        if not self.indexes or entry is not None:
            if entry is None:
                raise UnresolvedSchemaError(f"schema id {sid} was not resolved before the push")
            return entry, HEADER_SIZE
        indexes, start = message_indexes(value)
        found = self._by_message.get((sid, indexes))
        if found is None:
            raise UnresolvedSchemaError(
                f"schema id {sid} message {list(indexes)} was not resolved before the push"
            )
        return found, start


def _touch(entries: dict[Any, Any], keys: Iterable[Any]) -> None:
    """Make ``keys`` the most recently used of ``entries`` (a dict kept in use order)."""
    for key in keys:
        entries[key] = entries.pop(key)
