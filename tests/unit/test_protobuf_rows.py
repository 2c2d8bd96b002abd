"""The Protobuf row decoder on bodies nobody vetted: a row or ``None``, never an exception, and
work bounded by the value's size and the bounds of ``spark_consumer/value_limits.py``."""

from __future__ import annotations

import datetime as dt
import functools
import time
from typing import Any

import pytest
from google.protobuf import message_factory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_consumer import framing
from spark_consumer.options import UsageError
from spark_consumer.protobuf_rows import (
    MAX_DEPTH,
    FramedDecoder,
    file_descriptor,
    message_descriptor,
    struct_type,
)
from spark_consumer.protobuf_schema import compile_descriptor_set
from spark_consumer.value_limits import ValueLimits

PROTO2 = """
syntax = "proto2";
package rows;
import "google/protobuf/timestamp.proto";

message Reading {
  optional string device = 1;
  repeated int64 xs = 2 [packed = true];
  map<string, string> tags = 3;
  optional google.protobuf.Timestamp at = 4;
  optional Inner inner = 5;
  optional Unit unit = 6;
  repeated string names = 7;
}
message Inner { optional string note = 1; repeated Inner2 more = 2; }
message Inner2 { optional sint64 n = 1; }
enum Unit { C = 0; F = 1; }
"""
SCHEMA_ID = 3


@functools.cache
def descriptors(proto: str = PROTO2) -> bytes:
    return compile_descriptor_set("rows.proto", {"rows.proto": proto})


def reading(**fields: Any) -> bytes:
    message = message_descriptor(file_descriptor(descriptors(), "rows.proto"), (0,))
    assert message is not None
    return bytes(message_factory.GetMessageClass(message)(**fields).SerializeToString())


def decoder(limits: ValueLimits | None = None) -> FramedDecoder:
    return FramedDecoder(descriptors(), "rows.proto", frozenset({SCHEMA_ID}), (0,), limits)


def framed(body: bytes) -> bytes:
    return framing.frame(SCHEMA_ID, body, (0,))


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes([*out, n])


def length_delimited(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


GOOD = reading(
    device="d",
    xs=[1, 2],
    tags={"k": "v"},
    at={"seconds": 2},
    inner={"note": "n", "more": [{"n": -3}]},
    unit=1,
)


def test_an_ordinary_value_decodes_to_its_row() -> None:
    assert decoder()(framed(GOOD)) == {
        "device": "d",
        "xs": [1, 2],
        "tags": {"k": "v"},
        "at": dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.UTC),
        "inner": {"note": "n", "more": [{"n": -3}]},
        "unit": "F",
        "names": [],
    }


def test_a_string_that_is_not_utf8_does_not_decode_in_proto2_either() -> None:
    """proto3's parser refuses it; proto2's hands the bytes over, which are no STRING."""
    assert decoder()(framed(length_delimited(1, b"\xff\xfe"))) is None
    assert decoder()(framed(length_delimited(7, b"ok") + length_delimited(7, b"\xff"))) is None
    assert (
        decoder()(framed(length_delimited(3, length_delimited(1, b"\xff") + length_delimited(2, b"v"))))
        is None
    )


@pytest.mark.parametrize(
    ("seconds", "nanos"),
    [(1 << 40, 0), (-(1 << 40), 0), (253_402_300_800, 0), (0, -1), (0, 1_000_000_000)],
)
def test_a_timestamp_outside_its_range_does_not_decode(seconds: int, nanos: int) -> None:
    """Before the range check, year 36,812 raised OverflowError in the UDF: a failed query."""
    assert decoder()(framed(reading(at={"seconds": seconds, "nanos": nanos}))) is None


def test_the_ends_of_the_timestamp_range_decode() -> None:
    last = decoder()(framed(reading(at={"seconds": 253_402_300_799, "nanos": 999_999_999})))
    first = decoder()(framed(reading(at={"seconds": -62_135_596_800})))
    assert last is not None
    assert first is not None
    assert last["at"] == dt.datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=dt.UTC)
    assert first["at"] == dt.datetime(1, 1, 1, tzinfo=dt.UTC)


