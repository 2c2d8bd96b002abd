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

from collections.abc import Iterable, Sequence
from typing import Literal, Protocol

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


class SchemaCache:
    """Schema id → what reads its values. Filled by the service, read by the core.

    For Protobuf a value's message indexes choose the message inside the schema's file, so an
    entry is kept per (id, indexes); :meth:`missing` reports ids, and the service builds every
    message of the file the batch needs (:meth:`put`).
    """

    def __init__(self, fmt: Format) -> None:
        self.format: Format = fmt
        self._by_id: dict[int, TimeReader | Unreadable] = {}
        self._by_message: dict[tuple[int, tuple[int, ...]], TimeReader | Unreadable] = {}

    def __len__(self) -> int:
        return len(self._by_id) + len(self._by_message)

    def missing(self, values: Iterable[bytes | None]) -> dict[int, set[tuple[int, ...]]]:
        """Schema ids of framed values not cached yet, each with the message indexes wanted
        (always ``{()}`` for Avro). Values that are not framed are left to the extractor."""
        wanted: dict[int, set[tuple[int, ...]]] = {}
        by_id, by_message = self._by_id, self._by_message
        protobuf = self.format == "protobuf"
        for value in values:
            if value is None or len(value) < HEADER_SIZE or value[0] != MAGIC:
                continue
            sid = int.from_bytes(value[1:HEADER_SIZE], "big")
            if not protobuf:
                if sid not in by_id:
                    wanted.setdefault(sid, set()).add(())
                continue
            if sid in by_id:  # the whole id is unreadable (404, no compile)
                continue
            try:
                indexes, _ = message_indexes(value)
            except FramingError:
                continue
            if (sid, indexes) not in by_message:
                wanted.setdefault(sid, set()).add(indexes)
        return wanted

    def put(self, sid: int, reader: TimeReader | Unreadable, indexes: tuple[int, ...] = ()) -> None:
        """Cache what reads schema ``sid`` (for Protobuf: its message at ``indexes``; an
        :class:`Unreadable` without indexes marks every message of the id)."""
        if self.format == "protobuf" and indexes:
            self._by_message[(sid, indexes)] = reader
        else:
            self._by_id[sid] = reader

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
