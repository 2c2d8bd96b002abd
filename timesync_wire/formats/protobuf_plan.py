"""Event time from a Protobuf body by a plan compiled from descriptors, without the runtime.

``protobuf:meta.ts`` today (``sidecar.formats.protobuf.ProtobufTimeReader``) parses every body
with the protobuf runtime (upb) and walks the message. A :class:`Plan`, compiled once per
(schema, message) from descriptors (:mod:`.protobuf_compile`), holds what that parse needs to
know: for each message type the body can reach, its fields' numbers and how each is read; and
the path. :func:`walk` here is the specification of running it; ``_protobuf_plan.pyx`` runs the
same walk in C, held to this one by a differential test, as a test against the runtime holds
this one to today's reader (``tests/unit/wire/``).

**The walk checks what the runtime's parse checks**, because a body the runtime refuses is an
invalid time today. Measured on protobuf 7.36 (upb), each rule kept by a test:

- varints: at most 10 bytes, the 10th without a continuation bit and its bits past 64 dropped,
  not refused (upb takes a 10th byte above 1, as Java's ``CodedInputStream`` does and Go's
  ``protowire`` does not); a tag at most 5 bytes and below 2^32; a length at most 5 bytes and
  within its message; field number 0 is an error except inside an unknown group; wire types 6
  and 7 are errors; nothing may cross the end of its message;
- every known field is read wherever and however often it comes: strings the runtime validates
  must be UTF-8, messages and map entries are parsed in turn, packed runs must hold whole values;
  a field on a wire type not its own is an unknown field, as the runtime treats it;
- unknown fields are skipped by wire type, groups included (the end tag must match; inside a
  group any field number goes); messages and groups nest at most :data:`MAX_DEPTH` deep.

**The path** is today's: a message on the way that is not set is an invalid time, and so is a
scalar leaf with presence that is not set; one without presence reads as its zero. Of a field
seen several times the last value wins and messages merge; a oneof member seen after a path
field clears it. ``google.protobuf.Timestamp`` is read as seconds and nanos.

**Where the verdicts differ from today's**: nowhere a plan exists. What a plan cannot match
exactly has none (:class:`~.protobuf_compile.NoPlan`: groups, message sets, extensions, a oneof
shared with a closed enum; today's reader stays for those). The rules are upb's, the runtime's
default; under ``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python`` they were not measured. Bodies
above 2 GiB, past upb's range, are not considered. Reasons are this module's own (they name
the byte where the body stops parsing).

**The time rules are not copied here** (see :mod:`.json_scan`): the leaf goes to ``rules``. The
C twin converts integers and Timestamps itself, by the same rules, and hands doubles, floats and
strings to :meth:`ProtobufTimePlan.convert`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

try:
    from timesync_wire.formats._protobuf_plan import CompiledPlan
except ImportError:  # no C compiler at install: the specification runs, slower
    CompiledPlan = None  # type: ignore[assignment,misc]

Unit = Literal["ms", "s", "us", "iso"]
UNITS: Final[tuple[Unit, ...]] = ("ms", "s", "us", "iso")
INVALID: Final = -1
#: :meth:`ProtobufTimePlan.millis_all`: the value is not framed with the plan's prefix.
OTHER: Final = -2
#: upb's default depth: 100 messages or groups inside the body parse, the 101st is an error.
MAX_DEPTH: Final = 100
VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
#: How a known field is read when it comes with its own wire type.
A_VARINT, A_I64, A_I32, A_UTF8, A_BYTES, A_MESSAGE = range(6)
WIRE_OF: Final = (VARINT, I64, I32, LEN, LEN, LEN)
#: What the leaf is (the descriptor's type numbers); TIMESTAMP is a ``google.protobuf.Timestamp``.
L_DOUBLE, L_FLOAT, L_INT64, L_UINT64, L_INT32, L_FIXED64, L_FIXED32 = 1, 2, 3, 4, 5, 6, 7
L_STRING, L_UINT32, L_SFIXED32, L_SFIXED64, L_SINT32, L_SINT64, TIMESTAMP = 9, 13, 15, 16, 17, 18, 100


class TimeRules(Protocol):
    """What this module needs of the time rules: the module ``timevalues`` fits."""

    def to_millis(self, value: object, kind: Literal["plain"], unit: Unit, field: str) -> int: ...

    def seconds_nanos_to_millis(self, seconds: int, nanos: int, field: str) -> int: ...


class WireError(ValueError):
    """The body is not one the runtime parses; the message says why and at which byte."""

    def __init__(self, why: str, pos: int) -> None:
        super().__init__(f"the body does not parse: {why} at byte {pos}")


@dataclass(frozen=True, slots=True)
class Field:
    """A known field: its ``action``; ``packed`` the action of a packed run's values (-1: none);
    ``sub`` the type index of a message field (-1: none)."""

    action: int
    packed: int = -1
    sub: int = -1


@dataclass(frozen=True, slots=True)
class Step:
    """A field of the path: its ``number`` and wire type, its ``name``, whether it has
    ``presence``, and the (number, wire type) of the other members of its oneof."""

    number: int
    wire: int
    name: str
    presence: bool
    mates: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Plan:
    """The message types a body can reach (0 is the body's), the path, and the leaf's kind."""

    types: tuple[dict[int, Field], ...]
    steps: tuple[Step, ...]
    leaf: int
    field: str = field(default="")

    def ints(self) -> tuple[int, ...]:
        """The plan as ints, for the C twin: types (count, then per type its field count and
        number, action, packed, sub of each), steps (count, then number, wire, presence, mate
        count and mates of each), then the leaf."""
        out = [len(self.types)]
        for fields in self.types:
            out.append(len(fields))
            for number, f in sorted(fields.items()):
                out += (number, f.action, f.packed, f.sub)
        out.append(len(self.steps))
        for s in self.steps:
            out += (s.number, s.wire, int(s.presence), len(s.mates), *(n for mate in s.mates for n in mate))
        return (*out, self.leaf)


# -- the specification of a walk ---------------------------------------------------------------

_GROUP = -1  # the type index of an unknown group's frame: every field in it is unknown


@dataclass(frozen=True, slots=True)
class Reading:
    """What a walk read: ``present[k]`` whether the value of the path's first k parts is set (0:
    the body; the last: a Timestamp leaf), the scalar leaf's raw value (None: not seen; an int of
    its bits, or the bytes of a string), and a Timestamp's raw seconds and nanos."""

    present: tuple[bool, ...]
    leaf: int | bytes | None
    seconds: int
    nanos: int


