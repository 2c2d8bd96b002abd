"""A skip plan: the bytecode that walks an Avro body straight to the extractor's field.

Avro's binary encoding has no field tags or lengths for records: to reach ``meta.ts`` a reader
must step over every field written before it. A general decoder (fastavro, even with a reader
schema that keeps only the path) builds or resolves each of those values; measured on a 222 B
order (see the note in ``docs/sidecar.md``) it costs as much as decoding everything. A *plan*
compiled once per writer schema does only the stepping: "skip a varint, skip a length-prefixed
string, skip 8 bytes, skip an array of (string, varint, 8 bytes) blocks, …, read a long", and
stops at the field — whatever follows it is never looked at.

:func:`compile_plan` turns a writer schema and a path into a plan (a tuple of ints), without
recursion whatever the schema's depth. :func:`run_plan` here is the specification, in plain
Python; ``sidecar/formats/_avro_plan.pyx`` runs the same plan in C and is held to this one by
differential tests and a fuzz campaign (``python -m testkit.fuzz.avro``).

**Untrusted bodies, bounded work.** A record type that is named somewhere (a linked list, a tree:
legal Avro) is skipped by a ``CALL`` to its ops, compiled once. Neither runner recurses: open
arrays, maps and calls live on an explicit stack of at most :data:`MAX_DEPTH` frames, and every
array or map item and every call is a step, at most the body's length in bytes plus
:data:`MAX_FREE_STEPS` per body. Items that take bytes are bounded by the body anyway; the cap is
for those that take none (a block claiming 2^62 nulls, 12 bytes long, is 2^62 steps of work to
any decoder that materializes it). A body past either bound does not decode (:class:`PlanError`).

Opcodes, each followed by its operands (offsets ``d`` are relative to the op's own position):

====================  ==============================  ============================================
``SKIP_VARINT``                                        int, long, enum
``SKIP_FIXED``        n                                float (4), double (8), fixed(n), boolean (1)
``SKIP_BYTES``                                         string, bytes: a long length, then the bytes
``SKIP_ARRAY``        m, m ops (one item), ``NEXT``    blocks: count (negative: then byte size)
``SKIP_MAP``          m, m ops (one value), ``NEXT``   the same, each entry a string key first
``NEXT``                                               the item ends: the next item, block, or out
``SKIP_UNION``        n, d_0..d_n-1, the branches      a long branch index i, then go to d_i
``JUMP``              d                                a union branch ends: past the union
``CALL``              pc                               one value of the named record at pc
``RETURN``                                             the named record ends: after its ``CALL``
``PATH_UNION``        n, null index                    an optional on the path: null ends it
``READ_LONG``                                          the field: int or long (zigzag varint)
``READ_FLOAT``                                         4-byte little-endian float
``READ_DOUBLE``                                        8-byte little-endian double
``READ_STRING``                                        length-prefixed UTF-8
====================  ==============================  ============================================

Types whose values take no bytes (null, an empty fixed, records of those) compile to no ops.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from sidecar.formats.avro_schema import PRIMITIVES, Named, SchemaError, concrete, short, walk

__all__ = ["MAX_DEPTH", "MAX_FREE_STEPS", "MAX_PLAN_OPS", "PlanError", "compile_plan", "run_plan"]

SKIP_VARINT, SKIP_FIXED, SKIP_BYTES, SKIP_ARRAY, SKIP_MAP, SKIP_UNION = 1, 2, 3, 4, 5, 6
PATH_UNION, READ_LONG, READ_FLOAT, READ_DOUBLE, READ_STRING = 7, 8, 9, 10, 11
NEXT, JUMP, CALL, RETURN = 12, 13, 14, 15
#: Value of :func:`run_plan` when an optional on the path holds null.
NULL = None

#: Arrays, maps and named records open at once in one body (a linked list 1,000 long is 1,000).
MAX_DEPTH = 1000
#: Steps (items, calls) a body may take beyond one per byte.
MAX_FREE_STEPS = 1_000_000
#: Ops of one plan (a schema of thousands of fields takes a few thousand).
MAX_PLAN_OPS = 1 << 16

_FIXED_SIZE = {"float": 4, "double": 8, "boolean": 1}
_READ = {
    "int": READ_LONG,
    "long": READ_LONG,
    "float": READ_FLOAT,
    "double": READ_DOUBLE,
    "string": READ_STRING,
}
# Tasks of the compiler's explicit stack besides "compile this type".
_TYPE, _BRANCH_START, _BRANCH_END, _UNION_END, _ITEMS_END = range(5)

DEPTH_MESSAGE = f"values nested deeper than {MAX_DEPTH}"
WORK_MESSAGE = f"more items and calls than the body's bytes plus {MAX_FREE_STEPS}"


class PlanError(ValueError):
    """The body does not hold what the plan expects (truncated, a bad union index, …) or passes
    a bound (:data:`MAX_DEPTH`, :data:`MAX_FREE_STEPS`)."""


def compile_plan(writer: Any, path: Sequence[str], named: Named) -> tuple[int, ...]:
    """The plan reading ``path`` in bodies written with ``writer`` (a parsed JSON schema whose
    named types :func:`~sidecar.formats.avro_schema.named_types` found); :class:`SchemaError`
    when the path does not lead to a readable field or the plan would pass
    :data:`MAX_PLAN_OPS`. Logical types do not change the encoding and are ignored here."""
    compiler = _Compiler(writer, named)
    ops: list[int] = []
    node, namespace = writer, None
    for part in path:
        node, namespace = _path_step(node, namespace, named, ops)
        if not isinstance(node, dict) or node.get("type") not in ("record", "error"):
            raise SchemaError(f"{short(node)} is not a record, so it has no field {part}")
        for field in node["fields"]:
            if field["name"] == part:
                node = field["type"]
                break
            compiler.skip([field["type"]], namespace, ops)
        else:
            raise SchemaError(f"record {node.get('name')} has no field {part}")
    node, _ = _path_step(node, namespace, named, ops)
    base = node.get("type") if isinstance(node, dict) else node
    if not isinstance(base, str) or base not in _READ:
        raise SchemaError(f"field {'.'.join(path)} is of type {short(node)}, not a time")
    ops.append(_READ[base])
    return compiler.link(ops)


def _path_step(node: Any, namespace: str | None, named: Named, ops: list[int]) -> tuple[Any, str | None]:
    """The type at the next step of the path; an optional there adds ``PATH_UNION``."""
    node, namespace, _ = concrete(node, namespace, named)
    if not isinstance(node, list):
        return node, namespace
    nulls = [i for i, b in enumerate(node) if b == "null"]
    others = [b for b in node if b != "null"]
    if len(others) != 1:
        raise SchemaError(f"a union of {len(others)} non-null types is on the path; cannot follow it")
    ops += [PATH_UNION, len(node), nulls[0] if nulls else -1]
    node, namespace, _ = concrete(others[0], namespace, named)
    return node, namespace


class _Compiler:
    """Compiles the skipped fields; a record named somewhere is compiled once, as a routine."""

    def __init__(self, writer: Any, named: Named) -> None:
        self.named = named
        names = [(n, ns) for n, ns, _ in walk(writer) if isinstance(n, str) and n not in PRIMITIVES]
        #: Records written by name somewhere: skipped by a CALL (they may contain themselves).
        self.called = {full for n, ns in names if (full := _record_name(n, ns, named)) is not None}
        self.empty = _empty_records(named)
        self.routines: list[str] = []  # records to compile as routines, in the order first called
        self.routines_seen: set[str] = set()
        self.calls: list[tuple[int, str]] = []  # (operand index, record) to link

    def skip(self, types: list[Any], namespace: str | None, ops: list[int]) -> None:
        """Append the ops stepping over one value of each of ``types``, in order."""
        tasks: list[tuple[Any, ...]] = [(_TYPE, t, namespace) for t in reversed(types)]
        while tasks:
            task = tasks.pop()
            kind = task[0]
            if kind == _TYPE:
                self._one(task[1], task[2], ops, tasks)
            elif kind == _BRANCH_START:  # (u, i): branch i starts here
                ops[task[1] + 2 + task[2]] = len(ops) - task[1]
            elif kind == _BRANCH_END and not task[2]:  # (jumps, last): jump past the union
                task[1].append(len(ops))
                ops += [JUMP, 0]
            elif kind == _UNION_END:
                for at in task[1]:
                    ops[at + 1] = len(ops) - at
            elif kind == _ITEMS_END:  # (a): the item's ops end; NEXT
                ops[task[1] + 1] = len(ops) - task[1] - 2
                ops.append(NEXT)
            if len(ops) > MAX_PLAN_OPS:
                raise SchemaError(f"the schema is too large to plan: over {MAX_PLAN_OPS} steps")

    def _one(self, node: Any, namespace: str | None, ops: list[int], tasks: list[tuple[Any, ...]]) -> None:
        node, namespace, full = concrete(node, namespace, self.named)
        if isinstance(node, list):
            u, n = len(ops), len(node)
            ops += [SKIP_UNION, n, *([0] * n)]
            jumps: list[int] = []
            tasks.append((_UNION_END, jumps))
            for i in reversed(range(n)):
                tasks += [
                    (_BRANCH_END, jumps, i == n - 1),
                    (_TYPE, node[i], namespace),
                    (_BRANCH_START, u, i),
                ]
            return
        kind = node.get("type") if isinstance(node, dict) else node
        if kind in ("record", "error"):
            assert full is not None
            if full in self.empty:
                return
            if full in self.called:
                ops += [CALL, 0]
                self.calls.append((len(ops) - 1, full))
                if full not in self.routines_seen:
                    self.routines_seen.add(full)
                    self.routines.append(full)
                return
            tasks += [(_TYPE, f["type"], namespace) for f in reversed(node["fields"])]
        elif kind in ("array", "map"):
            tasks += [
                (_ITEMS_END, len(ops)),
                (_TYPE, node["items" if kind == "array" else "values"], namespace),
            ]
            ops += [SKIP_ARRAY if kind == "array" else SKIP_MAP, 0]
        elif kind in ("int", "long", "enum"):
            ops.append(SKIP_VARINT)
        elif kind in ("string", "bytes"):
            ops.append(SKIP_BYTES)
        elif kind in _FIXED_SIZE:
            ops += [SKIP_FIXED, _FIXED_SIZE[kind]]
        elif kind == "fixed" and node["size"]:
            ops += [SKIP_FIXED, node["size"]]
        elif kind not in ("null", "fixed"):
            raise SchemaError(f"cannot skip Avro type {short(kind)}")

    def link(self, ops: list[int]) -> tuple[int, ...]:
        """The plan: ``ops``, then each called record's routine, every CALL given its target."""
        start: dict[str, int] = {}
        for full in self.routines:  # grows while routines are compiled: each is compiled once
            start[full] = len(ops)
            node, namespace = self.named[full]
            self.skip([f["type"] for f in node["fields"]], namespace, ops)
            ops.append(RETURN)
        for at, full in self.calls:
            ops[at] = start[full]
        if len(ops) > MAX_PLAN_OPS:
            raise SchemaError(f"the schema is too large to plan: over {MAX_PLAN_OPS} steps")
        return tuple(ops)


