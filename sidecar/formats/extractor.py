"""``avro:<dotted.path>[:unit]`` and ``protobuf:<dotted.path>[:unit]``: event time from framed values.

:class:`SchemaTimestamp` is a core timestamp extractor (``extract_all`` / ``explain``) that never
does I/O: it reads each value's schema id (Confluent's framing, :mod:`sidecar.formats.framing`)
and looks the id up in its :class:`SchemaCache`. The service fills that cache *before* it pushes
a batch to the core — it asks :meth:`SchemaCache.missing` which ids of the batch are not known
yet and resolves them through the registry — so by the time the core extracts, every id of the
batch is either a reader or a known failure.

A value is an invalid timestamp (the ``timestamp.invalid`` / ``errors.tolerance`` path) when its
framing is wrong, when its schema id is unknown to the registry (404) or its schema has no time
at the path, or when its body does not decode; the reason names the schema id and the field. An
id the cache has never heard of (the service did not resolve it) is a programming error, not an
invalid record: it raises, so it can never be dead-lettered by mistake.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol

from sidecar.core.records import InputRecord
from sidecar.formats.avro_plan import PlanError
from sidecar.formats.framing import HEADER_SIZE, MAGIC, FramingError, message_indexes, schema_id
from sidecar.formats.timevalues import UNITS, TimeValueError, Unit

Format = Literal["avro", "protobuf"]
INVALID = -1


class TimeReader(Protocol):
    """What a schema id resolves to: reads event time in ms from a body."""

    def millis(self, value: bytes, start: int = 0) -> int:
        """Event time of the body at ``value[start:]`` (no slice copied where avoidable)."""
        ...


class UnresolvedSchemaError(LookupError):
    """The core met a schema id the service did not resolve first: a bug, never a bad record."""


class Unreadable:
    """A schema id that gives no event time, and why (unknown to the registry, no such field)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def millis(self, value: bytes, start: int = 0) -> int:
        raise _UnreadableError(self.reason)


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

    def __init__(self, fmt: Format, capacity: int = CACHE_CAPACITY) -> None:
        self.format: Format = fmt
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
        if self.format == "avro":
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
        table, key = (1, (sid, indexes)) if self.format == "protobuf" and indexes else (0, sid)
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
        if self.format == "avro" or entry is not None:
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


class SchemaTimestamp:
    """Event time read from Avro or Protobuf values framed for a Schema Registry."""

    uses_record_time = False

    def __init__(self, fmt: Format, path: Sequence[str], unit: Unit = "ms") -> None:
        if not path or any(not part for part in path):
            raise ValueError(f"empty field name in path {'.'.join(path)!r}")
        self.format: Format = fmt
        self.path = tuple(path)
        self.unit: Unit = unit
        self.field = ".".join(path)
        self.schemas = SchemaCache(fmt)

    def __repr__(self) -> str:
        return f"{self.format}:{self.field}:{self.unit}"

    def extract_all(self, records: Sequence[InputRecord]) -> list[int]:
        if self.format == "avro":
            return self._extract_all_avro(records)
        out = []
        for r in records:
            try:
                out.append(self._extract(r.value))
            except UnresolvedSchemaError:
                raise
            except Exception:
                out.append(INVALID)
        return out

    def _extract_all_avro(self, records: Sequence[InputRecord]) -> list[int]:
        """:meth:`extract_all` for Avro, the hot path kept lean (the same rules as
        :meth:`_extract`: framing, cached reader, its time)."""
        by_id = self.schemas._by_id
        from_bytes = int.from_bytes
        out: list[int] = []
        append = out.append
        for r in records:
            value = r.value
            if value is None or len(value) < HEADER_SIZE or value[0] != MAGIC:
                append(INVALID)
                continue
            reader = by_id.get(from_bytes(value[1:HEADER_SIZE], "big"))
            if reader is None:
                raise UnresolvedSchemaError(f"schema id {schema_id(value)} was not resolved before the push")
            try:
                append(reader.millis(value, HEADER_SIZE))
            except Exception:
                append(INVALID)
        return out

    def explain(self, record: InputRecord) -> str:
        value = record.value
        try:
            sid = schema_id(value)
        except FramingError as e:
            return f"{self.format} framing: {e}; field {self.field} not read"
        try:
            self._extract(value)
        except UnresolvedSchemaError:
            raise
        except Exception as e:
            detail = (
                str(e)
                if isinstance(e, TimeValueError | FramingError | PlanError | _UnreadableError)
                else f"{type(e).__name__}: {e}"
            )
            return f"schema id {sid}, field {self.field}: {detail}"
        return "valid"

    def _extract(self, value: bytes | None) -> int:
        sid = schema_id(value)
        assert value is not None
        reader, start = self.schemas.reader(sid, value)
        if isinstance(reader, Unreadable):
            raise _UnreadableError(reader.reason)
        return reader.millis(value, start)


class _UnreadableError(ValueError):
    pass


def parse_schema_extractor(spec: str) -> SchemaTimestamp:
    """``avro:<dotted.path>[:ms|s|us|iso]`` or ``protobuf:…``; ``ValueError`` saying why not."""
    kind, _, rest = spec.partition(":")
    if kind not in ("avro", "protobuf") or not rest:
        raise ValueError(
            f"expected 'avro:<dotted.path>[:unit]' or 'protobuf:<dotted.path>[:unit]', got {spec!r}"
        )
    path, _, unit = rest.partition(":")
    unit = unit or "ms"
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r} in {spec!r}; allowed: {', '.join(UNITS)}")
    parts = path.split(".")
    if any(not p for p in parts):
        raise ValueError(f"empty field name in path {path!r} of {spec!r}")
    return SchemaTimestamp(kind, parts, unit)  # type: ignore[arg-type]  # both checked above
