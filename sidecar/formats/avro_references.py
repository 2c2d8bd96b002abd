"""An Avro schema with references (Confluent's schema references) made standalone.

A registry's Avro schema may name types it does not define: each is defined by a *reference*,
another subject's schema, under the type's full name (``{"name": "shop.Meta", "subject":
"meta-value", "version": 1}``). It is how Confluent's clients share a type between subjects, and
how one topic carries several event types (a top-level union of referenced records). Avro
libraries — fastavro here, Spark's ``from_avro`` — read one self-contained schema, so
:func:`standalone` writes each referenced type's definition where the schema first names it, as
Avro's own parsing order would meet it, and leaves later uses as names.

Pure: texts in, text out. Shared by the sidecar's extractor and the Spark jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from sidecar.formats.avro_schema import NAMED_TYPES, PRIMITIVES, SchemaError, fullname, load


def standalone(schema_text: str, references: Mapping[str, str]) -> str:
    """``schema_text`` with every type it takes from ``references`` (import name → schema text)
    defined in place; the text itself when it has no references. :class:`SchemaError` when a
    text is not JSON or the result would nest deeper than JSON may (1,024 levels). Loops, no
    recursion: a schema may nest as deep as its JSON."""
    if not references:
        return schema_text
    definitions: dict[str, Any] = {}
    for name, text in references.items():
        _collect(load(text, f"reference {name}"), definitions)
    main = _inline(load(schema_text), definitions)
    try:
        return orjson.dumps(main).decode()
    except orjson.JSONEncodeError:
        raise SchemaError("schema nests deeper than 1024 levels once its references are written in") from None


def _collect(node: Any, out: dict[str, Any]) -> None:
    """The top-level named types of a referenced schema, by full name, each made independent of
    where it will be written: its name fully qualified (an empty namespace where it has none)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, list):  # a reference may itself be a union of named types
            stack.extend(reversed(node))
        elif isinstance(node, dict) and node.get("type") in NAMED_TYPES and "name" in node:
            full, ns = fullname(node, None)
            definition = dict(node)  # the parts inside are copied where it is written in
            definition["name"] = full.rpartition(".")[2]
            definition["namespace"] = ns or ""
            out.setdefault(full, definition)


def _inline(root: Any, definitions: Mapping[str, Any]) -> Any:
    """``root`` (a freshly parsed schema, changed in place) with the first use of each referenced
    name replaced by a copy of its definition, in the order Avro parses a schema (fields, union
    branches, items and values in turn)."""
    holder = [root]
    defined: set[str] = set()
    # (the list or object holding a type, its index or key, the namespace in force there)
    stack: list[tuple[Any, Any, str | None]] = [(holder, 0, None)]
    while stack:
        parent, key, namespace = stack.pop()
        node = parent[key]
        if isinstance(node, str):
            if node not in PRIMITIVES:
                full = node if "." in node or not namespace else f"{namespace}.{node}"
                for candidate in (full, node):
                    if candidate in defined:
                        break
                    if candidate in definitions:
                        defined.add(candidate)
                        parent[key] = orjson.loads(orjson.dumps(definitions[candidate]))
                        stack.append((parent, key, None))
                        break
            continue  # unknown here: the Avro library says so, naming it
        if isinstance(node, list):
            stack.extend((node, i, namespace) for i in reversed(range(len(node))))
            continue
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind in NAMED_TYPES and "name" in node:
            full, namespace = fullname(node, namespace)
            defined.add(full)
        if kind in ("record", "error") and isinstance(node.get("fields"), list):
            fields = [f for f in node["fields"] if isinstance(f, dict) and "type" in f]
            stack.extend((f, "type", namespace) for f in reversed(fields))
        elif kind == "array" and "items" in node:
            stack.append((node, "items", namespace))
        elif kind == "map" and "values" in node:
            stack.append((node, "values", namespace))
        elif isinstance(kind, str | list | dict) and kind not in (*NAMED_TYPES, "array", "map"):
            stack.append((node, "type", namespace))
    return holder[0]
