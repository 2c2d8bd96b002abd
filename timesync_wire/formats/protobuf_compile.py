"""A Protobuf plan (:mod:`.protobuf_plan`) compiled from the runtime's descriptors.

The caller — today's reader, or the format that replaces it — has built the descriptor pool from
the registry's ``FileDescriptorSet``, found the message the framing's indexes name and checked
the extractor's path against it (``sidecar.formats.protobuf.protobuf_time_reader`` does all
three). :func:`compile_plan` takes that message's ``Descriptor`` and the path, and gives the
tables a walk needs: every message type a body can reach, each field's action, the path's steps
and their oneof mates, and the leaf's kind.

What the runtime decides from the schema is asked of the runtime where it would otherwise be
re-derived: whether a string field's UTF-8 is checked (proto3 yes, proto2 no, editions as their
``utf8_validation`` feature says) is found by parsing a probe body with the message class.

:class:`NoPlan` names what a plan cannot read exactly as the runtime does, so the caller keeps
the runtime's reader for that schema: group and ``DELIMITED`` fields (a plan refuses groups; an
unknown group on the wire is still skipped as the runtime skips it), the message-set encoding,
extensions of a reachable type registered in the pool (the runtime parses them), a path field
sharing a oneof with a closed enum (an unknown value of that enum does not clear the oneof, and
the plan does not hold enum values), and a ``google.protobuf.Timestamp`` leaf that is a schema's
own copy, not the well-known type (today's reader reads its fields by name).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from timesync_wire.formats.protobuf_plan import (
    A_BYTES,
    A_I32,
    A_I64,
    A_MESSAGE,
    A_UTF8,
    A_VARINT,
    L_DOUBLE,
    L_FIXED32,
    L_FIXED64,
    L_FLOAT,
    L_INT32,
    L_INT64,
    L_SFIXED32,
    L_SFIXED64,
    L_SINT32,
    L_SINT64,
    L_STRING,
    L_UINT32,
    L_UINT64,
    LEN,
    TIMESTAMP,
    WIRE_OF,
    Field,
    Plan,
    Step,
)


class NoPlan(ValueError):
    """The schema holds what a plan cannot read as the runtime does; the message says what."""


_ACTIONS = {1: A_I64, 2: A_I32, 3: A_VARINT, 4: A_VARINT, 5: A_VARINT, 6: A_I64, 7: A_I32, 8: A_VARINT}
_ACTIONS.update({12: A_BYTES, 13: A_VARINT, 14: A_VARINT, 15: A_I32, 16: A_I64, 17: A_VARINT, 18: A_VARINT})
_LEAVES = {L_DOUBLE, L_FLOAT, L_INT64, L_UINT64, L_INT32, L_FIXED64, L_FIXED32, L_STRING}
_LEAVES |= {L_UINT32, L_SFIXED32, L_SFIXED64, L_SINT32, L_SINT64}
_TYPE_MESSAGE, _TYPE_GROUP, _TYPE_STRING, _TYPE_ENUM = 11, 10, 9, 14
TIMESTAMP_NAME: Final = "google.protobuf.Timestamp"
#: Where the well-known Timestamp is defined (a schema may define a message of that name itself).
TIMESTAMP_FILE: Final = "google/protobuf/timestamp.proto"
#: The C walk keeps which path messages are set in the bits of one 64-bit word.
MAX_STEPS: Final = 62


def compile_plan(message: Any, path: Sequence[str]) -> Plan:
    """The plan reading ``path`` in bodies of ``message`` (a runtime ``Descriptor``, of the
    pool today's reader built; its path already checked by that reader). :class:`NoPlan` for
    what a plan cannot read exactly as the runtime does (see the module docstring)."""
    from google.protobuf import message_factory

    reached: list[Any] = []
    index: dict[str, int] = {}
    queue = [message]
    while queue:  # every message type a body can reach; the body's own is 0
        desc = queue.pop()
        if desc.full_name not in index:
            _refuse_unreadable(desc)
            index[desc.full_name] = len(reached)
            reached.append(desc)
            queue += [f.message_type for f in desc.fields if f.type == _TYPE_MESSAGE]
    types = tuple(
        {f.number: _field(f, message_factory.GetMessageClass(desc), index) for f in desc.fields}
        for desc in reached
    )
    steps, leaf = _steps(message, path)
    return Plan(types, steps, leaf, ".".join(path))


def _refuse_unreadable(desc: Any) -> None:
    if desc.GetOptions().message_set_wire_format:
        raise NoPlan(f"message {desc.full_name} uses the message-set encoding")
    for f in desc.fields:
        if f.type == _TYPE_GROUP:
            raise NoPlan(f"field {desc.full_name}.{f.name} is a group (or DELIMITED): a plan refuses groups")
    if desc.file.pool.FindAllExtensions(desc):
        raise NoPlan(f"message {desc.full_name} has extensions in the pool, which the runtime parses")


def _field(f: Any, probe: Any, index: dict[str, int]) -> Field:
    if f.type == _TYPE_MESSAGE:
        return Field(A_MESSAGE, sub=index[f.message_type.full_name])
    if f.type == _TYPE_STRING:
        return Field(A_UTF8 if _validates_utf8(probe, f.number) else A_BYTES)
    action = _ACTIONS[f.type]
    return Field(action, packed=action if f.is_repeated and action != A_BYTES else -1)


def _validates_utf8(cls: Any, number: int) -> bool:
    """Whether the runtime checks UTF-8 in string field ``number`` of ``cls``: asked of it, with
    a body holding one byte that is not UTF-8 (proto3 does, proto2 not, editions as configured)."""
    from google.protobuf.message import DecodeError

    try:
        cls.FromString(_varint_bytes(number << 3 | LEN) + b"\x01\xff")
    except DecodeError:
        return True
    return False


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes((*out, value))


def _steps(message: Any, path: Sequence[str]) -> tuple[tuple[Step, ...], int]:
    if len(path) > MAX_STEPS:
        raise NoPlan(f"a path of {len(path)} fields: a plan reads at most {MAX_STEPS}")
    steps: list[Step] = []
    desc, leaf = message, -1
    for i, part in enumerate(path):
        f = desc.fields_by_name.get(part) if desc is not None else None
        if f is None or f.is_repeated:
            raise NoPlan(f"{'.'.join(path[: i + 1])} is no single field (check the path with the reader)")
        mates = [m for m in (f.containing_oneof.fields if f.containing_oneof else ()) if m is not f]
        if any(m.type == _TYPE_ENUM and m.enum_type.is_closed for m in mates):
            raise NoPlan(f"field {f.name} shares a oneof with a closed enum, whose unknown values keep it")
        mate_wires = tuple((m.number, _wire(m)) for m in mates)
        steps.append(Step(f.number, _wire(f), f.name, bool(f.has_presence), mate_wires))
        desc = f.message_type if f.type == _TYPE_MESSAGE else None
        leaf = TIMESTAMP if desc is not None and desc.full_name == TIMESTAMP_NAME else f.type
    if leaf not in _LEAVES and leaf != TIMESTAMP:
        raise NoPlan(f"field {'.'.join(path)} is not a number, a string or a {TIMESTAMP_NAME}")
    if leaf == TIMESTAMP and desc.file.name != TIMESTAMP_FILE:
        # Today's reader reads a Timestamp by field name; a copy may number its fields otherwise or,
        # in proto2, give them defaults. The plan reads fields 1 and 2 of the well-known one.
        raise NoPlan(
            f"field {'.'.join(path)} is a {TIMESTAMP_NAME} of {desc.file.name}, not the well-known one"
        )
    return tuple(steps), leaf


def _wire(f: Any) -> int:
    """The wire type a field is read with (a packed run aside)."""
    return LEN if f.type in (_TYPE_MESSAGE, _TYPE_STRING) else WIRE_OF[_ACTIONS[f.type]]
