"""The Protobuf plan gives today's ``protobuf:`` verdicts without the runtime.

Three layers, each held to the next: what the runtime's parse refuses (measured here, so a new
protobuf that changes one fails this file first), the specification (``protobuf_plan.walk`` and
``ProtobufTimePlan``) and its C twin (``_protobuf_plan.CompiledPlan``), on bodies ordinary and
hostile. The long campaign is ``python -m testkit.fuzz.protobuf_plan --inputs N``.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.formats import timevalues
from sidecar.formats.framing import frame
from sidecar.formats.protobuf import protobuf_time_reader
from sidecar.registry.protoc import MAIN_NAME, compile_proto
from testkit.fuzz.protobuf_plan import check, draw_input, plan, reader, tag, today, varint
from timesync_wire.formats import protobuf_plan
from timesync_wire.formats.protobuf_compile import NoPlan, compile_plan
from timesync_wire.formats.protobuf_plan import (
    A_BYTES,
    A_UTF8,
    INVALID,
    MAX_DEPTH,
    OTHER,
    ProtobufTimePlan,
    WireError,
    walk,
)


def message(number: int, inner: bytes) -> bytes:
    return tag(number, 2) + varint(len(inner)) + inner


GROUP, END = tag(40, 3), tag(40, 4)
#: (what it is, a body of wire.Event, whether the runtime parses it); i64 is field 3, id 1
#: (a proto3 string), raw 15 (bytes), nums 17 (repeated int64), fixeds 18 (repeated fixed32),
#: ds 29 (repeated double), meta 22 (a message); 40 is no field.
WIRE_RULES = [
    ("varint of 10 bytes, 10th byte 1", b"\x18" + b"\xff" * 9 + b"\x01", True),
    ("varint of 10 bytes, 10th byte above 1 (bits past 64 dropped)", b"\x18" + b"\xff" * 9 + b"\x7f", True),
    ("varint of 11 bytes", b"\x18" + b"\xff" * 10 + b"\x01", False),
    ("overlong varint of 10 bytes", b"\x18" + b"\x80" * 9 + b"\x00", True),
    ("unknown varint of 11 bytes", tag(40, 0) + b"\x80" * 10 + b"\x00", False),
    ("field number 0", b"\x00\x01", False),
    ("field number 0, length-delimited", b"\x02\x00", False),
    ("tag of 5 bytes", b"\x98\x80\x80\x80\x00\x05", True),
    ("tag of 6 bytes", b"\x98\x80\x80\x80\x80\x00\x05", False),
    ("tag below 2^32", b"\xf8\xff\xff\xff\x0f\x05", True),
    ("tag of 2^32 or more", b"\xf8\xff\xff\xff\x1f\x05", False),
    ("wire type 6", b"\x1e", False),
    ("wire type 7", b"\x1f", False),
    ("end-group with no group", END, False),
    ("unknown group", GROUP + tag(41, 0) + b"\x01" + message(42, b"\xff") + END, True),
    ("unknown group, wrong end", GROUP + tag(41, 4), False),
    ("unknown group, no end", GROUP + tag(41, 0) + b"\x01", False),
    ("a known scalar field as a group", tag(3, 3) + tag(3, 4), True),
    ("field 0 inside a group", GROUP + b"\x00\x01\x02\x00\x05\x00\x00\x00\x00" + END, True),
    ("a group of field 0 inside a group", GROUP + b"\x03\x04" + END, True),
    ("end-group of field 0 inside a group", GROUP + b"\x04" + END, False),
    ("length past the end", b"\x0a\x05ab", False),
    ("length of 5 bytes", b"\x0a\x82\x80\x80\x80\x00ab", True),
    ("length of 6 bytes", b"\x0a\x82\x80\x80\x80\x80\x00ab", False),
    ("length of 2^28 + 2", b"\x0a\x82\x80\x80\x80\x01ab", False),
    ("proto3 string not UTF-8", b"\x0a\x02\xc3\x28", False),
    ("proto3 string with a surrogate", b"\x0a\x03\xed\xa0\x80", False),
    ("bytes not UTF-8", tag(15, 2) + b"\x02\xc3\x28", True),
    ("unknown length-delimited not UTF-8", message(40, b"\xc3\x28"), True),
    ("packed varints", message(17, b"\x01\x02"), True),
    ("packed varints cut short", message(17, b"\x01\x80"), False),
    ("packed run on a field declared unpacked", message(18, b"\x01\x00\x00\x00"), True),
    ("packed fixed32 of 5 bytes", message(18, b"\x01\x00\x00\x00\x00"), False),
    ("packed doubles of 7 bytes", message(29, b"\x00" * 7), False),
    ("unpacked fixed32", tag(18, 5) + b"\x01\x00\x00\x00", True),
    ("int64 on the length-delimited wire type (unknown)", message(3, b"\x05"), True),
    ("int64 as fixed32, cut short", tag(3, 5) + b"\x01\x00\x00", False),
    ("a varint crossing its message's end", message(22, b"\x10\x80") + b"\x01", False),
    ("an end-group inside a message", message(22, END), False),
    ("empty", b"", True),
]


def nested(depth: int) -> bytes:
    """``depth`` messages inside the body, through ``child`` (field 28, an Event)."""
    body = b""
    for _ in range(depth):
        body = message(28, body)
    return body


DEPTH_RULES = [
    ("messages at the limit", nested(MAX_DEPTH), True),
    ("messages past it", nested(MAX_DEPTH + 1), False),
    ("groups at the limit", GROUP * MAX_DEPTH + END * MAX_DEPTH, True),
    ("groups past it", GROUP * (MAX_DEPTH + 1) + END * (MAX_DEPTH + 1), False),
    ("a message and groups at the limit", message(28, GROUP * (MAX_DEPTH - 1) + END * (MAX_DEPTH - 1)), True),
    ("a message and groups past it", message(28, GROUP * MAX_DEPTH + END * MAX_DEPTH), False),
]


@pytest.mark.parametrize(
    ("what", "body", "parses"),
    WIRE_RULES + DEPTH_RULES,
    ids=[what for what, _, _ in WIRE_RULES + DEPTH_RULES],
)
def test_a_body_walks_exactly_when_the_runtime_parses_it(what: str, body: bytes, parses: bool) -> None:
    event = reader("proto3", ("i64",), "ms")._cls
    try:
        event.FromString(body)
        runtime = True
    except Exception:
        runtime = False
    assert runtime is parses, f"{what}: the runtime changed; measure again and update protobuf_plan's rules"
    timed = plan("proto3", ("i64",), "ms")
    try:
        walk(timed.plan, body)
        assert parses, what
    except WireError:
        assert not parses, what
    if timed.native is not None:
        assert (timed.native.walk_reading(body) is not None) is parses, what


META, PICKED, OTHER_MS, AT = 22, 23, 24, 27


def at(seconds: int, nanos: int) -> bytes:
    return message(AT, tag(1, 0) + varint(seconds % 2**64) + tag(2, 0) + varint(nanos % 2**64))


@pytest.mark.parametrize(
    ("schema", "path", "body", "expected"),
    [
        ("proto3", ("meta", "ts"), message(META, b"\x10\x05") + message(META, b"\x0a\x01x"), 5),  # merged
        ("proto3", ("meta", "ts"), message(META, b"\x10\x05") + message(META, b"\x10\x07"), 7),
        ("proto3", ("meta", "ts"), message(META, b""), 0),  # proto3: an unset int64 reads 0
        ("proto3", ("meta", "ts"), message(1, b"x"), "field meta.ts is not set (at meta)"),
        ("proto3", ("picked", "ts"), message(PICKED, b"\x10\x05") + tag(OTHER_MS, 0) + b"\x01", "at picked"),
        ("proto3", ("picked", "ts"), message(PICKED, b"\x10\x05") + tag(OTHER_MS, 5) + b"\0\0\0\0", 5),
        (
            "proto3",
            ("picked", "ts"),
            message(PICKED, b"\x10\x05") + tag(OTHER_MS, 0) + b"\x01" + message(PICKED, b""),
            0,
        ),
        ("proto3", ("other_ms",), tag(OTHER_MS, 0) + b"\x09" + message(PICKED, b""), "at other_ms"),
        ("proto3", ("maybe_ms",), b"", "field maybe_ms is not set (at maybe_ms)"),
        ("proto3", ("maybe_ms",), tag(26, 0) + b"\x00", 0),
        ("proto3", ("at",), at(1_700_000_000, 123_456_789), 1_700_000_000_123),
        ("proto3", ("at",), at(1_700_000_000, 10**9), "nanos 1000000000 outside"),
        ("proto3", ("at",), at(-1, 0), "before 1970"),
        ("proto3", ("at",), at(9_223_372_036_854_775, 807_000_000), 2**63 - 1),
        ("proto3", ("at",), at(9_223_372_036_854_775, 808_000_000), "beyond Kafka's timestamp range"),
        ("proto3", ("s32",), tag(6, 0) + b"\x03", "is negative"),  # zigzag 3 is -2
        ("proto3", ("i32",), tag(2, 0) + varint(2**32 + 7), 7),  # an int32 keeps its low 32 bits
        ("proto2", ("ts",), b"", "field ts is not set (at ts)"),  # required, and parsed all the same
        ("proto2", ("dflt",), b"", "field dflt is not set (at dflt)"),  # a default is no presence
        ("proto2", ("inner", "ts_s"), message(3, message(2, b"\xc3\x28")), "is not a number: b'\\xc3('"),
        ("proto2", ("text",), message(2, b"1700000000000"), 1_700_000_000_000),
        ("editions", ("ts",), b"", 0),  # implicit presence
        ("editions", ("ts_p",), b"", "field ts_p is not set (at ts_p)"),
        ("editions", ("s_none",), message(3, b"\xff"), "is not a number: b'\\xff'"),  # not checked
        (
            "editions",
            ("s",),
            message(5, b"\xff"),
            "the body does not parse: a string field that is not UTF-8",
        ),
    ],
)
def test_the_path_reads_as_todays_reader_reads_it(
    schema: str, path: tuple[str, ...], body: bytes, expected: int | str
) -> None:
    timed = plan(schema, path, "ms")
    verdict = expected if isinstance(expected, int) else INVALID
    assert timed.verdict(body) == verdict == today(schema, path, "ms", body)
    assert timed.explain(body) == "valid" if isinstance(expected, int) else expected in timed.explain(body)
    if timed.native is not None:
        assert timed.native.millis(body) == verdict


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_the_specification_and_the_c_plan_give_todays_verdict(seed: int) -> None:
    """Bodies drawn as the campaign draws them (testkit.fuzz.protobuf_plan), hostile ones too."""
    check(*draw_input(random.Random(seed)))


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=24), unit=st.sampled_from(("ms", "s", "us", "iso")))
def test_random_bytes_get_todays_verdict(data: bytes, unit: protobuf_plan.Unit) -> None:
    check("proto3", ("meta", "ts"), unit, data)


def test_whether_a_string_is_checked_for_utf8_is_asked_of_the_runtime() -> None:
    actions = {
        (schema, name): plan(schema, path, "ms").plan.types[0][number].action
        for schema, path, name, number in [
            ("proto3", ("id",), "id", 1),
            ("proto3", ("id",), "raw", 15),
            ("proto2", ("text",), "text", 2),
            ("editions", ("s",), "s", 5),
            ("editions", ("s",), "s_none", 3),
        ]
    }
    assert actions == {
        ("proto3", "id"): A_UTF8,
        ("proto3", "raw"): A_BYTES,
        ("proto2", "text"): A_BYTES,
        ("editions", "s"): A_UTF8,
        ("editions", "s_none"): A_BYTES,
    }


NO_PLAN = {
    "group": "syntax = 'proto2'; message G { optional group Part = 1 { optional int64 x = 2; } "
    "optional int64 ts = 3; }",
    "DELIMITED": "edition = '2023'; message D { S s = 1 [features.message_encoding = DELIMITED]; "
    "int64 ts = 2; } message S {}",
    "extensions": "syntax = 'proto2'; message E { optional int64 ts = 1; extensions 9 to 20; } "
    "extend E { optional int64 x = 9; }",
    "closed enum": "syntax = 'proto2'; message C { oneof o { int64 ts = 1; K k = 2; } enum K { A = 0; } }",
    "message-set": "syntax = 'proto2'; message O { optional M m = 1; optional int64 ts = 2; } "
    "message M { option message_set_wire_format = true; extensions 4 to max; }",
    "not the well-known one": "syntax = 'proto2'; package google.protobuf; "
    "message O { optional Timestamp ts = 1; } "
    "message Timestamp { optional int64 seconds = 5 [default = 9]; optional int32 nanos = 7; }",
}


@pytest.mark.parametrize("why", NO_PLAN)
def test_a_schema_a_plan_cannot_read_as_the_runtime_does_has_no_plan(why: str) -> None:
    kept = protobuf_time_reader(
        compile_proto(NO_PLAN[why].replace("'", '"'), {}), MAIN_NAME, (0,), ["ts"], "ms"
    )
    with pytest.raises(NoPlan, match="group" if why == "DELIMITED" else why):
        compile_plan(kept._cls.DESCRIPTOR, ["ts"])


def test_a_batch_reads_the_values_framed_for_the_plan_and_leaves_the_others() -> None:
    timed = plan("proto3", ("meta", "ts"), "ms")
    body = message(META, b"\x10\x05")
    values = [frame(7, body, (0,)), frame(8, body, (0,)), frame(7, body, (1,)), None, frame(7, b"\x0e", (0,))]
    expected = [5, OTHER, OTHER, OTHER, INVALID]
    prefix = frame(7, b"", (0,))
    assert timed.millis_all(values, prefix) == expected
    spec_only = ProtobufTimePlan(timed.plan, "ms", timevalues)
    spec_only.native = None
    assert spec_only.millis_all(values, prefix) == expected


def test_without_the_c_extension_the_specification_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protobuf_plan, "CompiledPlan", None)
    timed = ProtobufTimePlan(plan("proto3", ("at",), "ms").plan, "ms", timevalues)
    assert timed.native is None
    assert timed.millis_all([b"\x00" + at(2, 5_000_000)], b"\x00") == [2005]


def test_every_reason_is_one_line() -> None:
    timed = plan("proto3", ("meta", "ts"), "iso")
    for body in (
        b"",
        b"\x0e",
        message(META, b"\x10\x05"),
        nested(MAX_DEPTH + 1),
        message(META, b"\x0a\x01\xff"),
    ):
        assert "\n" not in timed.explain(body)
    assert timed.explain(message(META, b"\x10\x05")) == "field meta.ts is not an ISO-8601 string: 5"
