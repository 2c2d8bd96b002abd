# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The JSON path scanner in C: :func:`timesync_wire.formats.json_scan.locate` is its
specification, and a differential test holds the two equal on any bytes.

One pass over the document, no recursion (a stack of at most 1024 container kinds on the C
stack), no Python object built while scanning. Bytes objects end with a NUL that is not part of
the value (CPython guarantees it): every loop stops on it, because a NUL is never a byte a
scanner may step over, and every stop is then checked against the length. An integer leaf in
``ms``, ``s`` or ``us`` is converted here; every other leaf goes back to Python
(:meth:`JsonTimeScan.convert`, the shared time rules).
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp

from timesync_wire.formats._json_tokens cimport (
    T_ARRAY,
    T_FALSE,
    T_INTEGER,
    T_NULL,
    T_NUMBER,
    T_OBJECT,
    T_STRING,
    T_TRUE,
    Found,
    escaped_key_equals,
    number_end,
    skip_ws,
    string_end,
)

cdef enum:
    MAX_DEPTH = 1024
    FOUND = 0
    MISSING = 1
    NOT_OBJECT = 2
    UNIT_MS = 0
    UNIT_S = 1
    UNIT_US = 2
    NOTHING = 0
    LEAF = 1
    STEP = 2

cdef int64_t INVALID = -1
cdef int64_t MAX_TIMESTAMP = 9223372036854775807
@cython.final
cdef class JsonScanner:
    """A compiled path (its parts as UTF-8) and unit; ``convert`` is the Python conversion of a
    leaf (``convert(doc, token, start, end) -> ms or -1``) for what C does not convert."""

    cdef tuple parts
    cdef const unsigned char** part_ptrs
    cdef Py_ssize_t* part_sizes
    cdef int count
    cdef int unit
    cdef object convert

    def __cinit__(self, tuple parts, int unit, object convert):
        self.parts = parts
        self.count = len(parts)
        self.unit = unit
        self.convert = convert
        self.part_ptrs = <const unsigned char**>PyMem_Malloc(max(1, self.count) * sizeof(void*))
        self.part_sizes = <Py_ssize_t*>PyMem_Malloc(max(1, self.count) * sizeof(Py_ssize_t))
        if self.part_ptrs == NULL or self.part_sizes == NULL:
            raise MemoryError()
        for i, part in enumerate(parts):
            self.part_ptrs[i] = <const unsigned char*>PyBytes_AS_STRING(part)
            self.part_sizes[i] = PyBytes_GET_SIZE(part)

    def __dealloc__(self):
        PyMem_Free(self.part_ptrs)
        PyMem_Free(self.part_sizes)

    cdef inline int key_role(self, const unsigned char* b, Py_ssize_t start, Py_ssize_t end, bint escaped, int level) noexcept nogil:
        """What the value of the key ``b[start:end]`` (quotes included) is for the path, when
        the object holding it has matched ``level`` parts (-1: not on the path)."""
        cdef Py_ssize_t size
        if level < 0:
            return NOTHING
        size = end - start - 2
        if escaped:
            if not escaped_key_equals(b, start + 1, end - 1, self.part_ptrs[level], self.part_sizes[level]):
                return NOTHING
        elif size != self.part_sizes[level] or memcmp(b + start + 1, self.part_ptrs[level], size) != 0:
            return NOTHING
        return LEAF if level == self.count - 1 else STEP

    cdef inline Py_ssize_t key(
        self, const unsigned char* b, Py_ssize_t n, Py_ssize_t pos, int level, int* role
    ) noexcept nogil:
        """Read a key and its colon at ``pos``: the position of its value (-1: not JSON)."""
        cdef bint escaped = False
        cdef Py_ssize_t end
        if b[pos] != 0x22:
            return -1
        end = string_end(b, n, pos, &escaped)
        if end < 0:
            return -1
        role[0] = self.key_role(b, pos, end, escaped, level)
        end = skip_ws(b, end)
        if b[end] != 0x3A:
            return -1
        return skip_ws(b, end + 1)

    cdef int scan(self, const unsigned char* b, Py_ssize_t n, Found* found) noexcept nogil:
        """:func:`~timesync_wire.formats.json_scan.locate`: 0 and ``found`` filled, or -1 when
        ``b[:n]`` is not JSON."""
        cdef unsigned char stack[MAX_DEPTH]
        cdef int depth = 0, matched = -1, pending = NOTHING, leaf_depth = -1, token
        cdef Py_ssize_t pos, start
        cdef unsigned char c
        cdef bint is_object, escaped
        found.kind = NOT_OBJECT
        found.level = 0
        found.token = -1
        found.start = found.end = -1
        pos = skip_ws(b, 0)
        while True:  # a value starts at pos
            start = pos
            c = b[pos]
            if c == 0x7B or c == 0x5B:
                is_object = c == 0x7B
                if depth == MAX_DEPTH:
                    return -1
                if depth == 0 and is_object:
                    found.kind, found.level, matched = MISSING, 1, 0
                elif pending == LEAF:
                    found.kind, found.level, found.token = FOUND, self.count, T_OBJECT if is_object else T_ARRAY
                    found.start, found.end, leaf_depth = start, -1, depth + 1
                elif pending == STEP:
                    found.kind = MISSING if is_object else NOT_OBJECT
                    found.level = matched + (2 if is_object else 1)
                    found.token, found.start, found.end = -1, -1, -1
                    matched += is_object
                pending = NOTHING
                stack[depth] = is_object
                depth += 1
                pos = skip_ws(b, pos + 1)
                if b[pos] != (0x7D if is_object else 0x5D):
                    if is_object:
                        pos = self.key(b, n, pos, matched if depth == matched + 1 else -1, &pending)
                        if pos < 0:
                            return -1
                    continue
            else:
                if c == 0x22:
                    escaped = False
                    token = T_STRING
                    pos = string_end(b, n, pos, &escaped)
                elif c == 0x2D or 0x30 <= c <= 0x39:
                    pos = number_end(b, pos, &token, found if pending == LEAF else NULL)
                elif c == 0x74 and n - pos >= 4 and memcmp(b + pos, b"true", 4) == 0:
                    token, pos = T_TRUE, pos + 4
                elif c == 0x66 and n - pos >= 5 and memcmp(b + pos, b"false", 5) == 0:
                    token, pos = T_FALSE, pos + 5
                elif c == 0x6E and n - pos >= 4 and memcmp(b + pos, b"null", 4) == 0:
                    token, pos = T_NULL, pos + 4
                else:
                    return -1
                if pos < 0:
                    return -1
                if pending == LEAF:
                    found.kind, found.level, found.token, found.start, found.end = FOUND, self.count, token, start, pos
                elif pending == STEP:
                    found.kind, found.level, found.token, found.start, found.end = NOT_OBJECT, matched + 1, -1, -1, -1
                pending = NOTHING
                pos = skip_ws(b, pos)
            while True:  # after a value, or at an empty container's bracket
                if depth == 0:
                    return 0 if pos == n else -1
                c = b[pos]
                if c == (0x7D if stack[depth - 1] else 0x5D):
                    if depth == leaf_depth:
                        found.end, leaf_depth = pos + 1, -1
                    if stack[depth - 1] and depth == matched + 1 and matched > 0:
                        matched -= 1
                    depth -= 1
                    pos = skip_ws(b, pos + 1)
                    continue
                if c != 0x2C:
                    return -1
                pos = skip_ws(b, pos + 1)
                if stack[depth - 1]:
                    pos = self.key(b, n, pos, matched if depth == matched + 1 else -1, &pending)
                    if pos < 0:
                        return -1
                break

    def locate(self, bytes doc):
        """``(kind, level, token, start, end)`` as the specification's :class:`Located`, or
        None when ``doc`` is not JSON."""
        cdef Found found
        if self.scan(<const unsigned char*>PyBytes_AS_STRING(doc), PyBytes_GET_SIZE(doc), &found) < 0:
            return None
        return (found.kind, found.level, found.token, found.start, found.end)

    cdef int64_t millis_of(self, bytes doc) except? -2:
        cdef Found found
        cdef uint64_t v
        if self.scan(<const unsigned char*>PyBytes_AS_STRING(doc), PyBytes_GET_SIZE(doc), &found) < 0:
            return INVALID
        if found.kind != FOUND:
            return INVALID
        if found.token == T_INTEGER and self.unit <= UNIT_US and (found.negative or not found.big):
            if found.negative:  # negative in every unit (a float too, below -2^63); "-0" is 0
                return 0 if found.magnitude == 0 and not found.big else INVALID
            v = found.magnitude
            if self.unit == UNIT_US:
                return <int64_t>(v // 1000)
            if self.unit == UNIT_S:
                return <int64_t>(v * 1000) if v <= <uint64_t>(MAX_TIMESTAMP // 1000) else INVALID
            return <int64_t>v if v <= <uint64_t>MAX_TIMESTAMP else INVALID
        if found.token == T_STRING or found.token == T_NUMBER or found.token == T_INTEGER:
            return self.convert(doc, found.token, found.start, found.end)
        return INVALID  # true, false, null, an object or an array: never a time

    def millis(self, bytes doc):
        """Event time in ms of ``doc``, or -1."""
        return self.millis_of(doc)

    def millis_all(self, values):
        """Event times of ``values`` (bytes or None), -1 where a value has none; a value of
        another type is read as its bytes when it has the buffer protocol."""
        cdef list out = []
        cdef object value
        if type(values) is not list:
            values = list(values)
        for value in <list>values:
            if value is None:
                out.append(INVALID)
            elif PyBytes_CheckExact(value):
                out.append(self.millis_of(<bytes>value))
            else:
                try:  # a bytearray or memoryview; not bytes(value): bytes(8) is eight NULs
                    out.append(self.millis_of(memoryview(value).tobytes()))
                except TypeError:
                    out.append(INVALID)
        return out