def walk(plan: Plan, body: bytes, pos: int = 0) -> Reading:
    """Parse ``body[pos:]`` as the runtime does (:class:`WireError` where it would refuse it) and
    read the path. No recursion: ``stack`` holds each open message or group as (end, type index,
    path level or -1, group number)."""
    count = len(plan.steps)
    present = [True] + [False] * count
    leaf: int | bytes | None = None
    seconds = nanos = 0
    stack = [(len(body), 0, 0, 0)]
    while stack:
        end, tindex, level, group = stack[-1]
        if pos == end:
            if tindex == _GROUP:
                raise WireError("a group without its end", pos)
            stack.pop()
            continue
        tag, pos = _varint(body, pos, end, 5)
        number, wire = tag >> 3, tag & 7
        if tag >= 1 << 32 or wire > I32 or (number == 0 and tindex != _GROUP and wire != EGROUP):
            raise WireError(f"a tag {tag} (field {number}, wire type {wire}) the runtime refuses", pos)
        if wire == EGROUP:
            if tindex != _GROUP or number != group:
                raise WireError("an end-group tag that closes no open group", pos)
            stack.pop()
            continue
        known = plan.types[tindex].get(number) if tindex != _GROUP else None
        action = _action(known, wire)
        step = plan.steps[level] if 0 <= level < count else None
        on_path = step is not None and number == step.number and wire == step.wire
        if step is not None and (number, wire) in step.mates:  # a oneof mate clears the path field
            present[level + 1 :] = [False] * (count - level)
            leaf, seconds, nanos = None, 0, 0
        if action == A_MESSAGE or wire == SGROUP:
            if len(stack) > MAX_DEPTH:
                raise WireError(f"messages or groups nested deeper than {MAX_DEPTH}", pos)
            if wire == SGROUP:
                stack.append((end, _GROUP, -1, number))
                continue
            size, pos = _size(body, pos, end)
            assert known is not None
            stack.append((pos + size, known.sub, level + 1 if on_path else -1, 0))
            if on_path:
                present[level + 1] = True
            continue
        raw, pos = _value(body, pos, end, action, wire, known)
        if on_path and level == count - 1:
            leaf = raw
        elif level == count and plan.leaf == TIMESTAMP and wire == VARINT and number in (1, 2):
            seconds, nanos = (raw, nanos) if number == 1 else (seconds, raw)  # type: ignore[assignment]
    return Reading(tuple(present), leaf, seconds, nanos)


