"""An Avro reader that decodes only the field the timestamp extractor reads.

From the writer schema (the one the registry holds for a record's schema id) and the extractor's
dotted path, :func:`avro_time_reader` builds a *projected reader schema*: the chain of records
down to the path, each keeping only the one field on it. Avro's schema resolution then skips
every other field of the writer's record without building it (fastavro's compiled reader does
the skipping), so a record costs what its path costs, not what its whole value costs.

Logical types are read as what they are: ``timestamp-millis`` and ``timestamp-micros`` are times
in ms and µs whatever unit the extractor names; the reader schema asks for the plain ``long``
so that no ``datetime`` is built per record. ``local-timestamp-*`` carry no zone and are
refused, as a naive ISO time is.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Sequence
from typing import Any

import fastavro
import orjson

from sidecar.formats.timevalues import Kind, TimeValueError, Unit, to_millis

_PRIMITIVE_TIMES = {"int", "long", "float", "double", "string"}
_LOGICAL: dict[str, Kind] = {"timestamp-millis": "millis", "timestamp-micros": "micros"}
_NAMED = {"record", "enum", "fixed", "error"}


class SchemaError(ValueError):
    """The writer schema cannot give the extractor's field; the message says why (one line)."""


class AvroTimeReader:
    """Event time of Avro bodies written with one writer schema."""

    __slots__ = ("_path", "_reader", "_writer", "field", "kind", "unit")

    def __init__(self, writer: Any, reader: Any, path: Sequence[str], kind: Kind, unit: Unit) -> None:
        self._writer = writer
        self._reader = reader
        self._path = tuple(path)
        self.kind: Kind = kind
        self.unit: Unit = unit
        self.field = ".".join(path)

    def millis(self, body: memoryview | bytes) -> int:
        """Event time of one body; :class:`TimeValueError` (or fastavro's own errors on a body
        that does not decode) when it has none."""
        node: Any = fastavro.schemaless_reader(io.BytesIO(body), self._writer, self._reader)
        for part in self._path:
            if node is None:
                raise TimeValueError(f"field {self.field} is null (at {part})")
            node = node[part]
        if node is None:
            raise TimeValueError(f"field {self.field} is null")
        return to_millis(node, self.kind, self.unit, self.field)


def avro_time_reader(schema_text: str, path: Sequence[str], unit: Unit) -> AvroTimeReader:
    """The reader for ``path`` in the writer schema ``schema_text``; :class:`SchemaError` when
    the schema has no such field or its type is no time."""
    try:
        writer = orjson.loads(schema_text)
    except orjson.JSONDecodeError as e:
        raise SchemaError(f"schema is not JSON: {e}") from None
    named = _named_types(writer, None, {})
    writer = _without_logical_types(copy.deepcopy(writer))
    reader, kind = _project(orjson.loads(schema_text), path, [], named)
    try:
        writer_parsed = fastavro.parse_schema(writer)
        reader_parsed = fastavro.parse_schema(reader)
    except Exception as e:  # fastavro raises several types for a bad schema
        raise SchemaError(f"schema is not valid Avro: {e}") from None
    return AvroTimeReader(writer_parsed, reader_parsed, path, kind, unit)


def _fullname(node: dict[str, Any], namespace: str | None) -> tuple[str, str | None]:
    name = str(node["name"])
    if "." in name:
        return name, name.rpartition(".")[0]
    ns = node.get("namespace", namespace)
    return (f"{ns}.{name}" if ns else name), ns


def _named_types(node: Any, namespace: str | None, out: dict[str, Any]) -> dict[str, Any]:
    """Every named type of the schema by full name and by short name (references use either)."""
    if isinstance(node, list):
        for branch in node:
            _named_types(branch, namespace, out)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind in _NAMED and "name" in node:
            full, namespace = _fullname(node, namespace)
            out[full] = (node, namespace)
            out.setdefault(full.rpartition(".")[2], (node, namespace))
        if kind in {"record", "error"}:
            for f in node.get("fields", []):
                _named_types(f.get("type"), namespace, out)
        elif kind == "array":
            _named_types(node.get("items"), namespace, out)
        elif kind == "map":
            _named_types(node.get("values"), namespace, out)
        elif isinstance(kind, dict | list):
            _named_types(kind, namespace, out)
    return out


def _without_logical_types(node: Any) -> Any:
    """The same schema with plain types: skipping a field never converts it, and the time field
    is read as its ``long`` (the kind recorded beside it says what the number is)."""
    if isinstance(node, list):
        return [_without_logical_types(b) for b in node]
    if isinstance(node, dict):
        return {k: _without_logical_types(v) for k, v in node.items() if k != "logicalType"}
    return node


def _deref(node: Any, named: dict[str, Any]) -> Any:
    if isinstance(node, str) and node in named:
        return named[node][0]
    if isinstance(node, dict) and isinstance(node.get("type"), dict | list):
        return node["type"]  # {"type": {...}} wraps a type
    return node


def _project(node: Any, path: Sequence[str], walked: list[str], named: dict[str, Any]) -> tuple[Any, Kind]:
    """The reader schema for ``path`` inside ``node``, and the kind of the leaf."""
    node = _deref(node, named)
    here = ".".join(walked) or "the value"
    if isinstance(node, list):  # a union: only an optional ("null" or one type) is followed
        branches = [b for b in node if b != "null"]
        if len(branches) != 1:
            raise SchemaError(f"{here} is a union of {len(branches)} non-null types; cannot follow it")
        inner, kind = _project(branches[0], path, walked, named)
        return [inner if b != "null" else "null" for b in node], kind
    if not path:
        return _leaf(node, here)
    if not isinstance(node, dict) or node.get("type") not in {"record", "error"}:
        raise SchemaError(f"{here} is not a record, so it has no field {path[0]}")
    part = path[0]
    for f in node.get("fields", []):
        if f.get("name") == part:
            child, kind = _project(f["type"], path[1:], [*walked, part], named)
            record = {"type": "record", "name": node["name"], "fields": [{"name": part, "type": child}]}
            if "namespace" in node:
                record["namespace"] = node["namespace"]
            return record, kind
    raise SchemaError(f"record {node.get('name')} has no field {'.'.join([*walked, part])}")


def _leaf(node: Any, here: str) -> tuple[Any, Kind]:
    if isinstance(node, str):
        if node in _PRIMITIVE_TIMES:
            return node, "plain"
        raise SchemaError(f"field {here} is of type {node}, not a time")
    if isinstance(node, dict):
        base, logical = node.get("type"), node.get("logicalType")
        if logical in _LOGICAL and base == "long":
            return "long", _LOGICAL[logical]
        if isinstance(logical, str) and logical.startswith("local-timestamp"):
            raise SchemaError(f"field {here} is a {logical}, which has no time zone")
        if isinstance(base, str) and base in _PRIMITIVE_TIMES:
            return base, "plain"
    raise SchemaError(f"field {here} is of type {orjson.dumps(node).decode()[:60]}, not a time")
