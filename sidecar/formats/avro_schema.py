"""An Avro writer schema as data: read, checked, its named types found — without recursion.

A schema comes from the registry, so from anyone who may register one. Every walk here is a loop
over an explicit stack (JSON may nest 1,024 levels deep, orjson's limit, far past Python's
recursion limit for a recursive walk), and every shape a walk does not understand is a
:class:`SchemaError` with a one-line reason — never a ``KeyError``, ``AttributeError`` or
``RecursionError`` escaping to the resolver, which would stop the sidecar.

The walks follow Avro's rules for names: a named type (record, error, enum, fixed) is defined
once and named afterwards, a dotted name is full, and an undotted one takes the namespace it is
written in (the enclosing type's, or the type's own ``namespace``). fastavro then checks what
the walks do not (valid names, defaults, duplicate definitions): it is a well-kept validator, and
it does not recurse in Python (checked up to orjson's depth limit).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

# Tuples, not sets: a schema's "type" may be any JSON value, and `in` must not hash it.
#: Avro's named types (a schema defines each once and names it afterwards).
NAMED_TYPES = ("record", "enum", "fixed", "error")
PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
#: The values of ``"type"`` that make a JSON object a type of its own rather than a wrapper.
KEYWORDS = (*NAMED_TYPES, "array", "map")


class SchemaError(ValueError):
    """The writer schema cannot give the extractor's field; the message says why, in one line.

    The message often quotes the schema (a type's name, a field's), which is text we do not
    control: it becomes a dead letter's header and the sidecar's one-line error, so characters
    that are not printable (a line break, a control byte, a lone surrogate) are written escaped.
    """

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def one_line(text: str) -> str:
    """``text`` with every character that is not printable written as its escape (``\\n``)."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii") for c in text
    )


#: A named type by full name: its definition and the namespace the names inside it take.
Named = Mapping[str, tuple[dict[str, Any], "str | None"]]


def load(text: str, what: str = "schema") -> Any:
    """The JSON of a schema text; :class:`SchemaError` when it is not JSON (or nests deeper
    than orjson's 1,024 levels)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise SchemaError(f"{what} is not JSON: {e}") from None


def short(node: object) -> str:
    """A type as it reads in a one-line error: its JSON, cut at 60 characters."""
    try:
        text = orjson.dumps(node).decode()
    except TypeError:  # nested too deep to write back: a sign of its own
        text = repr(type(node).__name__)
    return text if len(text) <= 60 else text[:57] + "..."


def fullname(node: Mapping[str, Any], namespace: str | None) -> tuple[str, str | None]:
    """A named type's full name, and the namespace the names inside it inherit (Avro's rule: a
    dotted name is full; else the type's own ``namespace``, else the enclosing one)."""
    name = node.get("name")
    if not isinstance(name, str) or not name:
        raise SchemaError(f"the {node.get('type')} named {short(name)}: a name is a non-empty string")
    if "." in name:
        return name, name.rpartition(".")[0]
    ns = node.get("namespace", namespace)
    if ns is not None and not isinstance(ns, str):
        raise SchemaError(f"type {name} has the namespace {short(ns)}, not a string")
    return (f"{ns}.{name}" if ns else name), (ns or None)


def resolve(name: str, namespace: str | None, named: Named) -> tuple[dict[str, Any], str | None]:
    """The definition a type name written in ``namespace`` refers to."""
    if "." not in name and namespace and f"{namespace}.{name}" in named:
        return named[f"{namespace}.{name}"]
    if name in named:
        return named[name]
    raise SchemaError(f"type {name} is not defined before it is used")


