# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The Protobuf plan in C: :func:`timesync_wire.formats.protobuf_plan.walk` is its
specification, and a differential test holds the two equal on any bytes.

The plan comes as the ints of :meth:`Plan.ints` and is held in C arrays. A walk is one loop over
the body with an explicit stack of at most ``MAX_DEPTH + 1`` frames on the C stack (no
recursion); every read is checked against the end of the message it is in, as ``end - pos``, so
no length can overflow. Nothing Python is built on the way. An integer or Timestamp leaf is
converted here; a double, float or string leaf goes back to Python
(:meth:`ProtobufTimePlan.convert`, the shared time rules).
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from timesync_wire.formats._wire_reads cimport read_varint, valid_utf8

cdef enum:
    MAX_DEPTH = 100
    MAX_STEPS = 62  # present flags live in the bits of a uint64
    DENSE = 32  # field numbers 1..DENSE are found by index, others by binary search
    VARINT = 0
    I64 = 1
    LEN = 2
    SGROUP = 3
    EGROUP = 4
    I32 = 5
    A_VARINT = 0
    A_I64 = 1
    A_I32 = 2
    A_UTF8 = 3
    A_BYTES = 4
    A_MESSAGE = 5
    A_PACKED = -2
    A_UNKNOWN = -1
    GROUP = -1
    L_DOUBLE = 1
    L_FLOAT = 2
    L_INT64 = 3
    L_UINT64 = 4
    L_INT32 = 5
    L_FIXED64 = 6
    L_FIXED32 = 7
    L_STRING = 9
    L_UINT32 = 13
    L_SFIXED32 = 15
    L_SFIXED64 = 16
    L_SINT32 = 17
    L_SINT64 = 18
    TIMESTAMP = 100
    UNIT_MS = 0
    UNIT_S = 1
    UNIT_US = 2

cdef int64_t INVALID = -1
cdef int64_t OTHER = -2
cdef int64_t MAX_TIMESTAMP = 9223372036854775807
cdef int WIRE_OF[6]
WIRE_OF[:] = [VARINT, I64, I32, LEN, LEN, LEN]


cdef struct FieldRule:
    int number
    int action
    int packed
    int sub


cdef struct StepRule:
    int number
    int wire
    int presence
    int mates  # offset of its (number, wire) mates in ``mate_ints``
    int mate_count


cdef struct Frame:
    Py_ssize_t end
    int tindex  # GROUP: an unknown group
    int level  # the path level of this message, -1 when it is off the path
    uint64_t group  # an unknown group's field number


cdef struct Reading:
    uint64_t present  # bit k: the value of the path's first k parts is set
    bint leaf_set
    uint64_t leaf  # a scalar leaf's bits
    Py_ssize_t leaf_start  # a string leaf's bytes
    Py_ssize_t leaf_end
    uint64_t seconds
    uint64_t nanos


