"""Fuzz campaign for the Protobuf plan: ``python -m testkit.fuzz.protobuf_plan --inputs N``.

It feeds :func:`draw_input`: bodies of three schemas (:data:`SCHEMAS`: proto3 with every scalar
type, packed and unpacked repeats, a map, a oneof on the path, ``optional``, Timestamps and a
message that contains itself; proto2 with ``required``, defaults and unchecked strings; editions
with implicit presence and a string without UTF-8 checks), written at the wire level from their
descriptors — fields in any order and repeated, on their own wire type or another, packed runs,
unknown fields and groups, varints overlong or of ten bytes, strings that are not UTF-8, hostile
tags (field 0, wire types 6 and 7, stray end-groups) — then mutated byte by byte or cut short,
or nested around the runtime's depth limit. Each body, with a path and unit drawn, is judged
three ways that must agree: today's reader (``ProtobufTimeReader``: the runtime's ``FromString``
and the walk), the specification (``timesync_wire.formats.protobuf_plan``) and its C twin
(verdict, and what the walk read).

Inputs are drawn by plain functions of a seeded ``random.Random``, as in :mod:`.json`: input n
of a run is seed ``--seed + n``. Progress is a line per 10 % (in place on a terminal); a summary
ends the run, and a disagreement, or an input whose checks take over 2 s, stops it, naming the
seed and the input.
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from sidecar.formats import timevalues
from sidecar.formats.protobuf import ProtobufTimeReader, protobuf_time_reader
from sidecar.registry.protoc import MAIN_NAME, compile_proto
from testkit.fuzz.json import MAX_CALL_S, progress_printer
from timesync_wire.formats.protobuf_compile import compile_plan
from timesync_wire.formats.protobuf_plan import INVALID, ProtobufTimePlan, Unit, WireError, walk

PROTO3 = """syntax = "proto3";
package wire;
import "google/protobuf/timestamp.proto";
message Event {
  string id = 1; int32 i32 = 2; int64 i64 = 3; uint32 u32 = 4; uint64 u64 = 5; sint32 s32 = 6;
  sint64 s64 = 7; fixed32 f32 = 8; fixed64 f64 = 9; sfixed32 sf32 = 10; sfixed64 sf64 = 11;
  double d = 12; float f = 13; bool flag = 14; bytes raw = 15; Kind kind = 16;
  repeated int64 nums = 17; repeated fixed32 fixeds = 18 [packed = false]; repeated string tags = 19;
  repeated Meta metas = 20; map<string, Meta> by_name = 21; Meta meta = 22;
  oneof choice { Meta picked = 23; int64 other_ms = 24; string other_s = 25; }
  optional int64 maybe_ms = 26; google.protobuf.Timestamp at = 27; Event child = 28;
  repeated double ds = 29; int64 far = 1000;
  enum Kind { K0 = 0; K1 = 1; }
  message Meta {
    string source = 1; int64 ts = 2; google.protobuf.Timestamp at = 3; double ts_d = 4;
    string ts_s = 5; Event back = 6; sint64 ts_z = 7; uint32 ts_u32 = 8;
  }
}
"""
PROTO2 = """syntax = "proto2";
package wire2;
message Old {
  required int64 ts = 1; optional string text = 2; optional Inner inner = 3;
  repeated int32 packed = 4 [packed = true]; optional int64 dflt = 5 [default = 7]; optional E e = 6;
  message Inner { optional int64 ts = 1; optional string ts_s = 2; }
  enum E { A = 0; B = 1; }
}
"""
EDITIONS = """edition = "2023";
package wire3;
message New {
  int64 ts = 1 [features.field_presence = IMPLICIT]; int64 ts_p = 2;
  string s_none = 3 [features.utf8_validation = NONE]; New sub = 4; string s = 5;
}
"""
#: schema name → (its text, the paths drawn in it)
SCHEMAS: dict[str, tuple[str, tuple[tuple[str, ...], ...]]] = {
    "proto3": (
        PROTO3,
        (
            ("meta", "ts"), ("meta", "at"), ("at",), ("picked", "ts"), ("other_ms",), ("maybe_ms",), ("i32",),
            ("u64",), ("s32",), ("sf32",), ("d",), ("f",), ("id",), ("meta", "ts_s"), ("meta", "ts_z"),
            ("child", "meta", "ts"), ("far",), ("u32",), ("f64",), ("s64",), ("i64",), ("meta", "ts_d"),
        ),
    ),
    "proto2": (PROTO2, (("ts",), ("dflt",), ("inner", "ts"), ("inner", "ts_s"), ("text",))),
    "editions": (EDITIONS, (("ts",), ("ts_p",), ("s_none",), ("sub", "ts"), ("s",))),
}  # fmt: skip
UNITS: tuple[Unit, ...] = ("ms", "s", "us", "iso")
EDGE_INTS = (
    0, 1, 5, 999, 1000, 1_700_000_000, 1_700_000_000_000, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1,
    2**63, 2**64 - 1, 9_223_372_036_854_775, 9_223_372_036_854_776, 999_999_999, 1_000_000_000,
)  # fmt: skip
TEXTS = ("1700000000000", " 12 ", "2024-05-01T12:00:00Z", "2024-05-01T12:00:00", "x", "", "1e3", "-1")
_VARINT_TYPES = {3, 4, 5, 8, 13, 14, 17, 18}
_I32_TYPES, _I64_TYPES = {2, 7, 15}, {1, 6, 16}
_MESSAGE, _STRING, _BYTES = 11, 9, 12


def varint(value: int, rng: random.Random | None = None) -> bytes:
    """``value`` (below 2^64) as a varint; with ``rng``, now and then overlong or with a 10th
    byte above 1 (upb drops the bits past 64)."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    if rng is not None and rng.random() < 0.1 and len(out) < 10:
        out[-1] |= 0x80
        out += b"\x80" * rng.randrange(0, 9 - len(out) + 1) + bytes([rng.randrange(0x80)])
    return bytes(out[:10])


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def scalar(rng: random.Random, wire: int) -> bytes:
    """A value of ``wire`` (0, 1, 2 or 5) with no meaning."""
    if wire == 0:
        return varint(rng.choice((*EDGE_INTS, rng.randrange(2**64))), rng)
    if wire in (1, 5):
        return rng.randbytes(8 if wire == 1 else 4)
    data = rng.randbytes(rng.randrange(6))
    return varint(len(data)) + data


