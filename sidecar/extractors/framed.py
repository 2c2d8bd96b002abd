"""``<format>:<dotted.path>[:unit]`` for a registry format (``avro:``, ``protobuf:``): event time
from values framed for a Schema Registry.

:class:`SchemaTimestamp` is a core timestamp extractor (``extract_all`` / ``explain``) that never
does I/O: it reads each value's schema id (Confluent's framing, :mod:`timesync_wire.framing`)
and looks the id up in its :class:`~sidecar.extractors.schema_cache.SchemaCache`. The service
fills that cache *before* it pushes a batch to the core — it asks
:meth:`~sidecar.extractors.schema_cache.SchemaCache.missing` which ids of the batch are not known
yet and resolves them through the registry (the format compiles each schema and gives its time
reader, :class:`timesync_wire.formats.base.ValueFormat`) — so by the time the core extracts,
every id of the batch is either a reader or a known failure.

A value is an invalid timestamp (the ``timestamp.invalid`` / ``errors.tolerance`` path) when its
framing is wrong, when its schema id is unknown to the registry (404) or its schema has no time
at the path, or when its body does not decode; the reason names the schema id and the field. An
id the cache has never heard of (the service did not resolve it) is a programming error, not an
invalid record: it raises, so it can never be dead-lettered by mistake.

**Batches.** Where a reader reads a batch at once (``millis_all(values, prefix)``, the Protobuf
plan in C), the values framed with one prefix (schema id and message indexes) go to it together;
the rest, one prefix at a time, at most :data:`MAX_BATCH_PASSES` passes, then one by one.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.core.records import InputRecord
from sidecar.extractors.schema_cache import (
    SchemaCache,
    Unreadable,
    UnreadableSchemaError,
    UnresolvedSchemaError,
)
from timesync_wire.formats.base import BatchRead, ValueFormat
from timesync_wire.framing import HEADER_SIZE, MAGIC, FramingError, message_indexes, schema_id
from timesync_wire.timevalues import Unit

INVALID = -1
#: A batch reader's verdict for a value not framed with its prefix.
OTHER = -2
#: Distinct framings read as batches per ``extract_all``; more (a batch of many ids) go one by one.
MAX_BATCH_PASSES = 8


class SchemaTimestamp:
    """Event time read from values of a registry format (Avro, Protobuf)."""

    uses_record_time = False

    def __init__(self, fmt: ValueFormat, path: Sequence[str], unit: Unit = "ms") -> None:
        if fmt.schema_type is None:
            raise ValueError(f"the {fmt.name} format has no registry schemas")
        if not path or any(not part for part in path):
            raise ValueError(f"empty field name in path {'.'.join(path)!r}")
        self.format = fmt
        self.path = tuple(path)
        self.unit: Unit = unit
        self.field = ".".join(path)
        self.schemas = SchemaCache(fmt.message_indexes)

    def __repr__(self) -> str:
        return f"{self.format.name}:{self.field}:{self.unit}"

    def extract_all(self, records: Sequence[InputRecord]) -> list[int]:
        if not self.format.message_indexes:
            return self._extract_all_by_id(records)
        values = [r.value for r in records]
        out = [INVALID] * len(values)
        pending, k, passes = list(range(len(values))), 0, 0
        while k < len(pending):
            head = pending[k]
            batch = self._batch_reader(values[head]) if passes < MAX_BATCH_PASSES else None
            if batch is None:  # a value no batch reader takes: read alone
                out[head] = self._one(values[head])
                k += 1
                continue
            passes += 1
            read, prefix = batch
            todo, rest = pending[k:], []
            for i, ms in zip(todo, read([values[i] for i in todo], prefix), strict=True):
                if ms == OTHER:
                    rest.append(i)
                else:
                    out[i] = ms
            if rest and rest[0] == head:  # its own prefix did not take it: read it alone
                out[rest.pop(0)] = self._one(values[head])
            pending, k = rest, 0
        return out

    def _batch_reader(self, value: bytes | None) -> tuple[BatchRead, bytes] | None:
        """The batch reader of ``value``'s schema and message, and its framing prefix; ``None``
        when its reader reads one value at a time (or it is not framed, or its id unreadable)."""
        if value is None or len(value) < HEADER_SIZE or value[0] != MAGIC:
            return None
        sid = int.from_bytes(value[1:HEADER_SIZE], "big")
        try:
            reader, start = self.schemas.reader(sid, value)
        except FramingError:
            return None
        read: BatchRead | None = getattr(reader, "millis_all", None)
        return None if read is None else (read, value[:start])

    def _one(self, value: bytes | None) -> int:
        try:
            return self._extract(value)
        except UnresolvedSchemaError:
            raise
        except Exception:
            return INVALID

    def _extract_all_by_id(self, records: Sequence[InputRecord]) -> list[int]:
        """:meth:`extract_all` without message indexes (Avro), the hot path kept lean (the same
        rules as :meth:`_extract`: framing, cached reader, its time)."""
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
            return f"{self.format.name} framing: {e}; field {self.field} not read"
        try:
            self._extract(value)
        except UnresolvedSchemaError:
            raise
        except Exception as e:
            detail = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            return f"schema id {sid}, field {self.field}: {detail}"
        return "valid"

    def _extract(self, value: bytes | None) -> int:
        sid = schema_id(value)
        assert value is not None
        reader, start = self.schemas.reader(sid, value)
        if isinstance(reader, Unreadable):
            raise UnreadableSchemaError(reader.reason)
        return reader.millis(value, start)


__all__ = ["INVALID", "SchemaTimestamp", "Unreadable", "UnresolvedSchemaError", "message_indexes"]