@cython.final
cdef class CompiledPlan:
    """A plan (:meth:`~timesync_wire.formats.protobuf_plan.Plan.ints`) held in C arrays, the
    unit, and ``convert`` (``convert(raw) -> ms or -1``, for leaves C does not convert)."""

    cdef FieldRule* fields
    cdef int* type_first  # per type: index of its first field in ``fields``
    cdef int* type_count
    cdef int* dense  # per type, DENSE + 1 slots: field index by number, or -1
    cdef StepRule* steps
    cdef int* mate_ints
    cdef int type_total
    cdef int step_count
    cdef int leaf_kind
    cdef int unit
    cdef object convert

    def __cinit__(self, tuple ints, int unit, object convert):
        cdef Py_ssize_t at = 1, i, j, total_fields = 0, total_mates = 0
        self.unit = unit
        self.convert = convert
        self.type_total = ints[0]
        for i in range(self.type_total):  # first pass: sizes
            total_fields += ints[at]
            at += 1 + 4 * ints[at]
        self.step_count = ints[at]
        if self.step_count > MAX_STEPS:
            raise ValueError(f"a path of more than {MAX_STEPS} fields")
        j = at + 1
        for i in range(self.step_count):
            total_mates += ints[j + 3]
            j += 4 + 2 * ints[j + 3]
        self.fields = <FieldRule*>PyMem_Malloc(max(1, total_fields) * sizeof(FieldRule))
        self.type_first = <int*>PyMem_Malloc(max(1, self.type_total) * sizeof(int))
        self.type_count = <int*>PyMem_Malloc(max(1, self.type_total) * sizeof(int))
        self.dense = <int*>PyMem_Malloc(max(1, self.type_total) * (DENSE + 1) * sizeof(int))
        self.steps = <StepRule*>PyMem_Malloc(max(1, self.step_count) * sizeof(StepRule))
        self.mate_ints = <int*>PyMem_Malloc(max(1, 2 * total_mates) * sizeof(int))
        if not (self.fields and self.type_first and self.type_count and self.dense and self.steps and self.mate_ints):
            raise MemoryError()
        self._load(ints)

    cdef void _load(self, tuple ints):
        cdef Py_ssize_t at = 1, t, k, f = 0, m = 0
        for t in range(self.type_total):
            self.type_first[t] = f
            self.type_count[t] = ints[at]
            for k in range(DENSE + 1):
                self.dense[t * (DENSE + 1) + k] = -1
            for k in range(ints[at]):
                self.fields[f].number = ints[at + 1 + 4 * k]
                self.fields[f].action = ints[at + 2 + 4 * k]
                self.fields[f].packed = ints[at + 3 + 4 * k]
                self.fields[f].sub = ints[at + 4 + 4 * k]
                if self.fields[f].number <= DENSE:
                    self.dense[t * (DENSE + 1) + self.fields[f].number] = f
                f += 1
            at += 1 + 4 * ints[at]
        at += 1
        for k in range(self.step_count):
            self.steps[k].number = ints[at]
            self.steps[k].wire = ints[at + 1]
            self.steps[k].presence = ints[at + 2]
            self.steps[k].mates = m
            self.steps[k].mate_count = ints[at + 3]
            for t in range(2 * ints[at + 3]):
                self.mate_ints[m] = ints[at + 4 + t]
                m += 1
            at += 4 + 2 * ints[at + 3]
        self.leaf_kind = ints[at]

    def __dealloc__(self):
        PyMem_Free(self.fields)
        PyMem_Free(self.type_first)
        PyMem_Free(self.type_count)
        PyMem_Free(self.dense)
        PyMem_Free(self.steps)
        PyMem_Free(self.mate_ints)

    cdef inline FieldRule* lookup(self, int tindex, uint64_t number) noexcept nogil:
        cdef int lo, hi, mid, f
        if number <= DENSE:
            f = self.dense[tindex * (DENSE + 1) + number]
            return &self.fields[f] if f >= 0 else NULL
        lo, hi = self.type_first[tindex], self.type_first[tindex] + self.type_count[tindex] - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if <uint64_t>self.fields[mid].number == number:
                return &self.fields[mid]
            if <uint64_t>self.fields[mid].number < number:
                lo = mid + 1
            else:
                hi = mid - 1
        return NULL

    cdef inline bint is_mate(self, int level, uint64_t number, int wire) noexcept nogil:
        cdef int i, at = self.steps[level].mates
        for i in range(self.steps[level].mate_count):
            if <uint64_t>self.mate_ints[at + 2 * i] == number and self.mate_ints[at + 2 * i + 1] == wire:
                return True
        return False

    cdef int walk(self, const unsigned char* b, Py_ssize_t pos, Py_ssize_t n, Reading* r) noexcept nogil:
        """:func:`~timesync_wire.formats.protobuf_plan.walk`: 0 and ``r`` filled, or -1 where
        the runtime would refuse the body."""
        cdef Frame stack[MAX_DEPTH + 1]
        cdef Frame* top
        cdef int depth = 0, wire, action, level, count = self.step_count
        cdef uint64_t tag, number, raw, size
        cdef FieldRule* known
        cdef bint on_path
        cdef Py_ssize_t value_start
        r.present, r.leaf_set, r.leaf, r.leaf_start, r.leaf_end, r.seconds, r.nanos = 1, False, 0, 0, 0, 0, 0
        stack[0].end, stack[0].tindex, stack[0].level, stack[0].group = n, 0, 0, 0
        while depth >= 0:
            top = &stack[depth]
            if pos == top.end:
                if top.tindex == GROUP:
                    return -1
                depth -= 1
                continue
            if read_varint(b, &pos, top.end, 5, &tag) < 0 or tag >> 32:
                return -1
            number, wire = tag >> 3, <int>(tag & 7)
            if wire > I32 or (number == 0 and top.tindex != GROUP and wire != EGROUP):
                return -1
            if wire == EGROUP:
                if top.tindex != GROUP or number != top.group:
                    return -1
                depth -= 1
                continue
            known = self.lookup(top.tindex, number) if top.tindex != GROUP else NULL
            action = A_UNKNOWN
            if known != NULL:
                if WIRE_OF[known.action] == wire:
                    action = known.action
                elif known.packed >= 0 and wire == LEN:
                    action = A_PACKED
            level = top.level
            on_path = False
            if 0 <= level < count:
                on_path = number == <uint64_t>self.steps[level].number and wire == self.steps[level].wire
                if self.steps[level].mate_count and self.is_mate(level, number, wire):
                    r.present &= (<uint64_t>1 << (level + 1)) - 1  # clears bits level+1 and up
                    r.leaf_set, r.leaf, r.seconds, r.nanos = False, 0, 0, 0
            if action == A_MESSAGE or wire == SGROUP:
                if depth == MAX_DEPTH:
                    return -1
                if wire == SGROUP:
                    stack[depth + 1].end, stack[depth + 1].tindex = top.end, GROUP
                    stack[depth + 1].level, stack[depth + 1].group = -1, number
                else:
                    if read_varint(b, &pos, top.end, 5, &size) < 0 or size > <uint64_t>(top.end - pos):
                        return -1
                    stack[depth + 1].end, stack[depth + 1].tindex = pos + <Py_ssize_t>size, known.sub
                    stack[depth + 1].level, stack[depth + 1].group = (level + 1 if on_path else -1), 0
                    if on_path:
                        r.present |= <uint64_t>1 << (level + 1)
                depth += 1
                continue
            value_start = pos
            if wire == VARINT:
                if read_varint(b, &pos, top.end, 10, &raw) < 0:
                    return -1
            elif wire == I32 or wire == I64:
                if top.end - pos < (4 if wire == I32 else 8):
                    return -1
                raw = 0
                memcpy(&raw, b + pos, 4 if wire == I32 else 8)  # little-endian hosts (x86, arm64)
                pos += 4 if wire == I32 else 8
            else:
                if read_varint(b, &pos, top.end, 5, &size) < 0 or size > <uint64_t>(top.end - pos):
                    return -1
                value_start = pos
                pos += <Py_ssize_t>size
                if action == A_UTF8 and not valid_utf8(b, value_start, pos):
                    return -1
                if action == A_PACKED and not self.whole_values(b, value_start, pos, known.packed):
                    return -1
            if on_path and level == count - 1:
                r.leaf_set, r.leaf, r.leaf_start, r.leaf_end = True, raw, value_start, pos
            elif level == count and self.leaf_kind == TIMESTAMP and wire == VARINT:
                if number == 1:
                    r.seconds = raw
                elif number == 2:
                    r.nanos = raw
        return 0

    cdef inline bint whole_values(self, const unsigned char* b, Py_ssize_t pos, Py_ssize_t end, int element) noexcept nogil:
        cdef uint64_t ignored
        if element == A_I32 or element == A_I64:
            return (end - pos) % (4 if element == A_I32 else 8) == 0
        while pos < end:
            if read_varint(b, &pos, end, 10, &ignored) < 0:
                return False
        return True

    cdef int64_t time_of(self, Reading* r, bytes value) except? -3:
        """Event time in ms from a reading, or INVALID (the path not set, or a time the rules
        refuse); doubles, floats and strings go to ``convert``."""
        cdef int k, kind = self.leaf_kind
        cdef int64_t seconds, signed
        cdef int32_t nanos
        cdef uint64_t v
        for k in range(self.step_count):
            if k < self.step_count - 1 or kind == TIMESTAMP:
                if not r.present >> (k + 1) & 1:
                    return INVALID
            elif self.steps[k].presence and not r.leaf_set:
                return INVALID
        if kind == TIMESTAMP:
            seconds, nanos = <int64_t>r.seconds, <int32_t><uint32_t>r.nanos
            if nanos < 0 or nanos >= 1000000000 or seconds < 0 or seconds > MAX_TIMESTAMP // 1000:
                return INVALID
            v = <uint64_t>seconds * 1000 + <uint64_t>(nanos // 1000000)
            return <int64_t>v if v <= <uint64_t>MAX_TIMESTAMP else INVALID
        if kind == L_DOUBLE or kind == L_FLOAT:
            return self.convert(r.leaf)
        if kind == L_STRING:
            return self.convert(value[r.leaf_start:r.leaf_end] if r.leaf_set else b"")
        if self.unit > UNIT_US:
            return INVALID  # iso takes a string only
        v = r.leaf
        if kind in (L_INT32, L_UINT32, L_SINT32, L_FIXED32, L_SFIXED32):
            v &= 0xFFFFFFFF
        if kind == L_SINT32 or kind == L_SINT64:
            v = (v >> 1) ^ (0 - (v & 1))
            if kind == L_SINT32:
                v &= 0xFFFFFFFF
        if kind in (L_INT32, L_SINT32, L_SFIXED32):
            signed = <int32_t><uint32_t>v
            if signed < 0:
                return INVALID
        elif kind in (L_INT64, L_SINT64, L_SFIXED64):
            if <int64_t>v < 0:
                return INVALID
        if self.unit == UNIT_US:
            return <int64_t>(v // 1000)
        if self.unit == UNIT_S:
            return <int64_t>(v * 1000) if v <= <uint64_t>(MAX_TIMESTAMP // 1000) else INVALID
        return <int64_t>v if v <= <uint64_t>MAX_TIMESTAMP else INVALID

    def walk_reading(self, bytes value, Py_ssize_t start=0):
        """``(present, leaf, seconds, nanos)`` as the specification's :class:`Reading`, or None
        where the runtime would refuse the body."""
        cdef Reading r
        cdef Py_ssize_t n = PyBytes_GET_SIZE(value)
        if start < 0 or start > n:
            return None
        if self.walk(<const unsigned char*>PyBytes_AS_STRING(value), start, n, &r) < 0:
            return None
        present = tuple(bool(r.present >> k & 1) for k in range(self.step_count + 1))
        leaf = None
        if r.leaf_set:
            leaf = value[r.leaf_start:r.leaf_end] if self.leaf_kind == L_STRING else r.leaf
        return (present, leaf, r.seconds, r.nanos)

    cdef int64_t millis_of(self, bytes value, Py_ssize_t start) except? -3:
        cdef Reading r
        cdef Py_ssize_t n = PyBytes_GET_SIZE(value)
        if start < 0 or start > n:
            return INVALID
        if self.walk(<const unsigned char*>PyBytes_AS_STRING(value), start, n, &r) < 0:
            return INVALID
        return self.time_of(&r, value)

    def millis(self, bytes value, Py_ssize_t start=0):
        """Event time in ms of the body at ``value[start:]``, or -1."""
        return self.millis_of(value, start)

    def millis_all(self, values, bytes prefix):
        """Event times of the framed ``values`` whose body follows ``prefix``: -1 where a body
        has none, -2 where a value does not start with ``prefix``."""
        cdef list out = []
        cdef object value
        cdef Py_ssize_t size = PyBytes_GET_SIZE(prefix)
        cdef const char* head = PyBytes_AS_STRING(prefix)
        if type(values) is not list:
            values = list(values)
        for value in <list>values:
            if (
                PyBytes_CheckExact(value)
                and PyBytes_GET_SIZE(value) >= size
                and memcmp(PyBytes_AS_STRING(value), head, size) == 0
            ):
                out.append(self.millis_of(<bytes>value, size))
            else:
                out.append(OTHER)
        return out