def field(rng: random.Random, f: Any, depth: int) -> bytes:
    """Field ``f`` (a runtime ``FieldDescriptor``): its own encoding mostly, a packed run for
    repeated numbers, or another wire type."""
    if rng.random() < 0.08:
        wire = rng.choice((0, 1, 2, 5))
        return tag(f.number, wire) + scalar(rng, wire)
    if f.type == _MESSAGE:
        inner = body(rng, f.message_type, depth - 1) if depth > 0 else b""
        return tag(f.number, 2) + varint(len(inner)) + inner
    if f.type in (_STRING, _BYTES):
        text = (
            rng.choice(TEXTS) if rng.random() < 0.6 else "".join(chr(rng.randrange(0x3000)) for _ in range(3))
        )
        data = text.encode() if rng.random() < 0.9 else rng.randbytes(3)
        return tag(f.number, 2) + varint(len(data)) + data
    wire = 0 if f.type in _VARINT_TYPES else 5 if f.type in _I32_TYPES else 1
    if f.is_repeated and rng.random() < 0.4:
        run = b"".join(scalar(rng, wire) for _ in range(rng.randrange(4)))
        run = run[: -1 if rng.random() < 0.1 else None]
        return tag(f.number, 2) + varint(len(run)) + run
    return tag(f.number, wire) + scalar(rng, wire)


def unknown(rng: random.Random, depth: int) -> bytes:
    """A field no schema here declares, groups included (now and then with the wrong end)."""
    number = rng.choice((40, 41, 99, 2**29 - 1))
    wire = rng.choice((0, 1, 2, 5, 3))
    if wire != 3:
        return tag(number, wire) + scalar(rng, wire)
    inside = b"".join(unknown(rng, depth - 1) for _ in range(rng.randrange(3) if depth > 0 else 0))
    return tag(number, 3) + inside + tag(number if rng.random() < 0.9 else number + 1, 4)


HOSTILE = (
    b"\x00\x01", b"\x02\x00", b"\x0e", b"\x0f", b"\xa4\x01", b"\x08\x80", b"\x88\x80\x80\x80\x80\x00\x01",
    b"\xf8\xff\xff\xff\x1f\x01", b"\x12\x82\x80\x80\x80\x80\x00ab", b"\x08" + b"\xff" * 10 + b"\x01",
    b"\xa3\x01\x00\x01\xa4\x01", b"\xa3\x01\x03\x04\xa4\x01",
)  # fmt: skip


def body(rng: random.Random, desc: Any, depth: int) -> bytes:
    """A body of message ``desc``: a few fields, known or not, in any order."""
    out = bytearray()
    for _ in range(rng.randrange(7)):
        roll = rng.random()
        if roll < 0.75 and desc.fields:
            out += field(rng, rng.choice(desc.fields), depth)
        elif roll < 0.95:
            out += unknown(rng, 2)
        else:
            out += rng.choice(HOSTILE)
    return bytes(out)


