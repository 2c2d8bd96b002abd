# Zigzag varints — Kafka's record fields and Avro's int and long share the encoding — read and
# written in C, for the three C modules that need them (the fetched-record reader, the output
# encoder, the Avro skip plan). Header-only: each module inlines what it uses.
#
# The readers report trouble by their result rather than raising, so that they run without the
# GIL and each caller raises its own error (a corrupt Kafka record, an Avro body that does not
# decode): OK, TRUNCATED (the buffer ends inside the varint), TOO_LONG (a tenth byte that goes
# on) or, for Avro only, OVER_64_BITS.
#
# Ten bytes carry 70 bits; a 64-bit value needs only the lowest bit of the tenth. What a reader
# does with the other six is where Kafka's Java client and our Avro rule part:
#
# * ``read_zigzag`` is Kafka's ``ByteUtils.readVarlong`` (clients, org.apache.kafka.common.utils):
#   at most ten bytes, and of the tenth only the lowest bit is kept (Java's ``b << 63``). The
#   fetched-record reader reads as the Java consumer does, so it keeps this rule.
# * ``read_avro_long`` refuses a tenth byte above 1 (OVER_64_BITS). Java Avro's ``readLong``
#   keeps the lowest bit too; we refuse instead, as the Python plan (the specification,
#   ``timesync_wire/formats/avro_plan.py``) does: no encoder writes such a byte, and a value that
#   depends on how a reader truncates it is not an event time to trust. Before, the C plan read
#   0 where the Python plan read 2^63.

from libc.stdint cimport int64_t, uint64_t

cdef enum:
    ZIGZAG_OK = 0
    ZIGZAG_TRUNCATED = 1
    ZIGZAG_TOO_LONG = 2
    ZIGZAG_OVER_64_BITS = 3


cdef inline int read_varlong(
    const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos, int64_t* out, bint refuse_over_64
) noexcept nogil:
    """The zigzag varlong at ``pos`` (before ``end``) into ``out``, moving ``pos`` past it. The
    two rules differ only at the tenth byte: ``refuse_over_64`` makes one above 1 OVER_64_BITS
    (or TOO_LONG when it goes on), else only its lowest bit is kept. Both callers pass a
    constant, so the compiler keeps one loop per rule."""
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef unsigned char b
    while True:
        if pos[0] >= end:
            return ZIGZAG_TRUNCATED
        b = buf[pos[0]]
        pos[0] += 1
        if refuse_over_64 and shift == 63 and b > 1:
            return ZIGZAG_TOO_LONG if b & 0x80 else ZIGZAG_OVER_64_BITS
        value |= <uint64_t>(b & 0x7F) << shift
        if not (b & 0x80):
            out[0] = <int64_t>(value >> 1) ^ -<int64_t>(value & 1)
            return ZIGZAG_OK
        shift += 7
        if shift > 63:
            return ZIGZAG_TOO_LONG


cdef inline int read_zigzag(
    const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos, int64_t* out
) noexcept nogil:
    """Kafka's varlong (the tenth byte's lowest bit kept)."""
    return read_varlong(buf, end, pos, out, False)


cdef inline int read_avro_long(
    const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos, int64_t* out
) noexcept nogil:
    """Avro's long (a tenth byte above 1 refused)."""
    return read_varlong(buf, end, pos, out, True)


cdef inline uint64_t zigzag(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)


cdef inline Py_ssize_t zigzag_size(int64_t v) noexcept nogil:
    """The bytes ``put_zigzag`` writes for ``v``."""
    cdef uint64_t z = zigzag(v)
    cdef Py_ssize_t n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n


cdef inline char* put_zigzag(char* p, int64_t v) noexcept nogil:
    """``v`` at ``p``; returns the byte after it."""
    cdef uint64_t z = zigzag(v)
    while z >= 0x80:
        p[0] = <char>((z & 0x7F) | 0x80)
        p += 1
        z >>= 7
    p[0] = <char>z
    return p + 1