def test_repeated_items_and_map_entries_are_bounded_per_value_in_all() -> None:
    three = ValueLimits(max_items=3)
    assert decoder(three)(framed(reading(xs=[1, 2, 3]))) is not None
    assert decoder(three)(framed(reading(xs=[1, 2, 3, 4]))) is None
    assert decoder(three)(framed(reading(xs=[1, 2], tags={"a": "1", "b": "2"}))) is None
    assert decoder(three)(framed(reading(inner={"more": [{"n": 1}] * 2}, names=["a", "b"]))) is None


def test_a_value_above_max_bytes_does_not_decode() -> None:
    value = framed(GOOD)
    assert decoder(ValueLimits(max_bytes=len(value)))(value) is not None
    assert decoder(ValueLimits(max_bytes=len(value) - 1))(value) is None


def _nested(depth: int) -> str:
    messages = [f"message M{i} {{ optional M{i + 1} m = 1; optional string s = 2; }}" for i in range(depth)]
    return "\n".join(
        ['syntax = "proto2"; package deep;', *messages, f"message M{depth} {{ optional string s = 2; }}"]
    )


def test_messages_nested_deeper_than_the_runtime_parses_are_refused_at_plan_time() -> None:
    for depth, refused in ((MAX_DEPTH, False), (MAX_DEPTH + 1, True)):
        deep = compile_descriptor_set("deep.proto", {"deep.proto": _nested(depth)})
        message = message_descriptor(file_descriptor(deep, "deep.proto"), (0,))
        assert message is not None
        if refused:
            with pytest.raises(UsageError, match=rf"deep\.M0 nests messages more than {MAX_DEPTH} deep"):
                struct_type(message)
        else:
            struct_type(message)


def test_bodies_nested_past_the_runtimes_limit_do_not_decode() -> None:
    deep = compile_descriptor_set("deep.proto", {"deep.proto": _nested(MAX_DEPTH + 10)})
    decode = FramedDecoder(deep, "deep.proto", frozenset({SCHEMA_ID}))

    def body(depth: int) -> bytes:
        inner = length_delimited(2, b"x")
        for _ in range(depth):
            inner = length_delimited(1, inner)
        return inner

    assert decode(framed(body(MAX_DEPTH))) is not None
    assert decode(framed(body(MAX_DEPTH + 1))) is None
    group = varint(100 << 3 | 3)  # an unknown field's start-group tag, nested
    assert decode(framed(group * 10_000 + varint(100 << 3 | 4) * 10_000)) is None


# --- mutated bodies ------------------------------------------------------------------------------

FIELDS = set(struct_type(message_descriptor(file_descriptor(descriptors(), "rows.proto"), (0,))).fieldNames())  # type: ignore[arg-type]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """The ordinary body, its framing included, cut, spliced, with bytes flipped or inserted."""
    value = bytearray(framed(GOOD))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(value)))
        action = draw(st.sampled_from(["flip", "insert", "delete", "cut", "varint"]))
        if action == "flip" and at < len(value):
            value[at] ^= draw(st.integers(1, 255))
        elif action == "insert":
            value[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif action == "delete":
            del value[at : at + draw(st.integers(1, 4))]
        elif action == "cut":
            del value[at:]
        else:  # a huge length, count or tag
            value[at:at] = varint(draw(st.sampled_from([1 << 31, 1 << 62, (1 << 64) - 1, 1 << 35])))
    return bytes(value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=mutated() | st.binary(max_size=64))
def test_any_mutated_value_gives_a_row_of_the_type_or_none_quickly(value: bytes) -> None:
    started = time.monotonic()
    row = decoder(ValueLimits(max_bytes=1 << 16, max_items=1 << 10))(value)
    assert time.monotonic() - started < 1.0
    assert row is None or set(row) == FIELDS
