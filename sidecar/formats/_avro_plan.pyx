# cython: language_level=3, boundscheck=False, wraparound=False
"""A skip plan run in C: the same rules as :func:`sidecar.formats.avro_plan.run_plan`, which is
the specification (differential tests and ``python -m testkit.fuzz.avro`` hold the two equal:
the same value, or a :class:`PlanError` with the same message). About 0.1 µs per record where
the plan in Python takes microseconds: the plan is one C loop over the body's bytes.

No recursion: open arrays, maps and calls are frames on a stack held by the plan (grown up to
``MAX_DEPTH``, kept between reads), and the work is counted as the Python plan counts it."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t
from libc.string cimport memcpy

from sidecar._zigzag cimport ZIGZAG_OK, ZIGZAG_TOO_LONG, ZIGZAG_TRUNCATED, read_avro_long
from sidecar.formats.avro_plan import DEPTH_MESSAGE, MAX_DEPTH, MAX_FREE_STEPS, WORK_MESSAGE, PlanError

cdef enum:
    SKIP_VARINT = 1
    SKIP_FIXED = 2
    SKIP_BYTES = 3
    SKIP_ARRAY = 4
    SKIP_MAP = 5
    SKIP_UNION = 6
    PATH_UNION = 7
    READ_LONG = 8
    READ_FLOAT = 9
    READ_DOUBLE = 10
    READ_STRING = 11
    NEXT = 12
    JUMP = 13
    CALL = 14
    RETURN = 15

cdef Py_ssize_t _MAX_DEPTH = MAX_DEPTH
cdef int64_t _MAX_FREE_STEPS = MAX_FREE_STEPS


cdef struct Frame:
    Py_ssize_t at  # an array or map: the pc of its op; a call: the pc to return to
    int64_t left  # an array or map: the items left in its block; a call: -1


cdef inline Py_ssize_t _varint(const unsigned char* buf, Py_ssize_t n, Py_ssize_t pos, int64_t* out) except -1:
    cdef int trouble = read_avro_long(buf, n, &pos, out)
    if trouble == ZIGZAG_OK:
        return pos
    if trouble == ZIGZAG_TRUNCATED:
        raise PlanError("body ends inside a varint")
    raise PlanError("varint longer than 10 bytes" if trouble == ZIGZAG_TOO_LONG else "varint beyond 64 bits")


cdef inline Py_ssize_t _advance(Py_ssize_t n, Py_ssize_t pos, int64_t size) except -1:
    if size < 0 or size > n - pos:
        raise PlanError("body ends inside a value")
    return pos + <Py_ssize_t>size


cdef class CompiledPlan:
    """A plan (the tuple from :func:`~sidecar.formats.avro_plan.compile_plan`) held as C ints."""

    cdef int64_t* ops
    cdef Py_ssize_t count
    cdef Frame* frames
    cdef Py_ssize_t capacity
    cdef Py_ssize_t depth
    cdef int64_t work
    cdef int64_t budget

    def __cinit__(self, plan):
        self.count = len(plan)
        self.ops = <int64_t*>PyMem_Malloc(max(1, self.count) * sizeof(int64_t))
        self.capacity = 16
        self.frames = <Frame*>PyMem_Malloc(self.capacity * sizeof(Frame))
        if self.ops == NULL or self.frames == NULL:
            raise MemoryError()
        for i, op in enumerate(plan):
            self.ops[i] = op

    def __dealloc__(self):
        PyMem_Free(self.ops)
        PyMem_Free(self.frames)

    cdef int _push(self, Py_ssize_t at, int64_t left) except -1:
        cdef Frame* grown
        if self.depth >= _MAX_DEPTH:
            raise PlanError(DEPTH_MESSAGE)
        if self.depth == self.capacity:
            grown = <Frame*>PyMem_Realloc(self.frames, 2 * self.capacity * sizeof(Frame))
            if grown == NULL:
                raise MemoryError()
            self.frames, self.capacity = grown, 2 * self.capacity
        self.frames[self.depth].at = at
        self.frames[self.depth].left = left
        self.depth += 1
        return 0

    cdef Py_ssize_t _block(self, Py_ssize_t at, const unsigned char* buf, Py_ssize_t n, Py_ssize_t* pos) except -1:
        """The block counts of the array or map at ``at``, up to one with items: the pc of its
        first item (its frame pushed), or past the array when it ends."""
        cdef Py_ssize_t m = <Py_ssize_t>self.ops[at + 1]
        cdef bint is_map = self.ops[at] == SKIP_MAP
        cdef int64_t count, v
        while True:
            pos[0] = _varint(buf, n, pos[0], &count)
            if count == 0:
                return at + 3 + m
            if count < 0:
                pos[0] = _varint(buf, n, pos[0], &v)
                pos[0] = _advance(n, pos[0], v)
                continue
            if (m or is_map) and count > n - pos[0]:
                raise PlanError("block count beyond the body")
            if count > self.budget - self.work:
                raise PlanError(WORK_MESSAGE)
            self.work += count
            if not m and not is_map:
                continue
            self._push(at, count)
            if is_map:
                pos[0] = _varint(buf, n, pos[0], &v)
                pos[0] = _advance(n, pos[0], v)
            return at + 2

    cpdef object read(self, bytes value, Py_ssize_t start):
        """The value the plan reads from ``value[start:]`` (``None``: a null on the path)."""
        cdef const unsigned char* buf = <const unsigned char*>PyBytes_AS_STRING(value)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(value)
        cdef Py_ssize_t pc = 0
        cdef Py_ssize_t pos = start
        cdef int64_t op, v
        cdef Frame* top
        cdef double d
        cdef float f
        if start < 0 or start > n:
            raise PlanError("start beyond the body")
        self.depth = 0
        self.work = 0
        self.budget = (n - start) + _MAX_FREE_STEPS
        while True:
            if pc < 0 or pc >= self.count:  # only a plan not made by compile_plan gets here
                raise PlanError(f"the plan has no op at {pc}")
            op = self.ops[pc]
            if (op == NEXT or op == RETURN) and self.depth == 0:
                raise PlanError(f"the plan has no open frame at {pc}")
            if op == SKIP_VARINT:
                pos = _varint(buf, n, pos, &v)
                pc += 1
            elif op == SKIP_FIXED:
                pos = _advance(n, pos, self.ops[pc + 1])
                pc += 2
            elif op == SKIP_BYTES:
                pos = _varint(buf, n, pos, &v)
                pos = _advance(n, pos, v)
                pc += 1
            elif op == SKIP_ARRAY or op == SKIP_MAP:
                pc = self._block(pc, buf, n, &pos)
            elif op == NEXT:
                top = &self.frames[self.depth - 1]
                if top.left > 1:
                    top.left -= 1
                    if self.ops[top.at] == SKIP_MAP:
                        pos = _varint(buf, n, pos, &v)
                        pos = _advance(n, pos, v)
                    pc = top.at + 2
                else:
                    self.depth -= 1
                    pc = self._block(top.at, buf, n, &pos)
            elif op == SKIP_UNION:
                pos = _varint(buf, n, pos, &v)
                if v < 0 or v >= self.ops[pc + 1]:
                    raise PlanError(f"union branch {v} out of range")
                pc += <Py_ssize_t>self.ops[pc + 2 + v]
            elif op == JUMP:
                pc += <Py_ssize_t>self.ops[pc + 1]
            elif op == CALL:
                if self.work >= self.budget:
                    raise PlanError(WORK_MESSAGE)
                self.work += 1
                self._push(pc + 2, -1)
                pc = <Py_ssize_t>self.ops[pc + 1]
            elif op == RETURN:
                self.depth -= 1
                pc = self.frames[self.depth].at
            elif op == PATH_UNION:
                pos = _varint(buf, n, pos, &v)
                if v < 0 or v >= self.ops[pc + 1]:
                    raise PlanError(f"union branch {v} out of range")
                if v == self.ops[pc + 2]:
                    return None
                pc += 3
            elif op == READ_LONG:
                _varint(buf, n, pos, &v)
                return v
            elif op == READ_DOUBLE:
                _advance(n, pos, 8)
                memcpy(&d, buf + pos, 8)
                return d
            elif op == READ_FLOAT:
                _advance(n, pos, 4)
                memcpy(&f, buf + pos, 4)
                return <double>f
            elif op == READ_STRING:
                pos = _varint(buf, n, pos, &v)
                _advance(n, pos, v)
                try:
                    return PyUnicode_DecodeUTF8(<const char*>(buf + pos), <Py_ssize_t>v, NULL)
                except UnicodeDecodeError:
                    raise PlanError("string is not UTF-8") from None
            else:
                raise PlanError(f"opcode {op} is not a skip")