def _record_name(name: str, namespace: str | None, named: Named) -> str | None:
    """The full name of the record a type name refers to (``None``: not a record)."""
    node, _, full = concrete(name, namespace, named)
    return full if isinstance(node, dict) and node.get("type") in ("record", "error") else None


def _empty_records(named: Named) -> set[str]:
    """Records whose values take no bytes: only nulls, empty fixeds and such records inside.
    ``named`` lists each type after those defined inside it, so one pass decides every record
    whose fields name only types decided before; a record that contains itself takes bytes (or
    has no finite value at all: its bodies then fail at :data:`MAX_DEPTH`)."""
    empty: set[str] = set()
    for full, (node, namespace) in named.items():
        if node.get("type") not in ("record", "error"):
            continue
        for field in node["fields"]:
            t, _, name = concrete(field["type"], namespace, named)
            kind = t.get("type") if isinstance(t, dict) else t
            if not (kind == "null" or (kind == "fixed" and t["size"] == 0) or name in empty):
                break
        else:
            empty.add(full)
    return empty


# -- the specification of running a plan ------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag-encoded long at ``pos``: (value, position after it). Ten bytes at most, the
    tenth 0 or 1 — all a 64-bit value needs — as in ``sidecar/_zigzag.pxd``'s ``read_avro_long``:
    a value the C plan would have to truncate is refused by both."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise PlanError("body ends inside a varint")
        byte = buf[pos]
        pos += 1
        if shift == 63 and byte > 1:
            raise PlanError("varint longer than 10 bytes" if byte & 0x80 else "varint beyond 64 bits")
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _advance(buf: bytes, pos: int, n: int) -> int:
    if n < 0 or n > len(buf) - pos:
        raise PlanError("body ends inside a value")
    return pos + n


