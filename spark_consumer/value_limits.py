"""How much work one value of the ordered topic may cost the Spark jobs, and what enforces it.

Anyone who can write to an input topic writes the bodies the jobs decode. A value that breaks a
bound does not decode (its ``data`` is NULL and it is counted, :mod:`spark_consumer.values`);
it never fails the query, exhausts memory or hangs it. Measured on Spark 4.2's own Java Avro
1.12.1, in ``local[2]`` with the default 1 GiB driver heap (tests/spark/test_hostile_values.py):

- A block count of 2^62 items is refused by Java Avro itself (``UnsupportedOperationException``
  above ``Integer.MAX_VALUE - 8``, which ``from_avro``'s PERMISSIVE mode turns into NULLs).
- A 12-byte body claiming 2^31 - 9 nulls, 2^31 - 9 longs, a 2^31 - 9 entry map or a 2^31 - 9
  byte string is *within* that limit: Java Avro allocates the array (or the string's bytes)
  before reading a single item, the JVM throws ``OutOfMemoryError``, which no parse mode
  catches, and in local mode the driver JVM dies with it. So do 2^27 nulls.
- Java Avro reads bounds from system properties (``org.apache.avro.limits.*``), once, when its
  classes load: they must be JVM options of the driver and of every executor, set before those
  JVMs start (:func:`spark_consumer.session.session_conf` puts :meth:`ValueLimits.java_options`
  there). With them every case above is a NULL row in well under a second.
- A bound per collection does not bound a value whose arrays hold items that take no bytes
  (``null``, an empty record, a ``fixed`` of size 0) *inside* another array or map: each inner
  array costs its writer two bytes and may claim the whole bound, so a 1 KB body claimed 200 ×
  2^20 nulls and exhausted the heap with the bound in place. No JVM option reaches that, so such
  schemas are refused before the query starts (:func:`unbounded_arrays`).

The bounds, read from Spark settings (``--conf KEY=VALUE``):

``spark.timesync.values.maxBytes`` (default 16 MiB)
    A larger value is not decoded (checked on the binary before ``from_avro``, in the Protobuf
    UDF, before ``from_json``); Java Avro allocates no string or ``bytes`` larger than this.
    Kafka's default largest record is 1 MiB.
``spark.timesync.values.maxCollectionItems`` (default 2^20)
    Java Avro allocates no array or map larger than this; a Protobuf value holds at most this
    many repeated items and map entries in all.

Protobuf nests at most 100 messages deep (the ``protobuf`` runtime's own recursion limit), and
JSON as Jackson's defaults allow (1,000 levels, 20 M characters per string), both measured.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from spark_consumer.options import UsageError

MAX_BYTES_KEY = "spark.timesync.values.maxBytes"
MAX_ITEMS_KEY = "spark.timesync.values.maxCollectionItems"
DEFAULT_MAX_BYTES = 16 << 20
DEFAULT_MAX_ITEMS = 1 << 20
#: Java Avro's own ceiling (``SystemLimitException.MAX_ARRAY_VM_LIMIT``): no bound may exceed it.
JAVA_ARRAY_LIMIT = (1 << 31) - 9

AVRO_COLLECTION_ITEMS = "org.apache.avro.limits.collectionItems.maxLength"
AVRO_STRING_BYTES = "org.apache.avro.limits.string.maxLength"
AVRO_BYTES = "org.apache.avro.limits.bytes.maxLength"


@dataclass(frozen=True, slots=True)
class ValueLimits:
    """The bounds on one value (see the module docstring)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_items: int = DEFAULT_MAX_ITEMS

    @classmethod
    def from_conf(cls, conf: Mapping[str, str]) -> ValueLimits:
        """The bounds set in ``conf`` (Spark settings), the defaults for those it does not set;
        :class:`UsageError` naming the key and the value when one is not a whole number in
        1 … 2^31 - 9."""
        return cls(
            _bound(conf, MAX_BYTES_KEY, DEFAULT_MAX_BYTES),
            _bound(conf, MAX_ITEMS_KEY, DEFAULT_MAX_ITEMS),
        )

    def java_properties(self) -> dict[str, str]:
        """Java Avro's system properties for these bounds."""
        return {
            AVRO_COLLECTION_ITEMS: str(self.max_items),
            AVRO_STRING_BYTES: str(self.max_bytes),
            AVRO_BYTES: str(self.max_bytes),
        }

    def java_options(self) -> str:
        """:meth:`java_properties` as JVM options (``-Dkey=value …``)."""
        return " ".join(f"-D{key}={value}" for key, value in self.java_properties().items())


def _bound(conf: Mapping[str, str], key: str, default: int) -> int:
    text = conf.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= JAVA_ARRAY_LIMIT:
        raise UsageError(f"--conf {key}={text}: expected a whole number from 1 to {JAVA_ARRAY_LIMIT}")
    return value


