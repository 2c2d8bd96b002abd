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

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp, memcpy

cdef enum:
    MAX_DEPTH = 1024
    FOUND = 0
    MISSING = 1
    NOT_OBJECT = 2
    T_STRING = 0
    T_INTEGER = 1
    T_NUMBER = 2
    T_TRUE = 3
    T_FALSE = 4
    T_NULL = 5
    T_OBJECT = 6
    T_ARRAY = 7
    UNIT_MS = 0
    UNIT_S = 1
    UNIT_US = 2
    NOTHING = 0
    LEAF = 1
    STEP = 2
    # byte classes inside a string
    PLAIN = 0
    QUOTE = 1
    BACKSLASH = 2
    CONTROL = 3
    HIGH = 4

cdef int64_t INVALID = -1
cdef int64_t MAX_TIMESTAMP = 9223372036854775807
#: 2^1024 - 2^970, the least magnitude a double rounds to infinity, as 0.D × 10^309.
cdef const char* OVERFLOW_DIGITS = (
    b"17976931348623158079372897140530341507993413271003782693617377898044496829276475094664901797758"
    b"72070963302864166928879109465555478519404026306574886715058206819089020007083836762738548458177"
    b"11531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508"
    b"093042880177904174497792"
)
cdef unsigned char STRING_CLASS[256]
for _i in range(256):
    STRING_CLASS[_i] = CONTROL if _i < 0x20 else HIGH if _i >= 0x80 else PLAIN
STRING_CLASS[0x22] = QUOTE
STRING_CLASS[0x5C] = BACKSLASH


cdef struct Found:
    int kind
    int level
    int token
    Py_ssize_t start
    Py_ssize_t end
    uint64_t magnitude  # an INTEGER leaf's magnitude, when it fits 64 bits (not ``big``)
    bint negative
    bint big


cdef inline int hexval(unsigned char c) noexcept nogil:
    if 0x30 <= c <= 0x39:
        return c - 0x30
    c |= 0x20
    if 0x61 <= c <= 0x66:
        return c - 0x61 + 10
    return -1


cdef inline int hex4(const unsigned char* b, Py_ssize_t pos) noexcept nogil:
    """The four hex digits at ``pos``, or -1 (stops at the first that is not, so the NUL after
    the value is never passed)."""
    cdef int value = 0, digit, i
    for i in range(4):
        digit = hexval(b[pos + i])
        if digit < 0:
            return -1
        value = value * 16 + digit
    return value


cdef inline Py_ssize_t utf8_sequence(const unsigned char* b, Py_ssize_t pos) noexcept nogil:
    """The position after the multi-byte UTF-8 sequence at ``pos``, or -1 when it is not one
    (overlong, surrogate, above U+10FFFF, or cut short: the NUL is no continuation byte)."""
    cdef unsigned char c = b[pos], lo = 0x80, hi = 0xBF
    cdef int more, i
    if c < 0xC2 or c > 0xF4:
        return -1
    more = 1 if c < 0xE0 else 2 if c < 0xF0 else 3
    if c == 0xE0:
        lo = 0xA0
    elif c == 0xED:
        hi = 0x9F
    elif c == 0xF0:
        lo = 0x90
    elif c == 0xF4:
        hi = 0x8F
    if not lo <= b[pos + 1] <= hi:
        return -1
    for i in range(2, more + 1):
        if b[pos + i] & 0xC0 != 0x80:
            return -1
    return pos + more + 1


cdef inline Py_ssize_t escape(const unsigned char* b, Py_ssize_t pos, int* code) noexcept nogil:
    """The position after the escape at ``pos`` (a backslash), its code point in ``code``; -1
    when it is not a valid escape or a surrogate is unpaired."""
    cdef unsigned char kind = b[pos + 1]
    cdef int unit, low
    if kind == 0x75:  # u
        unit = hex4(b, pos + 2)
        if unit < 0 or 0xDC00 <= unit <= 0xDFFF:
            return -1
        if not 0xD800 <= unit <= 0xDBFF:
            code[0] = unit
            return pos + 6
        if b[pos + 6] != 0x5C or b[pos + 7] != 0x75:
            return -1
        low = hex4(b, pos + 8)
        if not 0xDC00 <= low <= 0xDFFF:
            return -1
        code[0] = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
        return pos + 12
    code[0] = (
        0x22 if kind == 0x22 else 0x5C if kind == 0x5C else 0x2F if kind == 0x2F else 0x08 if kind == 0x62
        else 0x0C if kind == 0x66 else 0x0A if kind == 0x6E else 0x0D if kind == 0x72 else 0x09 if kind == 0x74
        else -1
    )
    return pos + 2 if code[0] >= 0 else -1


