"""Avro writer schemas and bodies for the format tests: two versions of one subject."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro

#: Version 1: the event time nested in ``meta``, as timestamp-millis.
ORDER_V1: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}],
                },
            },
        },
        {
            "name": "meta",
            "type": {
                "type": "record",
                "name": "Meta",
                "fields": [
                    {"name": "source", "type": "string"},
                    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                ],
            },
        },
    ],
}

#: Version 2 (backward compatible): a field added before ``meta`` and one inside it.
ORDER_V2: dict[str, Any] = {
    **ORDER_V1,
    "fields": [
        ORDER_V1["fields"][0],
        {"name": "note", "type": ["null", "string"], "default": None},
        ORDER_V1["fields"][1],
        {
            "name": "meta",
            "type": {
                "type": "record",
                "name": "Meta",
                "fields": [
                    {"name": "region", "type": "string", "default": "eu"},
                    *ORDER_V1["fields"][2]["type"]["fields"],
                ],
            },
        },
    ],
}


def text(schema: dict[str, Any]) -> str:
    return json.dumps(schema)


def encode(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def order(ts_ms: int, version: int = 1, n_items: int = 2) -> dict[str, Any]:
    """An order; ``ts`` as the raw long (fastavro writes an int for timestamp-millis)."""
    record: dict[str, Any] = {
        "id": f"o-{ts_ms}",
        "items": [{"sku": f"s{i}", "qty": i} for i in range(n_items)],
        "meta": {"source": "web", "ts": ts_ms},
    }
    if version == 2:
        record["note"] = "leave at the door"
        record["meta"]["region"] = "us"
    return record


#: A linked list: a record that names itself (legal Avro; a plan skips it by calls).
LINKED: dict[str, Any] = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "n", "type": "long"}, {"name": "next", "type": ["null", "Node"]}],
}


def record(name: str, **fields: Any) -> dict[str, Any]:
    """A record schema: ``record("E", ts="long")``."""
    return {"type": "record", "name": name, "fields": [{"name": k, "type": v} for k, v in fields.items()]}


#: A tree through an array (and, where a test adds it, a map) of itself.
TREE = record("Tree", kids={"type": "array", "items": "Tree"}, tag="string")


def varint(n: int) -> bytes:
    """``n`` as Avro's zigzag varint (a block count, a long)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)
