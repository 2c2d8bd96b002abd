# The byte-level readers of the Protobuf plan (_protobuf_plan.pyx), header-only as
# sidecar/_zigzag.pxd is: varints as upb reads them, and strict UTF-8 within bounds. Unlike the
# JSON readers these never read past ``end``: a length-delimited value is followed by the rest of
# the body, not by a NUL.

from libc.stdint cimport uint64_t
from libc.string cimport memcpy


cdef inline int read_varint(
    const unsigned char* b, Py_ssize_t* pos, Py_ssize_t end, int most, uint64_t* out
) noexcept nogil:
    """The varint at ``pos`` of at most ``most`` bytes into ``out`` (bits past 64 dropped, as upb
    does), ``pos`` moved past it; -1 when it is longer or crosses ``end``."""
    cdef uint64_t value = 0
    cdef int i
    cdef unsigned char byte
    for i in range(most):
        if pos[0] + i >= end:
            return -1
        byte = b[pos[0] + i]
        value |= <uint64_t>(byte & 0x7F) << (7 * i)  # i <= 9: the 10th byte keeps its low bit
        if not byte & 0x80:
            out[0] = value
            pos[0] += i + 1
            return 0
    return -1


cdef inline bint valid_utf8(const unsigned char* b, Py_ssize_t pos, Py_ssize_t end) noexcept nogil:
    """Whether ``b[pos:end]`` is strict UTF-8 (what upb and Python's decoder accept alike)."""
    cdef unsigned char c, lo, hi
    cdef int more, i
    cdef uint64_t word
    while pos < end:
        if end - pos >= 8:
            memcpy(&word, b + pos, 8)
            if word & 0x8080808080808080ULL == 0:
                pos += 8
                continue
        c = b[pos]
        if c < 0x80:
            pos += 1
            continue
        if c < 0xC2 or c > 0xF4:
            return False
        more = 1 if c < 0xE0 else 2 if c < 0xF0 else 3
        if end - pos <= more:
            return False
        lo, hi = (0xA0 if c == 0xE0 else 0x90 if c == 0xF0 else 0x80), (0x9F if c == 0xED else 0x8F if c == 0xF4 else 0xBF)
        if not lo <= b[pos + 1] <= hi:
            return False
        for i in range(2, more + 1):
            if b[pos + i] & 0xC0 != 0x80:
                return False
        pos += more + 1
    return True