cdef inline bint plain8(const unsigned char* b) noexcept nogil:
    """Whether the 8 bytes at ``b`` are all plain string bytes (0x20..0x7F but '"' and '\\').
    A byte below 0x20, a quote or a backslash sets its own high bit in one of the differences
    (a borrow can only spill upward from a byte that is itself not plain), and a byte from 0x80
    up has it already."""
    cdef uint64_t x, ones = 0x0101010101010101
    memcpy(&x, b, 8)
    return ((x - ones * 0x20) | ((x ^ (ones * 0x22)) - ones) | ((x ^ (ones * 0x5C)) - ones) | x) & (
        ones * 0x80
    ) == 0


cdef inline Py_ssize_t string_end(const unsigned char* b, Py_ssize_t n, Py_ssize_t pos, bint* escaped) noexcept nogil:
    """The position after the string whose quote is at ``pos``, or -1 when it is not a valid
    string; ``escaped`` says whether it holds an escape."""
    cdef unsigned char cls
    cdef int code
    pos += 1
    while True:
        while n - pos >= 8 and plain8(b + pos):
            pos += 8
        while STRING_CLASS[b[pos]] == PLAIN:
            pos += 1
        cls = STRING_CLASS[b[pos]]
        if cls == QUOTE:
            return pos + 1
        if cls == HIGH:
            pos = utf8_sequence(b, pos)
        elif cls == BACKSLASH:
            escaped[0] = True
            pos = escape(b, pos, &code)
        else:
            return -1  # a control byte, or the NUL at the end: the document ends inside a string
        if pos < 0:
            return -1


cdef inline int put_utf8(unsigned char* out, int code) noexcept nogil:
    if code < 0x80:
        out[0] = code
        return 1
    if code < 0x800:
        out[0] = 0xC0 | (code >> 6)
        out[1] = 0x80 | (code & 0x3F)
        return 2
    if code < 0x10000:
        out[0] = 0xE0 | (code >> 12)
        out[1] = 0x80 | ((code >> 6) & 0x3F)
        out[2] = 0x80 | (code & 0x3F)
        return 3
    out[0] = 0xF0 | (code >> 18)
    out[1] = 0x80 | ((code >> 12) & 0x3F)
    out[2] = 0x80 | ((code >> 6) & 0x3F)
    out[3] = 0x80 | (code & 0x3F)
    return 4


cdef bint escaped_key_equals(
    const unsigned char* b, Py_ssize_t pos, Py_ssize_t end, const unsigned char* part, Py_ssize_t size
) noexcept nogil:
    """Whether the valid, escaped string ``b[pos:end]`` (quotes excluded) decodes to ``part``."""
    cdef unsigned char encoded[4]
    cdef int code = 0, k, length
    cdef Py_ssize_t at = 0
    while pos < end:
        if b[pos] != 0x5C:
            if at >= size or part[at] != b[pos]:
                return False
            at += 1
            pos += 1
            continue
        pos = escape(b, pos, &code)
        length = put_utf8(encoded, code)
        for k in range(length):
            if at >= size or part[at] != encoded[k]:
                return False
            at += 1
    return at == size


