"""The skip plan reads what a full decode reads; the C plan is held to the Python specification."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.formats import avro
from sidecar.formats._avro_plan import CompiledPlan
from sidecar.formats.avro import AvroTimeReader, PlannedAvroReader, _named_types, avro_time_reader
from sidecar.formats.avro_plan import NoPlan, PlanError, compile_plan, run_plan
from tests.unit.formats.avro_data import encode

#: Every kind of Avro value in front of the time, so that the plan must step over each.
WIDE: dict[str, Any] = {
    "type": "record",
    "name": "Wide",
    "namespace": "t",
    "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["R", "G", "B"]}},
        {"name": "u", "type": ["null", "long", "string", "Four"]},
        {"name": "nums", "type": {"type": "array", "items": {"type": "array", "items": "long"}}},
        {"name": "tags", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "nulls", "type": {"type": "array", "items": "null"}},
        {
            "name": "meta",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Meta",
                    "fields": [
                        {"name": "again", "type": "Four"},
                        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
                        {"name": "after", "type": "string"},
                    ],
                },
            ],
        },
    ],
}
longs = st.integers(-(2**63), 2**63 - 1)
wide_values = st.fixed_dictionaries(
    {
        "b": st.booleans(),
        "i": st.integers(-(2**31), 2**31 - 1),
        "f": st.floats(width=32, allow_nan=False),
        "d": st.floats(allow_nan=False),
        "s": st.text(max_size=20),
        "raw": st.binary(max_size=20),
        "fx": st.binary(min_size=4, max_size=4),
        "e": st.sampled_from(["R", "G", "B"]),
        "u": st.one_of(st.none(), longs, st.text(max_size=5)),
        "nums": st.lists(st.lists(longs, max_size=4), max_size=4),
        "tags": st.dictionaries(
            st.text(max_size=5), st.one_of(st.none(), st.floats(allow_nan=False)), max_size=4
        ),
        "nulls": st.lists(st.none(), max_size=3),
        "meta": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {
                    "again": st.binary(min_size=4, max_size=4),
                    "ts": st.integers(0, 2**62),
                    "after": st.text(max_size=5),
                }
            ),
        ),
    }
)
PLAN = compile_plan(WIDE, ["meta", "ts"], _named_types(WIDE, None, {}))


@settings(max_examples=300)
@given(value=wide_values)
def test_the_plan_reads_the_field_a_full_decode_reads(value: dict[str, Any]) -> None:
    body = encode(WIDE, value)
    expected = None if value["meta"] is None else value["meta"]["ts"]
    assert run_plan(PLAN, body, 0) == expected
    assert CompiledPlan(PLAN).read(b"\x00head" + body, 5) == expected


@pytest.mark.parametrize(
    ("body", "reason"),
    [(b"\xff" * 11, "varint longer than 10 bytes"), (b"\x80", "body ends inside a varint")],
)
def test_a_varint_too_long_or_cut_short_fails_alike_in_c_and_python(body: bytes, reason: str) -> None:
    with pytest.raises(PlanError, match=reason):
        run_plan(PLAN, body, 0)
    with pytest.raises(PlanError, match=reason):
        CompiledPlan(PLAN).read(body, 0)


@settings(max_examples=300)
@given(value=wide_values, cut=st.integers(0, 200), junk=st.binary(max_size=8))
def test_the_c_plan_agrees_with_the_python_plan_on_any_bytes(
    value: dict[str, Any], cut: int, junk: bytes
) -> None:
    body = encode(WIDE, value)[:cut] + junk  # truncated or garbled: both fail alike, or agree
    try:
        expected: object = run_plan(PLAN, body, 0)
    except PlanError as e:
        with pytest.raises(PlanError, match=str(e)):
            CompiledPlan(PLAN).read(body, 0)
    else:
        assert CompiledPlan(PLAN).read(body, 0) == expected


def test_a_recursive_type_among_the_skipped_fields_falls_back_to_fastavro() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"]}, {"name": "ts", "type": "long"}],
    }
    schema = {
        "type": "record",
        "name": "E",
        "fields": [{"name": "tree", "type": node}, {"name": "ts", "type": "long"}],
    }
    with pytest.raises(NoPlan):
        compile_plan(schema, ["ts"], _named_types(schema, None, {}))
    reader = avro_time_reader(json.dumps(schema), ["ts"], "ms")
    assert isinstance(reader, AvroTimeReader)
    assert reader.millis(encode(schema, {"tree": {"next": {"next": None, "ts": 1}, "ts": 2}, "ts": 3})) == 3
    # After the time, recursion is harmless: what follows the field is never planned.
    first = {**node, "fields": node["fields"][::-1]}
    assert isinstance(avro_time_reader(json.dumps(first), ["ts"], "ms"), PlannedAvroReader)


def test_without_the_c_extension_the_plan_runs_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(avro, "CompiledPlan", None)
    reader = avro_time_reader(json.dumps(WIDE), ["meta", "ts"], "ms")
    value = {
        "b": True, "i": 1, "f": 1.0, "d": 2.0, "s": "x", "raw": b"", "fx": b"abcd", "e": "G", "u": None,
        "nums": [], "tags": {}, "nulls": [], "meta": {"again": b"1234", "ts": 5_000_000, "after": ""},
    }  # fmt: skip
    assert reader.millis(encode(WIDE, value)) == 5_000