def deep(rng: random.Random, desc: Any, path: Sequence[str]) -> bytes:
    """Messages (through a field of the message's own type) or unknown groups nested around
    the runtime's limit of 100."""
    depth = rng.randrange(95, 106)
    if rng.random() < 0.5:
        return tag(40, 3) * depth + tag(40, 4) * depth
    own = [f for f in desc.fields if f.type == _MESSAGE and f.message_type is desc]
    inner = body(rng, desc, 1)
    for _ in range(depth if own else 0):
        inner = tag(own[0].number, 2) + varint(len(inner)) + inner
    return inner


def mutated(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        at, what = rng.randrange(len(out) + 1), rng.randrange(4)
        if what == 0 and at < len(out):
            out[at] = rng.randrange(256)
        elif what == 1:
            out.insert(at, rng.choice((0x00, 0x80, 0xFF, 0x7F, 0x08, 0x12, 0x1A, rng.randrange(256))))
        elif what == 2 and at < len(out):
            del out[at]
        elif what == 3 and rng.random() < 0.3:
            del out[at:]
    return bytes(out)


@functools.cache
def compiled(schema: str) -> bytes:
    return compile_proto(SCHEMAS[schema][0], {})


@functools.cache
def reader(schema: str, path: tuple[str, ...], unit: Unit) -> ProtobufTimeReader:
    return protobuf_time_reader(compiled(schema), MAIN_NAME, (0,), path, unit)


@functools.cache
def plan(schema: str, path: tuple[str, ...], unit: Unit) -> ProtobufTimePlan:
    return ProtobufTimePlan(compile_plan(reader(schema, path, unit)._cls.DESCRIPTOR, path), unit, timevalues)


def draw_input(rng: random.Random) -> tuple[str, tuple[str, ...], Unit, bytes]:
    """A schema, a path in it, a unit and a body (see the module docstring)."""
    schema = rng.choice(tuple(SCHEMAS))
    path = rng.choice(SCHEMAS[schema][1])
    desc = reader(schema, path, "ms")._cls.DESCRIPTOR
    data = body(rng, desc, 3)
    roll = rng.random()
    if roll < 0.3:
        data = mutated(rng, data)
    elif roll < 0.35:
        data = deep(rng, desc, path)
    elif roll < 0.37:
        data = rng.randbytes(rng.randrange(30))
    return schema, path, rng.choice(UNITS), data


def today(schema: str, path: tuple[str, ...], unit: Unit, data: bytes) -> int:
    """Today's verdict: the reader's time, INVALID for anything it raises."""
    try:
        return reader(schema, path, unit).millis(data)
    except Exception:
        return INVALID


def check(schema: str, path: tuple[str, ...], unit: Unit, data: bytes) -> int:
    """Assert that today's reader, the specification and the C plan agree on ``data``; the
    verdict."""
    expected = today(schema, path, unit, data)
    timed = plan(schema, path, unit)
    assert timed.verdict(data) == expected, (schema, path, unit, data, timed.explain(data))
    if timed.native is not None:
        try:
            read = walk(timed.plan, data)
            spec: tuple[object, ...] | None = (read.present, read.leaf, read.seconds, read.nanos)
        except WireError:
            spec = None
        assert timed.native.walk_reading(data) == spec, (schema, path, data)
        assert timed.native.millis(data) == expected, (schema, path, unit, data)
    return expected


def campaign(count: int, seed: int, out: Callable[[str, bool], None]) -> int:
    """Run ``count`` inputs (seeds ``seed``, ``seed + 1``, …) through :func:`check`; 0, or 1 at
    the first disagreement, named with its seed."""
    valid, started, step = 0, time.monotonic(), max(1, count // 10)
    for n in range(count):
        case = draw_input(random.Random(seed + n))
        checked = time.thread_time()  # CPU time: a loaded machine's scheduling is no finding
        try:
            valid += check(*case) != INVALID
            spent = time.thread_time() - checked
            assert spent < MAX_CALL_S, (
                f"the checks took {spent:.2f} s (bound {MAX_CALL_S} s): unbounded work?"
            )
        except AssertionError as e:
            out(f"DISAGREEMENT at seed {seed + n}: {case!r}: {e}", True)
            return 1
        if (n + 1) % step == 0:
            out(f"{n + 1}/{count} inputs, {time.monotonic() - started:.0f} s", False)
    took = time.monotonic() - started
    out(
        f"{count} inputs (seeds {seed}..{seed + count - 1}) in {took:.0f} s: all agree, {valid} with a time",
        True,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testkit.fuzz.protobuf_plan", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--inputs", type=int, default=100_000, help="how many inputs (default 100000)")
    parser.add_argument("--seed", type=int, default=0, help="the first input's seed (default 0)")
    args = parser.parse_args(argv)
    return campaign(args.inputs, args.seed, progress_printer(sys.stdout.isatty()))


if __name__ == "__main__":
    sys.exit(main())
