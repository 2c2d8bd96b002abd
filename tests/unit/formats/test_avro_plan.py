"""The skip plan reads what a full decode reads; the C plan is held to the Python specification."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.formats import avro, avro_plan
from sidecar.formats._avro_plan import CompiledPlan
from sidecar.formats.avro import PlannedAvroReader, avro_time_reader
from sidecar.formats.avro_plan import (
    DEPTH_MESSAGE,
    JUMP,
    MAX_DEPTH,
    MAX_FREE_STEPS,
    RETURN,
    SKIP_VARINT,
    WORK_MESSAGE,
    PlanError,
    compile_plan,
    run_plan,
)
from sidecar.formats.avro_schema import SchemaError, named_types
from tests.unit.formats.avro_data import LINKED, TREE, encode, record, varint

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


def plan_of(schema: Any, path: list[str]) -> tuple[int, ...]:
    return compile_plan(schema, path, named_types(schema))


PLAN = plan_of(WIDE, ["meta", "ts"])


def outcome(read: Callable[[bytes, int], object], body: bytes, start: int) -> tuple[str, object]:
    try:
        return "value", read(body, start)
    except PlanError as e:
        return "PlanError", str(e)


def both(plan: tuple[int, ...], body: bytes, start: int = 0) -> object:
    """What the Python plan reads, checked to be what the C plan reads (or fails alike)."""
    python = outcome(lambda b, s: run_plan(plan, b, s), body, start)
    assert outcome(CompiledPlan(plan).read, body, start) == python
    if python[0] == "PlanError":
        raise PlanError(python[1])
    return python[1]


@settings(max_examples=200, deadline=None)
@given(value=wide_values)
def test_the_plan_reads_the_field_a_full_decode_reads(value: dict[str, Any]) -> None:
    body = encode(WIDE, value)
    expected = None if value["meta"] is None else value["meta"]["ts"]
    assert run_plan(PLAN, body, 0) == expected
    assert CompiledPlan(PLAN).read(b"\x00head" + body, 5) == expected


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"\xff" * 11, "varint longer than 10 bytes"),
        (b"\x80", "body ends inside a varint"),
        (b"\x80" * 9 + b"\x02", "varint beyond 64 bits"),  # C read 0 here, Python 2^63
        (b"\xfe" + b"\xff" * 8 + b"\x7f", "varint beyond 64 bits"),
    ],
)
def test_a_varint_too_long_cut_short_or_beyond_64_bits_fails_alike_in_c_and_python(
    body: bytes, reason: str
) -> None:
    plan = plan_of(record("E", t="long"), ["t"])
    with pytest.raises(PlanError, match=reason):
        run_plan(plan, body, 0)
    with pytest.raises(PlanError, match=reason):
        CompiledPlan(plan).read(body, 0)


@pytest.mark.parametrize("value", [2**63 - 1, -(2**63), 1, -1, 0])
def test_every_64_bit_long_reads_alike_in_c_and_python_a_tenth_byte_of_one_included(value: int) -> None:
    schema = record("E", n="long")
    plan = plan_of(schema, ["n"])
    assert both(plan, encode(schema, {"n": value})) == value
    assert both(plan, varint(value)) == value


def test_the_fast_path_never_returns_a_time_beyond_kafkas_range() -> None:
    schema = record("E", t="long")
    reader = avro_time_reader(json.dumps(schema), ["t"], "ms")
    for body in (b"\x80" * 9 + b"\x02", b"\xfe" + b"\xff" * 8 + b"\x03"):
        with pytest.raises(PlanError, match="beyond 64 bits"):
            reader.millis(body)
    assert reader.millis(b"\xfe" + b"\xff" * 8 + b"\x01") == 2**63 - 1


@settings(max_examples=200, deadline=None)
@given(value=wide_values, cut=st.integers(0, 200), junk=st.binary(max_size=8))
def test_the_c_plan_agrees_with_the_python_plan_on_any_bytes(
    value: dict[str, Any], cut: int, junk: bytes
) -> None:
    body = encode(WIDE, value)[:cut] + junk  # truncated or garbled: both fail alike, or agree
    with contextlib.suppress(PlanError):
        both(PLAN, body)


# -- recursive types: planned, with bounded depth and work ------------------------------------

linked_lists: st.SearchStrategy[Any] = st.recursive(
    st.none(), lambda inner: st.fixed_dictionaries({"n": longs, "next": inner}), max_leaves=30
)


@settings(max_examples=100, deadline=None)
@given(head=linked_lists, ts=st.integers(0, 2**62))
def test_a_linked_list_before_the_time_is_skipped_by_calls(head: Any, ts: int) -> None:
    schema = record("E", list=["null", LINKED], ts="long")
    assert both(plan_of(schema, ["ts"]), encode(schema, {"list": head, "ts": ts})) == ts


trees: st.SearchStrategy[Any] = st.recursive(
    st.fixed_dictionaries({"kids": st.just([]), "tag": st.text(max_size=3)}),
    lambda inner: st.fixed_dictionaries({"kids": st.lists(inner, max_size=3), "tag": st.text(max_size=3)}),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(tree=trees, ts=st.integers(0, 2**62))
def test_a_tree_of_arrays_and_maps_before_the_time_is_skipped(tree: Any, ts: int) -> None:
    schema = record("E", tree=TREE, index={"type": "map", "values": "Tree"}, ts="long")
    value = {"tree": tree, "index": {"a": tree}, "ts": ts}
    assert both(plan_of(schema, ["ts"]), encode(schema, value)) == ts


def test_a_path_may_go_through_a_recursive_type() -> None:
    plan = plan_of(LINKED, ["next", "n"])
    assert both(plan, encode(LINKED, {"n": 1, "next": {"n": 2, "next": None}})) == 2
    assert both(plan, encode(LINKED, {"n": 1, "next": None})) is None


LIST_THEN_TIME = record("E", list=["null", LINKED], ts="long")


def test_a_body_nested_deeper_than_the_cap_does_not_decode_in_either_plan() -> None:
    plan = plan_of(LIST_THEN_TIME, ["ts"])
    node = b"\x02\x02"  # the list's union: a Node; n = 1; then its next: a Node, …
    ok = node * (MAX_DEPTH - 1) + b"\x00" + b"\x06"
    assert both(plan, ok) == 3
    with pytest.raises(PlanError, match=DEPTH_MESSAGE):
        both(plan, node * (MAX_DEPTH + 1) + b"\x00" + b"\x06")
    with pytest.raises(PlanError, match=DEPTH_MESSAGE):
        both(plan, node * 20_000 + b"\x00" + b"\x06")  # ~40 KB: crashed fastavro, the old fallback


def test_a_type_that_contains_itself_with_nothing_to_end_it_fails_at_the_depth_cap() -> None:
    schema = record("E", r=record("R", again="R"), ts="long")
    with pytest.raises(PlanError, match=DEPTH_MESSAGE):
        both(plan_of(schema, ["ts"]), b"\x02")


def block_of(count: int) -> bytes:
    return varint(count)


@pytest.mark.parametrize(
    "items",
    ["null", {"type": "fixed", "name": "Nothing", "size": 0}, record("Empty")],
    ids=["nulls", "empty fixeds", "empty records"],
)
def test_items_of_no_bytes_count_as_work_a_block_of_2_62_is_refused_at_once(items: Any) -> None:
    schema = record("E", xs={"type": "array", "items": items}, ts="long")
    plan = plan_of(schema, ["ts"])
    assert both(plan, block_of(1000) + b"\x00" + b"\x06") == 3
    assert both(plan, block_of(MAX_FREE_STEPS) + b"\x00" + b"\x06") == 3
    huge = block_of(2**62) + b"\x00" + b"\x06"
    assert len(huge) == 12
    with pytest.raises(PlanError, match=WORK_MESSAGE):
        both(plan, huge)
    with pytest.raises(PlanError, match=WORK_MESSAGE):  # many blocks add up
        both(plan, block_of(MAX_FREE_STEPS // 2) * 3 + b"\x00" + b"\x06")


def test_empty_records_named_again_take_no_steps_and_named_records_cost_a_call_each() -> None:
    point = record("P", x="int", e="Empty")
    schema = record("E", e=record("Empty"), first=point, ps={"type": "array", "items": "P"}, ts="long")
    plan = plan_of(schema, ["ts"])
    body = b"\x02" + block_of(3) + b"\x02\x04\x06" + b"\x00" + b"\x08"
    assert both(plan, body) == 4


def test_a_deep_schema_compiles_without_recursion() -> None:
    node: Any = "long"
    for i in range(300):  # 900 JSON levels: near orjson's 1,024; any recursive walk fails far earlier
        node = record(f"R{i}", x=node)
    schema = record("E", deep=node, ts="long")
    reader = avro_time_reader(json.dumps(schema), ["ts"], "ms")
    assert reader.millis(b"\x02\x04") == 2


def test_a_schema_too_large_to_plan_is_refused_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = record("E", **{f"f{i}": ["null", "long"] for i in range(20)}, ts="long")
    assert avro_time_reader(json.dumps(schema), ["ts"], "ms")  # 20 x 7 steps: within the bound
    monkeypatch.setattr(avro_plan, "MAX_PLAN_OPS", 100)
    with pytest.raises(SchemaError, match="too large to plan: over 100 steps"):
        avro_time_reader(json.dumps(schema), ["ts"], "ms")


def test_without_the_c_extension_the_plan_runs_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(avro, "CompiledPlan", None)
    reader = avro_time_reader(json.dumps(WIDE), ["meta", "ts"], "ms")
    assert isinstance(reader, PlannedAvroReader)
    value = {
        "b": True, "i": 1, "f": 1.0, "d": 2.0, "s": "x", "raw": b"", "fx": b"abcd", "e": "G", "u": None,
        "nums": [], "tags": {}, "nulls": [], "meta": {"again": b"1234", "ts": 5_000_000, "after": ""},
    }  # fmt: skip
    assert reader.millis(encode(WIDE, value)) == 5_000


@pytest.mark.parametrize(
    ("plan", "reason"),
    [
        ((SKIP_VARINT,), "the plan has no op at 1"),
        ((RETURN,), "the plan has no open frame at 0"),
        ((JUMP, -5), "the plan has no op at -5"),
    ],
    ids=["running off the end", "a RETURN without a CALL", "a JUMP before the start"],
)
def test_a_plan_not_made_by_the_compiler_fails_alike_and_never_reads_out_of_bounds(
    plan: tuple[int, ...], reason: str
) -> None:
    with pytest.raises(PlanError, match=reason):
        both(plan, b"\x00")
