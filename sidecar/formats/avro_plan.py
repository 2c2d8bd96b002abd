"""A skip plan: the bytecode that walks an Avro body straight to the extractor's field.

Avro's binary encoding has no field tags or lengths for records: to reach ``meta.ts`` a reader
must step over every field written before it. A general decoder (fastavro, even with a reader
schema that keeps only the path) builds or resolves each of those values; measured on a 222 B
order (see the note in ``docs/sidecar.md``) it costs as much as decoding everything. A *plan*
compiled once per writer schema does only the stepping: "skip a varint, skip a length-prefixed
string, skip 8 bytes, skip an array of (string, varint, 8 bytes) blocks, …, read a long", and
stops at the field — whatever follows it is never looked at.

:func:`compile_plan` turns a writer schema and a path into a plan (a tuple of ints).
:func:`run_plan` here is the specification, in plain Python; ``sidecar/formats/_avro_plan.pyx``
runs the same plan in C and is held to this one by a differential test. A schema whose skipped
part is recursive (a record that contains itself) has no finite plan: :class:`NoPlan`, and the
reader falls back to fastavro.

Opcodes, each followed by its operands:

====================  ==============================  ============================================
``SKIP_VARINT``                                        int, long, enum
``SKIP_FIXED``        n                                float (4), double (8), fixed(n), boolean (1)
``SKIP_BYTES``                                         string, bytes: a long length, then the bytes
``SKIP_ARRAY``        m, then m ops (one item)         blocks: count (negative: then byte size)
``SKIP_MAP``          m, then m ops (one value)        the same, each entry a string key first
``SKIP_UNION``        n, len_0..len_n-1, the branches  a long branch index, then that branch
``PATH_UNION``        n, null index                    an optional on the path: null ends it
``READ_LONG``                                          the field: int or long (zigzag varint)
``READ_FLOAT``                                         4-byte little-endian float
``READ_DOUBLE``                                        8-byte little-endian double
``READ_STRING``                                        length-prefixed UTF-8
====================  ==============================  ============================================
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

SKIP_VARINT, SKIP_FIXED, SKIP_BYTES, SKIP_ARRAY, SKIP_MAP, SKIP_UNION = 1, 2, 3, 4, 5, 6
PATH_UNION, READ_LONG, READ_FLOAT, READ_DOUBLE, READ_STRING = 7, 8, 9, 10, 11
#: Value of :func:`run_plan` when an optional on the path holds null.
NULL = None

_FIXED_SIZE = {"float": 4, "double": 8, "boolean": 1}
_READ = {
    "int": READ_LONG,
    "long": READ_LONG,
    "float": READ_FLOAT,
    "double": READ_DOUBLE,
    "string": READ_STRING,
}


class NoPlan(ValueError):
    """The schema has no finite plan (a recursive type must be skipped)."""


class PlanError(ValueError):
    """The body does not hold what the plan expects (truncated, a bad union index, …)."""


def compile_plan(writer: Any, path: Sequence[str], named: dict[str, Any]) -> tuple[int, ...]:
    """The plan reading ``path`` in bodies written with ``writer`` (a parsed JSON schema whose
    named types ``named`` maps by full and short name, and whose path was already checked by
    the caller). Logical types do not change the encoding and are ignored here."""
    ops: list[int] = []
    node = writer
    for part in path:
        node = _deref(node, named)
        node = _path_union(node, named, ops)
        for field in node["fields"]:
            if field["name"] == part:
                node = field["type"]
                break
            ops += _skip(field["type"], named, ())
    node = _path_union(_deref(node, named), named, ops)
    base = node.get("type") if isinstance(node, dict) else node
    ops.append(_READ[str(base)])
    return tuple(ops)


def _deref(node: Any, named: dict[str, Any]) -> Any:
    while True:
        if isinstance(node, str) and node in named:
            node = named[node][0]
        elif (
            isinstance(node, dict)
            and isinstance(node.get("type"), dict | list | str)
            and node["type"] in named
        ):
            node = named[node["type"]][0]
        elif isinstance(node, dict) and isinstance(node.get("type"), dict | list):
            node = node["type"]
        else:
            return node


def _path_union(node: Any, named: dict[str, Any], ops: list[int]) -> Any:
    if not isinstance(node, list):
        return node
    nulls = [i for i, b in enumerate(node) if b == "null"]
    others = [b for b in node if b != "null"]
    ops += [PATH_UNION, len(node), nulls[0] if nulls else -1]
    return _deref(others[0], named)


def _skip(node: Any, named: dict[str, Any], stack: tuple[str, ...]) -> list[int]:
    """The ops that step over one value of type ``node``."""
    if isinstance(node, list):
        branches = [_skip(b, named, stack) for b in node]
        return [SKIP_UNION, len(branches), *(len(b) for b in branches), *(op for b in branches for op in b)]
    if isinstance(node, str) and node in named:
        full = node
        if full in stack:
            raise NoPlan(f"type {full} contains itself")
        return _skip(named[node][0], named, (*stack, full))
    kind = node.get("type") if isinstance(node, dict) else node
    if isinstance(kind, dict | list):
        return _skip(kind, named, stack)
    if kind in ("null",):
        return []
    if kind in ("int", "long", "enum"):
        return [SKIP_VARINT]
    if kind in _FIXED_SIZE:
        return [SKIP_FIXED, _FIXED_SIZE[str(kind)]]
    if kind == "fixed":
        return [SKIP_FIXED, int(node["size"])] if int(node["size"]) else []
    if kind in ("string", "bytes"):
        return [SKIP_BYTES]
    if kind in ("array", "map"):
        item = _skip(node["items" if kind == "array" else "values"], named, stack)
        return [SKIP_ARRAY if kind == "array" else SKIP_MAP, len(item), *item]
    if kind in ("record", "error"):
        name = str(node.get("name", ""))
        stack = (*stack, name)
        return [op for f in node.get("fields", []) for op in _skip(f["type"], named, stack)]
    if isinstance(kind, str) and kind in named:
        if kind in stack:
            raise NoPlan(f"type {kind} contains itself")
        return _skip(named[kind][0], named, (*stack, kind))
    raise NoPlan(f"cannot skip Avro type {kind!r}")


# -- the specification of running a plan ------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag-encoded long at ``pos``: (value, position after it)."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise PlanError("body ends inside a varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise PlanError("varint longer than 10 bytes")


def _advance(buf: bytes, pos: int, n: int) -> int:
    if n < 0 or pos + n > len(buf):
        raise PlanError("body ends inside a value")
    return pos + n


def _skip_one(plan: Sequence[int], pc: int, buf: bytes, pos: int) -> tuple[int, int]:
    """Run the skip op at ``pc``: (next pc, next position)."""
    op = plan[pc]
    if op == SKIP_VARINT:
        return pc + 1, _varint(buf, pos)[1]
    if op == SKIP_FIXED:
        return pc + 2, _advance(buf, pos, plan[pc + 1])
    if op == SKIP_BYTES:
        n, pos = _varint(buf, pos)
        return pc + 1, _advance(buf, pos, n)
    if op in (SKIP_ARRAY, SKIP_MAP):
        start, end = pc + 2, pc + 2 + plan[pc + 1]
        while True:
            count, pos = _varint(buf, pos)
            if count == 0:
                return end, pos
            if count < 0:  # a block that gives its byte size: jump over it
                size, pos = _varint(buf, pos)
                pos = _advance(buf, pos, size)
                continue
            if count > len(buf) - pos and (start < end or op == SKIP_MAP):  # each item takes ≥ 1 byte
                raise PlanError("block count beyond the body")
            if start == end and op == SKIP_ARRAY:  # items of no bytes (nulls)
                continue
            for _ in range(count):
                if op == SKIP_MAP:
                    n, pos = _varint(buf, pos)
                    pos = _advance(buf, pos, n)
                i = start
                while i < end:
                    i, pos = _skip_one(plan, i, buf, pos)
    if op == SKIP_UNION:
        n = plan[pc + 1]
        lengths = plan[pc + 2 : pc + 2 + n]
        index, pos = _varint(buf, pos)
        if not 0 <= index < n:
            raise PlanError(f"union branch {index} out of range")
        i = pc + 2 + n + sum(lengths[:index])
        end = i + lengths[index]
        while i < end:
            i, pos = _skip_one(plan, i, buf, pos)
        return pc + 2 + n + sum(lengths), pos
    raise PlanError(f"opcode {op} is not a skip")


def run_plan(plan: Sequence[int], buf: bytes, pos: int) -> object:
    """The value the plan reads from the body starting at ``pos`` (``None``: a null on the path);
    :class:`PlanError` when the body does not hold it."""
    pc = 0
    while True:
        op = plan[pc]
        if op == READ_LONG:
            return _varint(buf, pos)[0]
        if op == READ_DOUBLE:
            return struct.unpack_from("<d", buf, _advance(buf, pos, 8) - 8)[0]
        if op == READ_FLOAT:
            return struct.unpack_from("<f", buf, _advance(buf, pos, 4) - 4)[0]
        if op == READ_STRING:
            n, pos = _varint(buf, pos)
            return buf[pos : _advance(buf, pos, n)].decode()
        if op == PATH_UNION:
            index, pos = _varint(buf, pos)
            if not 0 <= index < plan[pc + 1]:
                raise PlanError(f"union branch {index} out of range")
            if index == plan[pc + 2]:
                return NULL
            pc += 3
            continue
        pc, pos = _skip_one(plan, pc, buf, pos)