def _block(plan: Sequence[int], at: int, buf: bytes, pos: int, run: list[Any]) -> tuple[int, int]:
    """Read the block counts of the array or map at ``at`` up to one with items: (pc, pos) of
    its first item (its frame pushed), or past the array when it ends. ``run`` is
    ``[frames, work, budget]``."""
    m, is_map = plan[at + 1], plan[at] == SKIP_MAP
    while True:
        count, pos = _varint(buf, pos)
        if count == 0:
            return at + 3 + m, pos
        if count < 0:  # a block that gives its byte size: jump over it
            size, pos = _varint(buf, pos)
            pos = _advance(buf, pos, size)
            continue
        if (m or is_map) and count > len(buf) - pos:  # such items take at least a byte each
            raise PlanError("block count beyond the body")
        if count > run[2] - run[1]:
            raise PlanError(WORK_MESSAGE)
        run[1] += count
        if not m and not is_map:  # items of no bytes: counted, nothing to step over
            continue
        frames = run[0]
        if len(frames) >= MAX_DEPTH:
            raise PlanError(DEPTH_MESSAGE)
        frames.append([at, count])
        if is_map:
            n, pos = _varint(buf, pos)
            pos = _advance(buf, pos, n)
        return at + 2, pos


def run_plan(plan: Sequence[int], buf: bytes, pos: int) -> object:
    """The value the plan reads from the body starting at ``pos`` (``None``: a null on the path);
    :class:`PlanError` when the body does not hold it or passes a bound."""
    if not 0 <= pos <= len(buf):
        raise PlanError("start beyond the body")
    frames: list[list[int]] = []  # [pc of SKIP_ARRAY/MAP, items left] or [pc to return to, -1]
    run: list[Any] = [frames, 0, len(buf) - pos + MAX_FREE_STEPS]
    pc = 0
    while True:
        if not 0 <= pc < len(plan):  # only a plan not made by compile_plan gets here
            raise PlanError(f"the plan has no op at {pc}")
        op = plan[pc]
        if op in (NEXT, RETURN) and not frames:
            raise PlanError(f"the plan has no open frame at {pc}")
        if op == SKIP_VARINT:
            pos = _varint(buf, pos)[1]
            pc += 1
        elif op == SKIP_FIXED:
            pos = _advance(buf, pos, plan[pc + 1])
            pc += 2
        elif op == SKIP_BYTES:
            n, pos = _varint(buf, pos)
            pos = _advance(buf, pos, n)
            pc += 1
        elif op in (SKIP_ARRAY, SKIP_MAP):
            pc, pos = _block(plan, pc, buf, pos, run)
        elif op == NEXT:
            pc, pos = _next_item(plan, buf, pos, run)
        elif op == SKIP_UNION:
            index, pos = _varint(buf, pos)
            if not 0 <= index < plan[pc + 1]:
                raise PlanError(f"union branch {index} out of range")
            pc += plan[pc + 2 + index]
        elif op == JUMP:
            pc += plan[pc + 1]
        elif op == CALL:
            pc = _call(plan, pc, run)
        elif op == RETURN:
            pc = frames.pop()[0]
        elif op == PATH_UNION:
            index, pos = _varint(buf, pos)
            if not 0 <= index < plan[pc + 1]:
                raise PlanError(f"union branch {index} out of range")
            if index == plan[pc + 2]:
                return NULL
            pc += 3
        else:
            return _read(op, buf, pos)