# --- Avro schemas whose values no bound reaches --------------------------------------------------

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def unbounded_arrays(schema: str) -> str | None:
    """Where Avro schema ``schema`` (JSON text) has an array of items that take no bytes inside
    an array or a map (``outer[].inner``), or ``None`` when it has none.

    Such an item (``null``, a ``fixed`` of size 0, a record of such fields only) costs its
    writer nothing, so a block may claim up to the collection bound of them for the cost of its
    count; inside another collection every few bytes of body claim that many again (see the
    module docstring). Named types are resolved by full name; a recursive type is taken as
    possibly empty. The walk is iterative and visits each named type once per context.
    """
    root = json.loads(schema)
    named = dict(_named_types(root, ""))
    empty = _empty_types(named)
    seen: set[tuple[str, bool]] = set()
    stack: list[tuple[Any, str, bool, str]] = [(root, "", False, "")]
    while stack:
        node, space, repeated, path = stack.pop()
        if isinstance(node, list):
            stack.extend((branch, space, repeated, path) for branch in node)
            continue
        if isinstance(node, str):
            full = _full(node, space)
            if node in _PRIMITIVES or full not in named or (full, repeated) in seen:
                continue
            seen.add((full, repeated))
            node, space = named[full], _namespace(named[full], space)
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind == "array":
            if repeated and _takes_no_bytes(node.get("items"), space, named, empty):
                return f"{path}[]"
            stack.append((node.get("items"), space, True, f"{path}[]"))
        elif kind == "map":
            stack.append((node.get("values"), space, True, f"{path}{{}}"))
        elif kind in {"record", "error"}:
            inner = _namespace(node, space)
            for field in node.get("fields") or ():
                if isinstance(field, dict):
                    name = f"{path}.{field.get('name')}" if path else str(field.get("name"))
                    stack.append((field.get("type"), inner, repeated, name))
        elif kind not in ("enum", "fixed"):
            stack.append((kind, space, repeated, path))  # {"type": {...}}, {"type": "Name"}
    return None


def _namespace(node: Any, enclosing: str) -> str:
    if not isinstance(node, dict):
        return enclosing
    name = node.get("name")
    if isinstance(name, str) and "." in name:
        return name.rsplit(".", 1)[0]
    space = node.get("namespace")
    return space if isinstance(space, str) else enclosing


def _full(name: str, space: str) -> str:
    return name if "." in name or not space else f"{space}.{name}"


def _named_types(root: Any, space: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every named type (record, error, enum, fixed) by full name, iteratively."""
    stack: list[tuple[Any, str]] = [(root, space)]
    while stack:
        node, enclosing = stack.pop()
        if isinstance(node, list):
            stack.extend((branch, enclosing) for branch in node)
        elif isinstance(node, dict):
            kind, name = node.get("type"), node.get("name")
            inner = _namespace(node, enclosing)
            if kind in ("record", "error", "enum", "fixed") and isinstance(name, str):
                yield _full(name, inner), node
            for field in node.get("fields") or () if kind in ("record", "error") else ():
                if isinstance(field, dict):
                    stack.append((field.get("type"), inner))
            for key in ("items", "values"):
                if key in node:
                    stack.append((node[key], enclosing))
            if isinstance(kind, (dict, list)):
                stack.append((kind, enclosing))


def _empty_types(named: Mapping[str, dict[str, Any]]) -> set[str]:
    """The named types whose values may take no bytes: fixed of size 0, and records all of whose
    fields take none (a fixed point, starting from "every record may", so recursion counts as
    possibly empty)."""
    empty = {n for n, t in named.items() if t.get("type") in ("record", "error")}
    empty |= {n for n, t in named.items() if t.get("type") == "fixed" and t.get("size") == 0}
    changed = True
    while changed:
        changed = False
        for name in sorted(empty):
            node = named[name]
            if node.get("type") in ("record", "error"):
                space = _namespace(node, "")
                fields = [f for f in node.get("fields") or () if isinstance(f, dict)]
                if not all(_takes_no_bytes(f.get("type"), space, named, empty) for f in fields):
                    empty.discard(name)
                    changed = True
    return empty


def _takes_no_bytes(node: Any, space: str, named: Mapping[str, dict[str, Any]], empty: set[str]) -> bool:
    if isinstance(node, str):
        return node == "null" or _full(node, space) in empty
    if isinstance(node, dict):
        kind = node.get("type")
        if kind in ("record", "error", "fixed") and isinstance(node.get("name"), str):
            return _full(node["name"], _namespace(node, space)) in empty
        if isinstance(kind, (str, dict, list)) and kind not in ("array", "map", "enum", "record", "error"):
            return _takes_no_bytes(kind, space, named, empty)
    return False  # a union (its index), an array or map (its count), an enum (its index)