cdef bint rounds_to_infinity(
    const unsigned char* b, Py_ssize_t digits, Py_ssize_t int_end, Py_ssize_t mantissa_end, int64_t exponent
) noexcept nogil:
    """Whether the number with integer digits ``b[digits:int_end]``, fraction digits up to
    ``mantissa_end`` (after a '.') and ``exponent`` reaches 2^1024 - 2^970 in magnitude."""
    cdef int64_t point = exponent + (int_end - digits)
    cdef Py_ssize_t pos = digits, k = 0
    while pos < mantissa_end and (b[pos] == 0x30 or b[pos] == 0x2E):  # leading zeros move the point
        if b[pos] == 0x30:
            point -= 1
        pos += 1
    if pos == mantissa_end:
        return False  # zero
    if point != 309:
        return point > 309
    while pos < mantissa_end:
        if b[pos] != 0x2E:
            if k == 309:
                return True  # every digit of the bound matched, and this one is more
            if b[pos] != OVERFLOW_DIGITS[k]:
                return b[pos] > OVERFLOW_DIGITS[k]
            k += 1
        pos += 1
    return k == 309  # equal to the bound: rounds (to even) to infinity


cdef inline void integer_of(const unsigned char* b, Py_ssize_t digits, Py_ssize_t end, Found* leaf) noexcept nogil:
    """An integer leaf's magnitude, or ``big`` when it needs more than 64 bits (2^64 - 1 has 20
    digits: fewer always fit, more never do, and 20 fit up to that bound)."""
    cdef Py_ssize_t count = end - digits, pos
    leaf.big = count > 20 or (count == 20 and memcmp(b + digits, b"18446744073709551615", 20) > 0)
    leaf.magnitude = 0
    if not leaf.big:
        for pos in range(digits, end):
            leaf.magnitude = leaf.magnitude * 10 + (b[pos] - 0x30)


cdef inline Py_ssize_t number_end(const unsigned char* b, Py_ssize_t pos, int* token, Found* leaf) noexcept nogil:
    """The position after the number at ``pos`` (-1: none, or it rounds to infinity) and its
    kind; when ``leaf`` is not NULL, an integer's magnitude goes there."""
    cdef Py_ssize_t digits, int_end, mantissa_end
    cdef int64_t exponent = 0
    cdef bint negative = b[pos] == 0x2D, exp_negative
    pos += negative
    digits = pos
    if b[pos] == 0x30:
        pos += 1
    elif 0x31 <= b[pos] <= 0x39:
        pos += 1
        while 0x30 <= b[pos] <= 0x39:
            pos += 1
    else:
        return -1
    int_end = mantissa_end = pos
    token[0] = T_INTEGER
    if b[pos] == 0x2E:
        pos += 1
        if not 0x30 <= b[pos] <= 0x39:
            return -1
        while 0x30 <= b[pos] <= 0x39:
            pos += 1
        mantissa_end = pos
        token[0] = T_NUMBER
    if b[pos] == 0x65 or b[pos] == 0x45:
        pos += 1
        exp_negative = b[pos] == 0x2D
        pos += b[pos] == 0x2D or b[pos] == 0x2B
        if not 0x30 <= b[pos] <= 0x39:
            return -1
        while 0x30 <= b[pos] <= 0x39:
            if exponent < 1000000000:  # far past any double: saturating keeps the verdict exact
                exponent = exponent * 10 + (b[pos] - 0x30)
            pos += 1
        if exp_negative:
            exponent = -exponent
        token[0] = T_NUMBER
    # Below 10^308 nothing rounds to infinity; integers of 20 digits or fewer are below 2^64.
    if (int_end - digits) + exponent > 308 and (token[0] == T_NUMBER or int_end - digits > 20):
        if rounds_to_infinity(b, digits, int_end, mantissa_end, exponent):
            return -1
    if leaf != NULL:
        leaf.negative = negative
        if token[0] == T_INTEGER:
            integer_of(b, digits, int_end, leaf)
    return pos


cdef inline Py_ssize_t skip_ws(const unsigned char* b, Py_ssize_t pos) noexcept nogil:
    while b[pos] == 0x20 or b[pos] == 0x0A or b[pos] == 0x0D or b[pos] == 0x09:
        pos += 1
    return pos


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
        another type is read as ``bytes(value)``."""
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
                try:
                    out.append(self.millis_of(bytes(value)))
                except TypeError:
                    out.append(INVALID)
        return out
