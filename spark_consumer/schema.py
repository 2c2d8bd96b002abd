"""The value schema of the ordered topic's JSON records.

Given on the command line as a Spark DDL string (``"device STRING, temp DOUBLE"``) or as a file
holding either DDL, Spark's own schema JSON (``StructType.json()``), or a JSON Schema document
(``{"type": "object", "properties": {...}}``) whose plain types map onto Spark types.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    NumericType,
    StringType,
    StructField,
    StructType,
)

from spark_consumer.options import UsageError

_JSON_SCHEMA_TYPES: dict[str, DataType] = {
    "string": StringType(),
    "integer": LongType(),
    "number": DoubleType(),
    "boolean": BooleanType(),
}


def load_schema(spec: str, option: str = "--value-schema") -> StructType:
    """Parse ``spec`` (DDL, or a path to a DDL / Spark-JSON / JSON Schema file) into a StructType.

    DDL goes through Spark's own parser, which needs a running SparkSession.
    """
    path = Path(spec)
    text = spec
    source = "DDL"
    if "\n" not in spec and len(spec) < 4096 and path.is_file():
        text = path.read_text()
        source = str(path)
    if text.lstrip().startswith("{"):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as e:
            raise UsageError(f"{option}: {source} is not valid JSON ({e})") from None
        return from_json_document(document, f"{option}: {source}")
    try:
        parsed = DataType.fromDDL(text)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"{option}: cannot parse {source} as a Spark DDL schema: {first}") from None
    if not isinstance(parsed, StructType):
        raise UsageError(
            f"{option}: {source} is a single type ({parsed.simpleString()}), not a list of fields"
        )
    return parsed


def from_json_document(document: Any, where: str) -> StructType:
    """Spark's schema JSON (``{"type": "struct", ...}``) or a JSON Schema object."""
    if isinstance(document, dict) and document.get("type") == "struct":
        try:
            return StructType.fromJson(document)
        except (KeyError, TypeError, ValueError) as e:
            raise UsageError(f"{where} is not a valid Spark schema JSON ({e})") from None
    if isinstance(document, dict) and document.get("type") == "object":
        return _json_schema_struct(document, where)
    raise UsageError(f'{where}: expected Spark schema JSON ("type": "struct") or a JSON Schema object')


def _json_schema_struct(node: dict[str, Any], where: str) -> StructType:
    properties = node.get("properties")
    if not isinstance(properties, dict) or not properties:
        raise UsageError(f"{where}: a JSON Schema object needs non-empty 'properties'")
    return StructType(
        [StructField(name, _json_schema_type(sub, f"{where} .{name}")) for name, sub in properties.items()]
    )


def _json_schema_type(node: Any, where: str) -> DataType:
    if not isinstance(node, dict):
        raise UsageError(f"{where}: expected an object describing the field")
    kind = node.get("type")
    if isinstance(kind, list):  # ["integer", "null"]: nullable; every Spark field is
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind == "object":
        return _json_schema_struct(node, where)
    if kind == "array":
        return ArrayType(_json_schema_type(node.get("items", {}), where + "[]"))
    if isinstance(kind, str) and kind in _JSON_SCHEMA_TYPES:
        return _JSON_SCHEMA_TYPES[kind]
    raise UsageError(
        f"{where}: JSON Schema type {kind!r} is not supported "
        "(string, integer, number, boolean, object, array)"
    )


def field_type(schema: StructType, path: str, option: str) -> DataType:
    """The type of a dotted field in ``schema``; a clear error names what exists."""
    current: DataType = schema
    walked: list[str] = []
    for part in path.split("."):
        if not isinstance(current, StructType) or part not in current.fieldNames():
            names = ", ".join(current.fieldNames()) if isinstance(current, StructType) else "(not a struct)"
            at = ".".join(walked) or "the value"
            raise UsageError(f"{option}: no field {path!r} in the value schema ({at} has: {names})")
        current = current[part].dataType
        walked.append(part)
    return current


def check_numeric(schema: StructType, path: str, option: str) -> None:
    if not isinstance(field_type(schema, path, option), NumericType):
        raise UsageError(
            f"{option}: field {path!r} is {field_type(schema, path, option).simpleString()}, not a number"
        )