def _next_item(plan: Sequence[int], buf: bytes, pos: int, run: list[Any]) -> tuple[int, int]:
    """``NEXT``: on to the open block's next item (a map's entry starts with its key), or past
    the block once its items are done: (next pc, next position)."""
    frames: list[list[int]] = run[0]
    top = frames[-1]
    if top[1] > 1:
        top[1] -= 1
        if plan[top[0]] == SKIP_MAP:
            n, pos = _varint(buf, pos)
            pos = _advance(buf, pos, n)
        return top[0] + 2, pos
    frames.pop()
    return _block(plan, top[0], buf, pos, run)


def _call(plan: Sequence[int], pc: int, run: list[Any]) -> int:
    """``CALL``: one step of work and one frame more, each within its bound; the routine's pc."""
    if run[1] >= run[2]:
        raise PlanError(WORK_MESSAGE)
    run[1] += 1
    frames: list[list[int]] = run[0]
    if len(frames) >= MAX_DEPTH:
        raise PlanError(DEPTH_MESSAGE)
    frames.append([pc + 2, -1])
    return plan[pc + 1]


def _read(op: int, buf: bytes, pos: int) -> object:
    """The field itself."""
    if op == READ_LONG:
        return _varint(buf, pos)[0]
    if op == READ_DOUBLE:
        return struct.unpack_from("<d", buf, _advance(buf, pos, 8) - 8)[0]
    if op == READ_FLOAT:
        return struct.unpack_from("<f", buf, _advance(buf, pos, 4) - 4)[0]
    if op == READ_STRING:
        n, pos = _varint(buf, pos)
        try:
            return buf[pos : _advance(buf, pos, n)].decode()
        except UnicodeDecodeError:
            raise PlanError("string is not UTF-8") from None
    raise PlanError(f"opcode {op} is not a skip")
