# The byte-level readers of the JSON path scanner (_json_scan.pyx), header-only as
# sidecar/_zigzag.pxd is: strings (escapes, surrogate pairs, strict UTF-8), numbers (grammar,
# the 64-bit integer range, the double overflow boundary) and whitespace. The rules are those of
# json_scan.py, the specification, and a differential test holds the C to it.
#
# Every reader here runs on a bytes object's buffer and relies on the NUL CPython keeps after
# its last byte: each loop stops on it (a NUL is never a byte a reader may step over), and the
# caller checks each stop against the length.

from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp, memcpy

cdef enum:
    T_STRING = 0
    T_INTEGER = 1
    T_NUMBER = 2
    T_TRUE = 3
    T_FALSE = 4
    T_NULL = 5
    T_OBJECT = 6
    T_ARRAY = 7


cdef struct Found:
    int kind
    int level
    int token
    Py_ssize_t start
    Py_ssize_t end
    uint64_t magnitude  # an INTEGER leaf's magnitude, when it fits 64 bits (not ``big``)
    bint negative
    bint big


# 2^1024 - 2^970, the least magnitude a double rounds to infinity, as 0.D x 10^309 (C text: an
# assignment in a .pxd would never run).
cdef extern from *:
    """
    static const char TIMESYNC_OVERFLOW_DIGITS[] =
        "17976931348623158079372897140530341507993413271003782693617377898044496829276475094664901797758"
        "72070963302864166928879109465555478519404026306574886715058206819089020007083836762738548458177"
        "11531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508"
        "093042880177904174497792";
    """
    const char* OVERFLOW_DIGITS "TIMESYNC_OVERFLOW_DIGITS"


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


cdef extern from *:
    int count_trailing_zeros "__builtin_ctzll" (unsigned long long) nogil


cdef inline uint64_t not_plain8(const unsigned char* b) noexcept nogil:
    """The high bit of each of the 8 bytes at ``b`` that may not be a plain string byte (plain:
    0x20..0x7F but '"' and '\\'); 0 when all 8 are plain. A byte below 0x20, a quote or a
    backslash sets its high bit in one of the differences, a byte from 0x80 up has it already;
    a borrow spills only upward from a byte that is itself not plain, so the lowest bit set is
    exactly the first byte that is not plain (bytes load little-endian on x86-64 and arm64)."""
    cdef uint64_t x, ones = 0x0101010101010101
    memcpy(&x, b, 8)
    return ((x - ones * 0x20) | ((x ^ (ones * 0x22)) - ones) | ((x ^ (ones * 0x5C)) - ones) | x) & (ones * 0x80)


cdef inline Py_ssize_t string_end(const unsigned char* b, Py_ssize_t n, Py_ssize_t pos, bint* escaped) noexcept nogil:
    """The position after the string whose quote is at ``pos``, or -1 when it is not a valid
    string; ``escaped`` says whether it holds an escape."""
    cdef unsigned char c
    cdef uint64_t special
    cdef int code
    pos += 1
    while True:
        while n - pos >= 8:  # 8 bytes at a time to the first that is not plain
            special = not_plain8(b + pos)
            if special:
                pos += count_trailing_zeros(special) >> 3
                break
            pos += 8
        while 0x20 <= b[pos] < 0x80 and b[pos] != 0x22 and b[pos] != 0x5C:  # the last few
            pos += 1
        c = b[pos]
        if c == 0x22:
            return pos + 1
        if c >= 0x80:
            pos = utf8_sequence(b, pos)
        elif c == 0x5C:
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


cdef inline bint escaped_key_equals(
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


cdef inline bint rounds_to_infinity(
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
