# cython: language_level=3, boundscheck=False, wraparound=False
"""Consumed records, and the records of a v2 batch decoded in C from the fetch response's bytes.

* :class:`FetchedRecord` — the fields the merge reads (:class:`sidecar.core.records.InputRecord`),
  set once in C, read-only;
* :func:`open_v2` / :class:`V2Records` — one v2 batch's records, as aiokafka's C decoder reads
  them (same fields, same rules), decoded a chunk at a time so that what a batch holds never
  becomes more objects at once than the reader asks for.

The bytes are not ours: every length, count and size is checked against what is left *before*
it is used (``length > end - pos``, which cannot overflow, rather than ``pos + length > end``),
and a compressed batch inflates through :func:`sidecar.kafka.codecs.decompress`, bounded. Before
any record is handed out the batch's framing is walked once — each record's length, their
count, nothing left over — so a batch whose structure lies fails whole; a record whose fields
do not fit its length fails when it is reached. Every failure is a ``CorruptRecordException``
(the reader turns it into its one verdict, :class:`sidecar.kafka.unreadable.UnreadableRecords`).

Header keys are decoded from UTF-8 with ``surrogateescape``: Kafka does not require them to be
UTF-8 (librdkafka and hand-built producers write any bytes), and a key that is not comes back
out byte for byte when the output encoders encode it the same way
(:func:`sidecar.core.stamping.header_key_bytes`). aiokafka's decoders refuse such a key.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_AsTuple
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint64_t
from libc.string cimport memcmp

from sidecar._zigzag cimport ZIGZAG_OK, ZIGZAG_TRUNCATED, read_zigzag

from aiokafka.errors import CorruptRecordException

from sidecar.kafka.codecs import decompress

# A v2 batch's header, up to its records: base offset, length, leader epoch, magic, CRC,
# attributes, last offset delta, first and max timestamp, producer id and epoch, base
# sequence, record count.
cdef enum:
    V2_HEADER = 61
    # The least a record takes: its length, then attributes, timestamp delta, offset delta, key
    # and value lengths and header count, a byte each.
    MIN_RECORD = 7


cdef class FetchedRecord:
    """One consumed record: what the merge, the stamping and the dead letters read of it."""

    # The fields are declared in _records.pxd: the output encoder reads them directly.

    def __init__(self, topic, partition, offset, timestamp, timestamp_type, key, value, headers=()):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = tuple(headers)

    def __repr__(self):
        return (
            f"FetchedRecord(topic={self.topic!r}, partition={self.partition!r}, offset={self.offset!r}, "
            f"timestamp={self.timestamp!r}, timestamp_type={self.timestamp_type!r}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )

    def __eq__(self, other):
        if type(other) is not FetchedRecord:
            return NotImplemented
        cdef FetchedRecord o = other
        return (self.topic, self.partition, self.offset, self.timestamp, self.timestamp_type, self.key,
                self.value, self.headers) == (o.topic, o.partition, o.offset, o.timestamp, o.timestamp_type,
                                              o.key, o.value, o.headers)

    __hash__ = None


cdef FetchedRecord make_record(
    object topic, object partition, object offset, object timestamp, object timestamp_type,
    object key, object value, object headers,
):
    cdef FetchedRecord r = FetchedRecord.__new__(FetchedRecord)
    r.topic = topic
    r.partition = partition
    r.offset = offset
    r.timestamp = timestamp
    r.timestamp_type = timestamp_type
    r.key = key
    r.value = value
    r.headers = PyList_AsTuple(headers) if type(headers) is list else tuple(headers)
    return r


cdef inline int64_t _int64(const unsigned char* p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <int64_t>v


cdef inline int _int32(const unsigned char* p) noexcept nogil:
    return <int>((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16) | (<unsigned int>p[2] << 8) | p[3])


cdef inline int64_t _varint(const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos) except? -1:
    """A zigzag varint (Kafka's varint and varlong) at ``pos``, moving ``pos`` past it."""
    cdef int64_t value
    cdef int trouble = read_zigzag(buf, end, pos, &value)
    if trouble == ZIGZAG_OK:
        return value
    raise CorruptRecordException(
        "a record runs past the end of its batch" if trouble == ZIGZAG_TRUNCATED else "a varint longer than 64 bits"
    )


cdef inline object _bytes_at(const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos, int64_t length):
    """``length`` bytes at ``pos`` (``None`` for a negative length), moving ``pos`` past them."""
    if length < 0:
        return None
    if length > end - pos[0]:
        raise CorruptRecordException(f"a field of {length} bytes runs past the end of its record")
    out = PyBytes_FromStringAndSize(<const char*>buf + pos[0], <Py_ssize_t>length)
    pos[0] += <Py_ssize_t>length
    return out


cdef V2Records open_v2(bytes raw, Py_ssize_t at, object topic, object partition, Py_ssize_t limit):
    """The records of the v2 batch at ``raw[at:]``: decompressed (at most ``limit`` bytes) and
    their framing checked; no record is decoded yet.

    The caller has checked that the batch's 12 bytes of offset and length, and the length, lie
    inside ``raw``; this checks it again rather than trust it.
    """
    cdef Py_ssize_t size = PyBytes_GET_SIZE(raw)
    if at < 0 or size - at < V2_HEADER:
        raise CorruptRecordException("a v2 batch shorter than its header")
    cdef const unsigned char* head = <const unsigned char*>PyBytes_AS_STRING(raw) + at
    cdef int length = _int32(head + 8)
    if length < V2_HEADER - 12 or length > size - at - 12:
        raise CorruptRecordException(f"a v2 batch of {length} bytes in {size - at - 12}")
    cdef Py_ssize_t batch_end = at + 12 + length
    cdef int attributes = (head[21] << 8) | head[22]
    cdef int codec = attributes & 0x07
    cdef int count = _int32(head + 57)
    cdef V2Records batch = V2Records.__new__(V2Records)
    batch._base_offset = _int64(head)
    batch._last_delta = _int32(head + 23)
    batch._first_ts = _int64(head + 27)
    batch._max_ts = _int64(head + 35)
    batch._log_append = (attributes >> 3) & 1
    batch._ts_type = int(batch._log_append)
    batch._topic = topic
    batch._partition = partition
    batch._last_key = None
    batch._last_key_len = -1
    if batch._last_delta < 0 or batch._base_offset < 0 or batch._base_offset > INT64_MAX - 1 - batch._last_delta:
        raise CorruptRecordException(
            f"a batch at offset {batch._base_offset} with last offset delta {batch._last_delta}"
        )
    if codec == 0:
        batch._data = raw
        batch._buf = <const unsigned char*>PyBytes_AS_STRING(raw)
        batch._pos = at + V2_HEADER
        batch._end = batch_end
    else:
        data = decompress(codec, raw[at + V2_HEADER : batch_end], limit)
        batch._data = data
        if type(data) is bytes:
            batch._buf = <const unsigned char*>PyBytes_AS_STRING(data)
            batch._end = PyBytes_GET_SIZE(data)
        else:
            batch._buf = <const unsigned char*>PyByteArray_AS_STRING(data)
            batch._end = PyByteArray_GET_SIZE(data)
        batch._pos = 0
    batch._frame(count)
    return batch


cdef class V2Records:
    """One v2 batch's records, decoded on demand (see :func:`open_v2`)."""

    cdef int _frame(self, int count) except -1:
        """Walk the records' lengths: ``count`` of them, each inside the batch, filling it."""
        cdef Py_ssize_t pos = self._pos, end = self._end
        cdef int64_t length
        cdef int i
        if count < 0 or count > (end - pos) // MIN_RECORD:
            raise CorruptRecordException(f"a batch claiming {count} records in {end - pos} bytes")
        for i in range(count):
            length = _varint(self._buf, end, &pos)
            if length < MIN_RECORD - 1 or length > end - pos:
                raise CorruptRecordException(
                    f"record {i} of the batch claims {length} bytes, {end - pos} are left"
                )
            pos += <Py_ssize_t>length
        if pos != end:
            raise CorruptRecordException(f"{end - pos} bytes left in a batch after its {count} records")
        self.remaining = count
        return 0

    cdef int fill(self, list out, Py_ssize_t n) except -1:
        """Decode up to ``n`` more records into ``out``; a record that does not decode raises,
        with those before it already in ``out``."""
        cdef const unsigned char* buf = self._buf
        cdef Py_ssize_t pos = self._pos, record_end, h_len
        cdef int64_t length, ts_delta, offset_delta, n_headers, timestamp
        cdef object key, value, h_key, h_value
        cdef list headers
        while n > 0 and self.remaining > 0:
            length = _varint(buf, self._end, &pos)
            record_end = pos + <Py_ssize_t>length  # inside the batch: checked by _frame
            _varint(buf, record_end, &pos)  # record attributes: none defined
            ts_delta = _varint(buf, record_end, &pos)
            offset_delta = _varint(buf, record_end, &pos)
            if offset_delta > INT64_MAX - self._base_offset:
                raise CorruptRecordException(f"a record's offset delta {offset_delta} overflows")
            if self._log_append:
                timestamp = self._max_ts
            elif (ts_delta > 0 and self._first_ts > INT64_MAX - ts_delta) or (
                ts_delta < 0 and self._first_ts < INT64_MIN - ts_delta
            ):
                raise CorruptRecordException(f"a record's timestamp delta {ts_delta} overflows")
            else:
                timestamp = self._first_ts + ts_delta
            key = _bytes_at(buf, record_end, &pos, _varint(buf, record_end, &pos))
            value = _bytes_at(buf, record_end, &pos, _varint(buf, record_end, &pos))
            n_headers = _varint(buf, record_end, &pos)
            if n_headers < 0 or n_headers > (record_end - pos) // 2:
                raise CorruptRecordException(f"Found invalid number of record headers {n_headers}")
            headers = []
            while n_headers:
                h_len = <Py_ssize_t>_varint(buf, record_end, &pos)
                if h_len < 0:
                    raise CorruptRecordException(f"Invalid negative header key size {h_len}")
                if h_len > record_end - pos:
                    raise CorruptRecordException(f"a header key of {h_len} bytes runs past the end of its record")
                h_key = self._header_key(buf + pos, h_len)
                pos += h_len
                h_value = _bytes_at(buf, record_end, &pos, _varint(buf, record_end, &pos))
                headers.append((h_key, h_value))
                n_headers -= 1
            if pos != record_end:
                raise CorruptRecordException(
                    f"Invalid record size: expected to read {length} bytes in record payload, "
                    f"but instead read {length - (record_end - pos)}"
                )
            out.append(make_record(
                self._topic, self._partition, self._base_offset + offset_delta, timestamp, self._ts_type,
                key, value, headers,
            ))
            self._pos = pos
            self.remaining -= 1
            n -= 1
        return 0

    cdef object _header_key(self, const unsigned char* p, Py_ssize_t n):
        """The key's str; records mostly repeat their header names, so the last one's is reused
        when the bytes are equal (the decoded data outlives the batch's records)."""
        if n == self._last_key_len and memcmp(p, self._last_key_ptr, n) == 0:
            return self._last_key
        key = PyUnicode_DecodeUTF8(<const char*>p, n, "surrogateescape")
        self._last_key, self._last_key_len, self._last_key_ptr = key, n, p
        return key
