"""Avro schemas with references (Confluent's schema references) are read as one standalone schema."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest

from timesync_wire.formats.avro import SchemaError, avro_time_reader
from timesync_wire.schemas.avro_references import standalone

META = {
    "type": "record",
    "name": "Meta",
    "namespace": "common",
    "fields": [
        {"name": "source", "type": "string"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "region", "type": "common.Region"},  # itself from a reference
    ],
}
REGION = {"type": "enum", "name": "Region", "namespace": "common", "symbols": ["EU", "US"]}
REFERENCES = {
    "common.Meta": json.dumps(META),
    "common.Region": json.dumps(REGION),
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "meta", "type": "common.Meta"},
        {"name": "previous", "type": ["null", "common.Meta"], "default": None},  # a second use: by name
        {"name": "home", "type": "common.Region"},
    ],
}
RECORD = {
    "id": "o1",
    "meta": {"source": "web", "ts": 1_700_000_000_123, "region": "US"},
    "previous": None,
    "home": "EU",
}


def written(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    """``record`` as a producer with every type known would write it."""
    named: dict[str, Any] = {}
    for ref in (REGION, META):
        fastavro.parse_schema(ref, named_schemas=named)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema, named_schemas=named), record)
    return out.getvalue()


def test_each_referenced_type_is_defined_where_first_named_and_the_result_reads_the_records() -> None:
    text = standalone(json.dumps(ORDER), REFERENCES)

    schema = json.loads(text)
    fields = {f["name"]: f["type"] for f in schema["fields"]}
    assert fields["meta"]["name"] == "Meta"
    assert fields["meta"]["fields"][2]["type"]["name"] == "Region"  # the enum, defined inside Meta
    assert fields["previous"] == ["null", "common.Meta"]
    assert fields["home"] == "common.Region"
    body = written(ORDER, RECORD)
    read = fastavro.schemaless_reader(
        io.BytesIO(body), fastavro.parse_schema(schema), return_record_name=False
    )
    assert read["meta"]["ts"].timestamp() == 1_700_000_000.123  # type: ignore[index]
    assert {**read, "meta": {**read["meta"], "ts": RECORD["meta"]["ts"]}} == RECORD  # type: ignore[index,dict-item]


def test_the_extractor_reads_a_time_inside_a_referenced_record() -> None:
    reader = avro_time_reader(standalone(json.dumps(ORDER), REFERENCES), ["meta", "ts"], "ms")
    assert reader.millis(written(ORDER, RECORD)) == 1_700_000_000_123


def test_a_union_of_referenced_records_one_topic_of_several_event_types_is_defined_in_order() -> None:
    click = {"type": "record", "name": "Click", "namespace": "ev", "fields": [{"name": "at", "type": "long"}]}
    view = {"type": "record", "name": "View", "namespace": "ev", "fields": [{"name": "at", "type": "long"}]}
    text = standalone(
        json.dumps(["ev.Click", "ev.View"]), {"ev.Click": json.dumps(click), "ev.View": json.dumps(view)}
    )
    assert [b["name"] for b in json.loads(text)] == ["Click", "View"]
    fastavro.parse_schema(json.loads(text))


def test_without_references_the_text_is_unchanged_and_a_bad_reference_says_which() -> None:
    assert standalone('{"type": "string"}', {}) == '{"type": "string"}'
    with pytest.raises(SchemaError, match=r"reference common\.Meta is not JSON"):
        standalone(json.dumps(ORDER), {"common.Meta": "{nope"})
