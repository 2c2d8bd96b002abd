# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Stamp output records and encode them as the body of a Kafka v2 record batch, in one C loop.

Why this exists: in Python, building the five ``timesync.*`` headers of every record and handing
them to aiokafka's batch builder costs about 3 µs per record — as much as fetching it — which
kept the sidecar at two thirds of a plain consume → produce copy. Here the same bytes are
written straight into the batch buffer: no header tuples, no per-record ``bytes`` for the decimal
values, one length computation and one copy per field.

What is written is defined by :mod:`sidecar.core.stamping` (header names from :mod:`timesync_wire.headers`, their order, ASCII
decimal values, ``timesync.*`` input headers dropped, header keys written back as the bytes they
were read from); ``Stamper.stamp_into`` stays the reference, and the tests check that both
produce byte-identical record batches.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp, memcpy

from sidecar.core._kernel_taken cimport Taken
from sidecar.kafka._records cimport FetchedRecord
from timesync_wire import headers
from timesync_wire._zigzag cimport put_zigzag, zigzag_size

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
    bint PyErr_ExceptionMatches(object exc) noexcept
    void PyErr_Clear() noexcept

cdef extern from *:
    """
    #define _ts_utf8_or_null PyUnicode_AsUTF8AndSize
    """
    # The same call, its failure left to the caller (a key that is not UTF-8 is no error here).
    const char* _ts_utf8_or_null(object unicode, Py_ssize_t* size) noexcept

cdef bytes _SOURCE_TOPIC = headers.SOURCE_TOPIC.encode()
cdef bytes _SOURCE_PARTITION = headers.SOURCE_PARTITION.encode()
cdef bytes _SOURCE_OFFSET = headers.SOURCE_OFFSET.encode()
cdef bytes _WATERMARK = headers.WATERMARK.encode()
cdef bytes _STREAM_TIME = headers.STREAM_TIME.encode()
cdef bytes _LATE = headers.LATE.encode()
cdef bytes _ENFORCED = headers.ENFORCED.encode()
cdef bytes _FLAG = headers.FLAG
_header_key_bytes = headers.header_key_bytes