def _action(known: Field | None, wire: int) -> int:
    """How a field with ``wire`` is read: its action, a packed run (-2), or unknown (-1)."""
    if known is None:
        return -1
    if WIRE_OF[known.action] == wire:
        return known.action
    return -2 if known.packed >= 0 and wire == LEN else -1


def _value(
    body: bytes, pos: int, end: int, action: int, wire: int, known: Field | None
) -> tuple[int | bytes, int]:
    """Read (or step over) one value that is not a message: its raw value and the next position."""
    if wire == VARINT:
        return _varint(body, pos, end, 10)
    if wire in (I32, I64):
        width = 4 if wire == I32 else 8
        if end - pos < width:
            raise WireError("the body ends inside a fixed-width value", pos)
        return int.from_bytes(body[pos : pos + width], "little"), pos + width
    size, pos = _size(body, pos, end)
    raw = body[pos : pos + size]
    if action == A_UTF8:
        try:
            raw.decode()
        except UnicodeDecodeError:
            raise WireError("a string field that is not UTF-8", pos) from None
    elif action == -2:  # a packed run: whole values only
        assert known is not None
        _packed(raw, known.packed, pos)
    return raw, pos + size


def _packed(run: bytes, element: int, pos: int) -> None:
    if element in (A_I32, A_I64):
        if len(run) % (4 if element == A_I32 else 8):
            raise WireError("a packed run that does not hold whole values", pos)
        return
    at = 0
    while at < len(run):
        at = _varint(run, at, len(run), 10)[1]


