"""The Avro reader decodes only the extractor's path, through a projected reader schema."""

from __future__ import annotations

import io
import json

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.formats.avro import SchemaError, avro_time_reader
from sidecar.formats.avro_plan import PlanError
from sidecar.formats.timevalues import TimeValueError
from tests.unit.formats.avro_data import ORDER_V1, ORDER_V2, encode, order, text


@given(ts=st.integers(0, 2**62), items=st.integers(0, 5), version=st.sampled_from([1, 2]))
def test_the_projected_read_equals_the_field_of_the_full_decode(ts: int, items: int, version: int) -> None:
    schema = ORDER_V1 if version == 1 else ORDER_V2
    body = encode(schema, order(ts, version, items))
    plain = json.loads(text(schema).replace('"logicalType": "timestamp-millis"', '"doc": "plain"'))
    full = fastavro.schemaless_reader(io.BytesIO(body), fastavro.parse_schema(plain))
    assert avro_time_reader(text(schema), ["meta", "ts"], "ms").millis(body) == full["meta"]["ts"] == ts


def test_timestamp_millis_beyond_the_year_9999_is_still_a_kafka_time() -> None:
    """No ``datetime`` is built: the logical type says "ms since the epoch", which is enough."""
    ts = 253_402_300_800_000  # 10000-01-01
    body = encode(ORDER_V1, order(ts))
    with pytest.raises(OverflowError):
        fastavro.schemaless_reader(io.BytesIO(body), fastavro.parse_schema(ORDER_V1))
    assert avro_time_reader(text(ORDER_V1), ["meta", "ts"], "ms").millis(body) == ts


def test_timestamp_micros_is_read_as_microseconds_whatever_the_unit() -> None:
    schema = {
        "type": "record",
        "name": "E",
        "fields": [{"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}}],
    }
    body = encode(schema, {"at": 1_700_000_000_123_456})
    assert avro_time_reader(json.dumps(schema), ["at"], "s").millis(body) == 1_700_000_000_123


@pytest.mark.parametrize(
    ("avro_type", "value", "unit", "expected"),
    [
        ("long", 1_700_000_000_123, "ms", 1_700_000_000_123),
        ("double", 1_700_000_000.5, "s", 1_700_000_000_500),
        ("long", 1_700_000_000_123_456, "us", 1_700_000_000_123),
        ("string", "2023-11-14T22:13:20.250+00:00", "iso", 1_700_000_000_250),
    ],
)
def test_plain_fields_take_the_unit(avro_type: str, value: object, unit: str, expected: int) -> None:
    schema = {"type": "record", "name": "E", "fields": [{"name": "t", "type": avro_type}]}
    assert avro_time_reader(json.dumps(schema), ["t"], unit).millis(encode(schema, {"t": value})) == expected  # type: ignore[arg-type]


def test_an_optional_record_on_the_path_is_followed_and_null_is_invalid() -> None:
    inner = {"type": "record", "name": "M", "fields": [{"name": "ts", "type": "long"}]}
    schema = {"type": "record", "name": "E", "fields": [{"name": "m", "type": ["null", inner]}]}
    reader = avro_time_reader(json.dumps(schema), ["m", "ts"], "ms")
    assert reader.millis(encode(schema, {"m": {"ts": 5}})) == 5
    with pytest.raises(TimeValueError, match=r"field m\.ts is null"):
        reader.millis(encode(schema, {"m": None}))


def test_a_named_type_referenced_by_name_is_followed() -> None:
    meta = {"type": "record", "name": "Meta", "fields": [{"name": "ts", "type": "long"}]}
    schema = {
        "type": "record",
        "name": "E",
        "fields": [{"name": "first", "type": meta}, {"name": "second", "type": "Meta"}],
    }
    body = encode(schema, {"first": {"ts": 1}, "second": {"ts": 2}})
    assert avro_time_reader(json.dumps(schema), ["second", "ts"], "ms").millis(body) == 2


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (["meta", "when"], "record Meta has no field meta.when"),
        (["id", "x"], "id is not a record, so it has no field x"),
        (["items"], "field items is of type"),
        (["meta", "source"], None),  # a string is a time under iso: accepted at build time
    ],
)
def test_a_schema_without_a_time_at_the_path_says_why(path: list[str], reason: str | None) -> None:
    if reason is None:
        avro_time_reader(text(ORDER_V1), path, "iso")
        return
    with pytest.raises(SchemaError, match=reason):
        avro_time_reader(text(ORDER_V1), path, "ms")


def test_local_timestamps_have_no_zone_and_are_refused() -> None:
    schema = {
        "type": "record",
        "name": "E",
        "fields": [{"name": "t", "type": {"type": "long", "logicalType": "local-timestamp-millis"}}],
    }
    with pytest.raises(SchemaError, match="no time zone"):
        avro_time_reader(json.dumps(schema), ["t"], "ms")


def test_a_truncated_body_does_not_decode() -> None:
    body = encode(ORDER_V1, order(1000))
    with pytest.raises(PlanError, match="body ends inside"):
        avro_time_reader(text(ORDER_V1), ["meta", "ts"], "ms").millis(body[:-3])