def concrete(node: Any, namespace: str | None, named: Named) -> tuple[Any, str | None, str | None]:
    """``node`` with names resolved and ``{"type": …}`` wrappers taken off: a primitive name, a
    primitive object (``{"type": "long", "logicalType": …}``), a union (a list) or an object
    whose ``type`` is a keyword; the namespace in force inside it; and its full name if it is a
    named type. Bounded: each step goes one level down the JSON, and a name resolves to a
    keyword object."""
    while True:
        if isinstance(node, str):
            if node in PRIMITIVES:
                return node, namespace, None
            node, namespace = resolve(node, namespace, named)
        elif isinstance(node, list):
            return node, namespace, None
        elif not isinstance(node, dict):
            raise SchemaError(f"{short(node)} is not an Avro type")
        kind = node.get("type")
        if kind in NAMED_TYPES:
            full, inner = fullname(node, namespace)
            return node, inner, full
        if kind in KEYWORDS or kind in PRIMITIVES:
            return node, namespace, None
        if not isinstance(kind, str | list | dict):
            raise SchemaError(f"{short(node)} has no type")
        node = kind


def walk(schema: Any) -> Iterator[tuple[Any, str | None, str | None]]:
    """Every type written in the schema in Avro's parsing order, with the namespace in force
    there (inside it, for a named type) and, for a named type, its full name; a named type comes
    a second time (``ns`` and full name, node ``None``) once everything inside it came. Checks on
    the way the shapes the plan and the path read (a record's ``fields`` a list of objects with a
    name and a type, a fixed's ``size``, an array's ``items``, a map's ``values``)."""
    stack: list[tuple[Any, str | None, str | None]] = [(schema, None, None)]
    while stack:
        node, namespace, leaving = stack.pop()
        if leaving is not None:
            yield None, namespace, leaving
            continue
        if isinstance(node, list):
            yield node, namespace, None
            stack.extend((branch, namespace, None) for branch in reversed(node))
            continue
        if not isinstance(node, str | dict):
            raise SchemaError(f"{short(node)} is not an Avro type")
        kind = node.get("type") if isinstance(node, dict) else None
        full = None
        if kind in NAMED_TYPES:
            assert isinstance(node, dict)
            full, namespace = fullname(node, namespace)
            stack.append((None, namespace, full))
        yield node, namespace, full
        if isinstance(node, dict):
            stack.extend((child, namespace, None) for child in reversed(_children(node, kind)))


def named_types(schema: Any) -> dict[str, tuple[dict[str, Any], str | None]]:
    """Every named type of the schema by full name, each with the namespace inside it, in the
    order their definitions end (a type after every type defined inside it)."""
    out: dict[str, tuple[dict[str, Any], str | None]] = {}
    started: dict[str, dict[str, Any]] = {}
    for node, namespace, full in walk(schema):
        if full is None:
            continue
        if node is not None:
            started.setdefault(full, node)
        elif full not in out:
            out[full] = (started[full], namespace)
    return out


def _children(node: dict[str, Any], kind: Any) -> list[Any]:
    """The types written inside ``node`` (checked to be there)."""
    if kind in ("record", "error"):
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise SchemaError(f"record {node.get('name')} has fields {short(fields)}, not a list")
        for field in fields:
            if not isinstance(field, dict) or not isinstance(field.get("name"), str):
                raise SchemaError(f"record {node.get('name')} has a field {short(field)} without a name")
            if "type" not in field:
                raise SchemaError(f"field {field['name']} of record {node.get('name')} has no type")
        return [field["type"] for field in fields]
    if kind == "fixed":
        size = node.get("size")
        if type(size) is not int or size < 0:
            raise SchemaError(f"fixed {node.get('name')} has the size {short(size)}, not a count of bytes")
        return []
    if kind == "enum":
        return []
    if kind in ("array", "map"):
        key = "items" if kind == "array" else "values"
        if key not in node:
            raise SchemaError(f"{'an array' if kind == 'array' else 'a map'} without {key}: {short(node)}")
        return [node[key]]
    if kind in PRIMITIVES:
        return []
    if isinstance(kind, str | list | dict):
        return [kind]  # {"type": <a type>} wraps a type (or names one)
    raise SchemaError(f"{short(node)} has no type")


def validate(schema: Any) -> None:
    """fastavro's verdict on what the walks do not check; :class:`SchemaError` saying why."""
    import fastavro  # only users of Avro values pay its import

    try:
        fastavro.parse_schema(schema)
    except Exception as e:  # fastavro raises several types for a bad schema
        reason = " ".join(str(e).split())[:200]
        raise SchemaError(f"schema is not valid Avro: {type(e).__name__}: {reason}") from None
