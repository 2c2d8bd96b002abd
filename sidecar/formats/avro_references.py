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

import copy
from collections.abc import Mapping
from typing import Any

import orjson

from sidecar.formats.avro import NAMED_TYPES, SchemaError, fullname

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def standalone(schema_text: str, references: Mapping[str, str]) -> str:
    """``schema_text`` with every type it takes from ``references`` (import name → schema text)
    defined in place; the text itself when it has no references. :class:`SchemaError` when a
    reference is not JSON."""
    if not references:
        return schema_text
    definitions: dict[str, Any] = {}
    for name, text in references.items():
        try:
            node = orjson.loads(text)
        except orjson.JSONDecodeError as e:
            raise SchemaError(f"reference {name} is not JSON: {e}") from None
        _collect(node, None, definitions)
    try:
        main = orjson.loads(schema_text)
    except orjson.JSONDecodeError as e:
        raise SchemaError(f"schema is not JSON: {e}") from None
    return orjson.dumps(_inline(main, None, definitions, set())).decode()


def _collect(node: Any, namespace: str | None, out: dict[str, Any]) -> None:
    """The top-level named types of a referenced schema, by full name, each made independent of
    where it will be written: its name fully qualified (an empty namespace where it has none)."""
    if isinstance(node, list):  # a reference may itself be a union of named types
        for branch in node:
            _collect(branch, namespace, out)
        return
    if isinstance(node, dict) and node.get("type") in NAMED_TYPES and "name" in node:
        full, ns = fullname(node, namespace)
        definition = copy.deepcopy(node)
        definition["name"] = full.rpartition(".")[2]
        definition["namespace"] = ns or ""
        out.setdefault(full, definition)


def _inline(node: Any, namespace: str | None, definitions: Mapping[str, Any], defined: set[str]) -> Any:
    """``node`` with the first use of each referenced name replaced by its definition (in the
    order Avro parses a schema: fields, union branches, items and values in turn)."""
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return node
        full = node if "." in node or not namespace else f"{namespace}.{node}"
        for candidate in (full, node):
            if candidate in defined:
                return node
            if candidate in definitions:
                defined.add(candidate)
                body = definitions[candidate]
                return _inline(copy.deepcopy(body), None, definitions, defined)
        return node  # unknown here: the Avro library says so, naming it
    if isinstance(node, list):
        return [_inline(branch, namespace, definitions, defined) for branch in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    out = dict(node)
    if kind in NAMED_TYPES and "name" in node:
        full, namespace = fullname(node, namespace)
        defined.add(full)
    if kind in {"record", "error"}:
        out["fields"] = [
            {**f, "type": _inline(f.get("type"), namespace, definitions, defined)}
            for f in node.get("fields", [])
        ]
    elif kind == "array":
        out["items"] = _inline(node.get("items"), namespace, definitions, defined)
    elif kind == "map":
        out["values"] = _inline(node.get("values"), namespace, definitions, defined)
    elif isinstance(kind, str | list | dict) and kind not in NAMED_TYPES:
        out["type"] = _inline(kind, namespace, definitions, defined)
    return out