cdef inline Py_ssize_t _decimal(char* out, int64_t v) noexcept nogil:
    """``b"%d" % v`` into ``out`` (at least 20 bytes); returns its length."""
    cdef char digits[20]
    cdef Py_ssize_t n = 0, i = 0
    cdef uint64_t u
    if v < 0:
        u = <uint64_t>(-(v + 1)) + 1
        out[0] = b'-'
        i = 1
    else:
        u = <uint64_t>v
    while True:
        digits[n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    while n > 0:
        n -= 1
        out[i] = digits[n]
        i += 1
    return i


cdef inline Py_ssize_t _field_size(Py_ssize_t length) noexcept nogil:
    """A length-prefixed field; -1 is null (the prefix alone)."""
    if length < 0:
        return 1
    return zigzag_size(length) + length


cdef inline char* _put_field(char* p, const char* data, Py_ssize_t length) noexcept nogil:
    p = put_zigzag(p, length)
    if length > 0:
        memcpy(p, data, length)
        p += length
    return p


cdef inline char* _put_bytes(char* p, bytes data):
    return _put_field(p, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef inline bint _is_own(const char* key, Py_ssize_t length) noexcept nogil:
    return length >= 9 and memcmp(key, b"timesync.", 9) == 0


cdef const char* _header_key(object key, Py_ssize_t* size, list keep) except NULL:
    """A header key's bytes: its UTF-8, or, for a key read with ``surrogateescape`` from bytes
    that are not UTF-8, those bytes again (:func:`timesync_wire.headers.header_key_bytes`, kept
    alive in ``keep`` while the batch is written)."""
    cdef const char* p = _ts_utf8_or_null(key, size)
    if p != NULL:
        return p
    if not PyErr_ExceptionMatches(UnicodeEncodeError):
        return NULL  # not a str, say: the error stands
    PyErr_Clear()
    raw = _header_key_bytes(key)
    keep.append(raw)
    size[0] = PyBytes_GET_SIZE(raw)
    return PyBytes_AS_STRING(raw)


cdef inline object _as_bytes(object data):
    if data is None or type(data) is bytes:
        return data
    return bytes(data)


def encode_stamped(
    bytearray buffer,
    object records,
    object timestamps,
    Py_ssize_t start,
    bytes watermark,
    int64_t stream_time,
    object late,
    Py_ssize_t enforced_from,
    Py_ssize_t batch_size,
):
    """Append ``records[start:]``, stamped, to ``buffer`` (an empty batch: header bytes only).

    Stops before the record that would take the buffer to ``batch_size`` or past it (aiokafka's
    C builder keeps a batch strictly below ``batch_size``) — the first record always goes in,
    however large, as with aiokafka's builder. ``stream_time`` is the stream
    time before ``records[start]``; ``late`` a set of indices into ``records`` or ``None``;
    records at ``enforced_from`` and after are marked enforced. ``records`` and ``timestamps``
    are lists, or what the C take made (a :class:`~sidecar.core._kernel_taken.Taken` and its
    times), read without a list.

    Returns ``(next index, records written, first timestamp, max timestamp, stream time)``.
    """
    cdef Py_ssize_t n = len(records), i = start, count = 0
    cdef Py_ssize_t used = PyByteArray_GET_SIZE(buffer), room
    cdef int64_t ts, after, base_ts = 0, max_ts = 0, offset, partition
    cdef Py_ssize_t key_len, value_len, topic_len, hkey_len, hvalue_len, carried_size, carried_n
    cdef Py_ssize_t part_len, offset_len, stream_len, body, total, n_headers
    cdef const char* topic_ptr
    cdef const char* hkey_ptr
    cdef char* p
    cdef char part_buf[24]
    cdef char offset_buf[24]
    cdef char stream_buf[24]
    cdef bint is_late, is_enforced
    cdef object record, key, value, headers, h, hvalue
    cdef list keep = []  # the bytes of header keys that are not UTF-8, while they are written
    cdef FetchedRecord fetched
    cdef Taken taken = records if type(records) is Taken else None
    cdef list listed = None if taken is not None else records
    cdef list times = None if taken is not None else timestamps
    cdef Py_ssize_t wm_len = PyBytes_GET_SIZE(watermark)
    # The five headers every record gets: name sizes are fixed, values vary per record.
    cdef Py_ssize_t fixed_size = (
        _field_size(len(_SOURCE_TOPIC)) + _field_size(len(_SOURCE_PARTITION))
        + _field_size(len(_SOURCE_OFFSET)) + _field_size(len(_WATERMARK))
        + _field_size(len(_STREAM_TIME)) + _field_size(wm_len)
    )
    cdef Py_ssize_t late_size = _field_size(len(_LATE)) + _field_size(1)
    cdef Py_ssize_t enforced_size = _field_size(len(_ENFORCED)) + _field_size(1)
    if len(timestamps) != n:
        raise ValueError(f"{n} records but {len(timestamps)} timestamps")
    # Grow the buffer once to the batch size rather than record by record (each growth copies
    # it); it is cut back to what was written at the end, error or not.
    room = max(used, batch_size)
    PyByteArray_Resize(buffer, room)
    try:
        while i < n:
            if keep:
                del keep[:]
            if taken is not None:
                record = taken.record(i)
                ts = taken.ts[i]
            else:
                record = listed[i]
                ts = times[i]
            after = ts if ts > stream_time else stream_time
            if count == 0:
                base_ts = ts
                max_ts = ts
            if type(record) is FetchedRecord:  # what the consumer returns: its fields without lookups
                fetched = <FetchedRecord>record
                key = _as_bytes(fetched.key)
                value = _as_bytes(fetched.value)
                headers = fetched.headers
                offset = fetched.offset
                partition = fetched.partition
                topic_ptr = PyUnicode_AsUTF8AndSize(fetched.topic, &topic_len)
            else:
                key = _as_bytes(record.key)
                value = _as_bytes(record.value)
                headers = record.headers
                offset = record.offset
                partition = record.partition
                topic_ptr = PyUnicode_AsUTF8AndSize(record.topic, &topic_len)
            key_len = -1 if key is None else PyBytes_GET_SIZE(key)
            value_len = -1 if value is None else PyBytes_GET_SIZE(value)
            part_len = _decimal(part_buf, partition)
            offset_len = _decimal(offset_buf, offset)
            stream_len = _decimal(stream_buf, after)
            is_late = late is not None and i in late
            is_enforced = i >= enforced_from

            carried_size = 0
            carried_n = 0
            if headers:
                for h in headers:
                    hkey_ptr = _header_key(h[0], &hkey_len, keep)
                    if _is_own(hkey_ptr, hkey_len):
                        continue
                    hvalue = h[1]
                    if hvalue is not None and type(hvalue) is not bytes:
                        raise TypeError(f"header {h[0]!r}: value must be bytes or None, not {type(hvalue).__name__}")
                    hvalue_len = -1 if hvalue is None else PyBytes_GET_SIZE(hvalue)
                    carried_size += _field_size(hkey_len) + _field_size(hvalue_len)
                    carried_n += 1

            n_headers = carried_n + 5 + is_late + is_enforced
            body = (
                1  # attributes
                + zigzag_size(ts - base_ts)
                + zigzag_size(count)  # offset delta
                + _field_size(key_len)
                + _field_size(value_len)
                + zigzag_size(n_headers)
                + carried_size
                + fixed_size
                + _field_size(topic_len)
                + _field_size(part_len)
                + _field_size(offset_len)
                + _field_size(stream_len)
                + (late_size if is_late else 0)
                + (enforced_size if is_enforced else 0)
            )
            total = zigzag_size(body) + body
            if count > 0 and used + total >= batch_size:
                break

            if used + total > room:
                room = max(used + total, 2 * room)
                PyByteArray_Resize(buffer, room)
            p = PyByteArray_AS_STRING(buffer) + used
            p = put_zigzag(p, body)
            p[0] = 0  # attributes: none are defined for records
            p += 1
            p = put_zigzag(p, ts - base_ts)
            p = put_zigzag(p, count)
            p = _put_field(p, NULL if key is None else PyBytes_AS_STRING(key), key_len)
            p = _put_field(p, NULL if value is None else PyBytes_AS_STRING(value), value_len)
            p = put_zigzag(p, n_headers)
            if carried_n:
                for h in headers:
                    hkey_ptr = _header_key(h[0], &hkey_len, keep)
                    if _is_own(hkey_ptr, hkey_len):
                        continue
                    hvalue = h[1]
                    p = _put_field(p, hkey_ptr, hkey_len)
                    if hvalue is None:
                        p = put_zigzag(p, -1)
                    else:
                        p = _put_bytes(p, hvalue)
            p = _put_bytes(p, _SOURCE_TOPIC)
            p = _put_field(p, topic_ptr, topic_len)
            p = _put_bytes(p, _SOURCE_PARTITION)
            p = _put_field(p, part_buf, part_len)
            p = _put_bytes(p, _SOURCE_OFFSET)
            p = _put_field(p, offset_buf, offset_len)
            p = _put_bytes(p, _WATERMARK)
            p = _put_bytes(p, watermark)
            p = _put_bytes(p, _STREAM_TIME)
            p = _put_field(p, stream_buf, stream_len)
            if is_late:
                p = _put_bytes(p, _LATE)
                p = _put_bytes(p, _FLAG)
            if is_enforced:
                p = _put_bytes(p, _ENFORCED)
                p = _put_bytes(p, _FLAG)

            used += total
            count += 1
            stream_time = after
            if ts > max_ts:
                max_ts = ts
            i += 1
    finally:
        PyByteArray_Resize(buffer, used)
    return i, count, base_ts, max_ts, stream_time
