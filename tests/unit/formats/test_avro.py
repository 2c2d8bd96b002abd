"""The Avro reader decodes only the extractor's path, through a projected reader schema."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.formats import avro
from sidecar.formats.avro import SchemaError, avro_time_reader
from sidecar.formats.avro_plan import PlanError
from sidecar.formats.timevalues import TimeValueError
from tests.unit.formats.avro_data import ORDER_V1, ORDER_V2, encode, order, record, text


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


# -- issue 32: hostile schemas and bodies end in a verdict ------------------------------------

HOSTILE_BODIES = """
import json
from sidecar.formats.avro import avro_time_reader
from sidecar.formats.avro_plan import PlanError
from tests.unit.formats.avro_data import LINKED, varint
listed = {"type": "record", "name": "E", "fields": [{"name": "list", "type": ["null", LINKED]},
    {"name": "nulls", "type": {"type": "array", "items": "null"}}, {"name": "ts", "type": "long"}]}
reader = avro_time_reader(json.dumps(listed), ["ts"], "ms")
for body in (b"\\x02\\x02" * 20_000 + b"\\x00" + b"\\x00\\x06", b"\\x00" + varint(2**62) + b"\\x00"):
    try:
        print(reader.millis(body))
    except PlanError as e:
        print(f"PlanError: {e}")
"""


def test_a_recursive_writer_schema_and_hostile_bodies_end_in_a_verdict_not_a_crash_or_a_hang() -> None:
    """Issue 32, item 2: fastavro (the old fallback for recursive types) crashed the process on a
    body ~40 KB deep and never returned on a 12-byte block of 2^62 nulls. Run apart: a crash or
    a hang must fail this test, not the test run."""
    done = subprocess.run(
        [sys.executable, "-c", HOSTILE_BODIES],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).parents[3],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "PlanError: values nested deeper than 1000",
        "PlanError: more items and calls than the body's bytes plus 1000000",
    ]


def deep(levels: int) -> dict[str, Any]:
    node: Any = "long"
    for i in range(levels):
        node = record(f"R{i}", x=node)
    return node  # type: ignore[no-any-return]


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("schema", "path", "reason"),
    [
        (
            {"type": "record", "name": "E", "fields": [{"name": "ts"}]},
            ["ts"],
            "field ts of record E has no type",
        ),
        ({"type": "record", "name": "E", "fields": [1]}, ["ts"], "record E has a field 1 without a name"),
        (
            {"type": "record", "name": "E", "fields": {"ts": "long"}},
            ["ts"],
            'has fields {"ts":"long"}, not a list',
        ),
        (record("E", a={"type": "array"}, ts="long"), ["ts"], 'an array without items: {"type":"array"}'),
        (
            record("E", f={"type": "fixed", "name": "F", "size": -1}, ts="long"),
            ["ts"],
            "size -1, not a count",
        ),
        (record("E", a="Nowhere", ts="long"), ["ts"], "type Nowhere is not defined before it is used"),
        (record("E", a={"type": 7}, ts="long"), ["ts"], '{"type":7} has no type'),
        (
            record("E", a={"type": "record", "name": 5, "fields": []}, ts="long"),
            ["ts"],
            "the record named 5: a name is a non-empty string",
        ),
        (["null", "long", {"type": {"type": [3]}}], ["ts"], "3 is not an Avro type"),
        (record("E", ts=["long", "string"]), ["ts"], "ts is a union of 2 non-null types"),
        ("[" * 1100 + "]" * 1100, ["ts"], "schema is not JSON"),
    ],
    ids=[
        "a field without a type",
        "a field that is not an object",
        "fields not a list",
        "an array without items",
        "a negative fixed size",
        "an undefined name",
        "a type that is a number",
        "a name that is a number",
        "a union branch that is a number",
        "a union on the path",
        "JSON deeper than its parser allows",
    ],
)
def test_a_schema_the_walks_cannot_read_is_a_schema_error_with_a_reason(
    schema: Any, path: list[str], reason: str
) -> None:
    """Issue 32, item 3: a KeyError, AttributeError, TypeError or RecursionError from a schema
    walk escaped the resolver and stopped the sidecar."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    with pytest.raises(SchemaError) as caught:
        avro_time_reader(text, path, "ms")
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_reason_quoting_a_name_with_a_line_break_or_control_bytes_stays_one_line() -> None:
    """Found by ``python -m testkit.fuzz.avro`` (seed lead-main, input 8761683): a type named with
    a line break in it gave a reason of two lines, which a dead letter header and the sidecar's
    one-line error cannot be."""
    schema = record("E", a="stri$\x7f\x00\ng", ts="long")
    with pytest.raises(SchemaError) as caught:
        avro_time_reader(json.dumps(schema), ["ts"], "ms")
    message = str(caught.value)
    assert message.isprintable()
    assert "stri$\\x7f\\x00\\ng" in message


@pytest.mark.timeout(20)
def test_schemas_that_walked_into_a_loop_or_past_the_recursion_limit_now_give_a_reader() -> None:
    # A record named "record": the old name lookup followed it to itself for ever.
    named_record = record("record", a="int", ts="long")
    assert avro_time_reader(json.dumps(named_record), ["ts"], "ms").millis(b"\x02\x04") == 2
    # 200 records deep: valid Avro, and a RecursionError in the old walks.
    assert (
        avro_time_reader(json.dumps(record("E", d=deep(200), ts="long")), ["ts"], "ms").millis(b"\x02\x04")
        == 2
    )
    assert (
        avro_time_reader(json.dumps(record("E", ts=deep(200))), ["ts"] + ["x"] * 200, "ms").millis(b"\x08")
        == 4
    )


@pytest.mark.parametrize("python", [False, True], ids=["C plan", "Python plan"])
def test_a_tenth_varint_byte_above_one_is_refused_by_both_plans_as_java_avro_does_not_wrap(
    python: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32, item 7: the C plan read 0 where the Python plan read 2^63, and the Python fast
    path returned times past Kafka's range unchecked."""
    if python:
        monkeypatch.setattr(avro, "CompiledPlan", None)
    reader = avro_time_reader(json.dumps(record("E", t="long")), ["t"], "ms")
    for body in (b"\x80" * 9 + b"\x02", b"\xfe" + b"\xff" * 8 + b"\x7f"):
        with pytest.raises(PlanError, match="varint beyond 64 bits"):
            reader.millis(body)
    assert reader.millis(b"\xfe" + b"\xff" * 8 + b"\x01") == 2**63 - 1