def _varint(body: bytes, pos: int, end: int, most: int) -> tuple[int, int]:
    """The varint at ``pos`` of at most ``most`` bytes, its bits past 64 dropped as upb does."""
    value = 0
    for i in range(most):
        if pos + i >= end:
            raise WireError("the message ends inside a varint", pos + i)
        byte = body[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, pos + i + 1
    raise WireError(f"a varint longer than {most} bytes", pos)


def _size(body: bytes, pos: int, end: int) -> tuple[int, int]:
    size, pos = _varint(body, pos, end, 5)
    if size > end - pos:
        raise WireError(f"a length {size} past the end of its message", pos)
    return size, pos


# -- from what the walk read to event time -----------------------------------------------------


def leaf_value(leaf: int, raw: int | bytes | None) -> object:
    """The Python value the runtime gives for a leaf of kind ``leaf`` whose raw value is ``raw``
    (None: not set, its type's zero). A string that is not UTF-8 (proto2 does not check) comes
    back as bytes, as the runtime gives it, and no time rule accepts bytes."""
    if isinstance(raw, bytes) or (raw is None and leaf == L_STRING):
        try:
            return (raw or b"").decode()
        except UnicodeDecodeError:
            return raw
    bits = raw or 0
    if leaf in (L_DOUBLE, L_FLOAT):
        return struct.unpack(
            "<d" if leaf == L_DOUBLE else "<f", bits.to_bytes(8 if leaf == L_DOUBLE else 4, "little")
        )[0]
    if leaf in (L_INT32, L_UINT32, L_SINT32, L_FIXED32, L_SFIXED32):
        bits &= 0xFFFFFFFF
    if leaf in (L_SINT32, L_SINT64):
        return (bits >> 1) ^ -(bits & 1)
    if leaf in (L_INT32, L_SFIXED32):
        return bits - (1 << 32) if bits >> 31 else bits
    if leaf in (L_INT64, L_SFIXED64):
        return bits - (1 << 64) if bits >> 63 else bits
    return bits


class ProtobufTimePlan:
    """Event time of bodies of one message type (one schema id and message indexes), in
    ``unit``: the specification's verdicts, run in C when the extension is built (:attr:`native`)."""

    def __init__(self, plan: Plan, unit: Unit, rules: TimeRules) -> None:
        if unit not in UNITS:
            raise ValueError(f"unknown unit {unit!r}; allowed: {', '.join(UNITS)}")
        self.plan = plan
        self.unit: Unit = unit
        self.field = plan.field
        self._rules = rules
        self.native = (
            CompiledPlan(plan.ints(), UNITS.index(unit), self.convert) if CompiledPlan is not None else None
        )

    def __repr__(self) -> str:
        return f"protobuf:{self.field}:{self.unit}"

    def millis(self, value: bytes, start: int = 0) -> int:
        """Event time in ms of the body at ``value[start:]``; ``ValueError`` (one line: why)
        when it has none."""
        reading = walk(self.plan, value, start)
        for k, step in enumerate(self.plan.steps):
            message = k < len(self.plan.steps) - 1 or self.plan.leaf == TIMESTAMP
            if (not reading.present[k + 1]) if message else (step.presence and reading.leaf is None):
                raise ValueError(f"field {self.field} is not set (at {step.name})")
        if self.plan.leaf == TIMESTAMP:
            seconds, nanos = leaf_value(L_INT64, reading.seconds), leaf_value(L_INT32, reading.nanos)
            return self._rules.seconds_nanos_to_millis(seconds, nanos, self.field)  # type: ignore[arg-type]
        return self._rules.to_millis(leaf_value(self.plan.leaf, reading.leaf), "plain", self.unit, self.field)

    def convert(self, raw: int | bytes) -> int:
        """A scalar leaf's raw value in ms, or INVALID: what the C twin calls for the leaves it
        does not convert itself (doubles, floats, strings)."""
        try:
            return self._rules.to_millis(leaf_value(self.plan.leaf, raw), "plain", self.unit, self.field)
        except (ValueError, OverflowError):
            return INVALID

    def explain(self, value: bytes, start: int = 0) -> str:
        """Why the body at ``value[start:]`` has no event time (one line), or ``"valid"``."""
        try:
            self.millis(value, start)
        except (ValueError, OverflowError) as e:
            return str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        return "valid"

    def millis_all(self, values: Sequence[bytes | None], prefix: bytes) -> list[int]:
        """Event times of framed ``values`` whose body follows ``prefix`` (the framing of this
        plan's schema id and message indexes): INVALID where a body has none, OTHER where a value
        does not start with ``prefix`` (another schema, or framing to resolve the long way)."""
        if self.native is not None:
            return self.native.millis_all(values, prefix)
        return [
            self.verdict(v, len(prefix)) if type(v) is bytes and v.startswith(prefix) else OTHER
            for v in values
        ]

    def verdict(self, value: bytes, start: int = 0) -> int:
        """The specification's verdict on one body: its event time in ms, or INVALID."""
        try:
            return self.millis(value, start)
        except (ValueError, OverflowError):
            return INVALID
