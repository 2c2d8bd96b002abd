# cython: language_level=3, boundscheck=False, wraparound=False
"""Fetched record batches read in C into light records: no Python frame per record.

Why: aiokafka's consumer turns every fetched record into a ``ConsumerRecord`` through a Python
generator, a method and a dataclass ``__init__`` of eleven fields (its C decoder builds a
``DefaultRecord`` and a headers list on the way) — about 1.2 µs per record, over a third of the
sidecar's CPU on small records. Here instead:

* :class:`FetchedRecord` — the fields the merge reads (:class:`sidecar.core.records.InputRecord`),
  set once in C, read-only;
* :class:`PartitionReader` — one partition's fetched batches read as aiokafka's
  ``PartitionRecords`` reads them (the same skipping of control batches and aborted
  transactions, CRC check and ``next_fetch_offset``); :meth:`PartitionReader.take` returns up to
  *n* records in one C loop. v2 batches are decoded here from the response's bytes
  (:func:`_decode_v2`, aiokafka's decoder's rules); batch boundaries, CRCs and old formats stay
  with aiokafka's ``MemoryRecords``.

:mod:`sidecar.kafka.fetch_hook` installs it into a consumer (aiokafka 0.14, pinned).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_AsTuple
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp

from sidecar._zigzag cimport ZIGZAG_OK, ZIGZAG_TRUNCATED, read_zigzag

from aiokafka.codec import gzip_decode, lz4_decode, snappy_decode, zstd_decode
from aiokafka.errors import CorruptRecordException
from aiokafka.record.control_record import ABORT_MARKER, ControlRecord

# A v2 batch's header, up to its records: base offset, length, leader epoch, magic, CRC,
# attributes, last offset delta, first and max timestamp, producer id and epoch, base
# sequence, record count.
cdef enum:
    _V2_HEADER = 61


cdef class FetchedRecord:
    """One consumed record: what the merge, the stamping and the dead letters read of it."""

    # The fields are declared in _fetched.pxd: the output encoder reads them directly.

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


cdef class PartitionReader:
    """Reads the batches of one partition's fetch response, from ``fetch_offset`` on.

    ``batches`` is aiokafka's ``MemoryRecords`` of the response; ``aborted`` the response's
    aborted transactions as (producer id, first offset), sorted by first offset (read only when
    ``read_committed``). ``next_fetch_offset`` is where the consumer's position goes once the
    records read so far are consumed — after a record, the offset after it; after a skipped or
    finished batch, the batch's next offset (a compacted batch's last offset counts).

    Iterating gives one :class:`FetchedRecord` per record. A corrupt batch (CRC mismatch, with
    ``check_crcs``) raises ``CorruptRecordException`` and ends the reader, as aiokafka's does:
    the consumer fetches again from ``next_fetch_offset``. :meth:`take` first returns the records
    it read before the corrupt batch and raises on the next call — aiokafka's ``getall`` loses
    them (its position has already moved past them when the error comes out).
    """

    cdef public object next_fetch_offset
    cdef object _batches
    cdef object _batch
    cdef object _records
    cdef object _topic
    cdef object _partition
    cdef list _aborted
    cdef set _aborted_producers
    cdef bint _check_crcs
    cdef bint _read_committed
    cdef object _error
    cdef bytes _raw
    cdef Py_ssize_t _raw_pos
    cdef list _pending
    cdef Py_ssize_t _pending_at

    def __init__(self, tp, batches, aborted, fetch_offset, bint check_crcs, bint read_committed, raw=None):
        self._topic = tp.topic
        self._partition = tp.partition
        self._batches = batches
        self._batch = None
        self._aborted = list(aborted or ())
        self._aborted_producers = set()
        self._check_crcs = check_crcs
        self._read_committed = read_committed
        self.next_fetch_offset = fetch_offset
        self._error = None
        # The response's bytes, when the hook could keep them: v2 batches are then decoded here.
        self._raw = raw if type(raw) is bytes else None
        self._raw_pos = 0
        self._pending = None
        self._pending_at = 0

    def __iter__(self):
        return self

    def __next__(self):
        record = self._next()
        if record is None:
            raise StopIteration
        return record

    def take(self, Py_ssize_t limit):
        """Up to ``limit`` records (fewer only when the reader ran out), in offset order."""
        cdef list out = []
        cdef object record
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        while len(out) < limit:
            try:
                record = self._next()
            except Exception as e:
                if not out:
                    raise
                self._error = e  # the records before it first; the error on the next call
                break
            if record is None:
                break
            out.append(record)
        return out

    @property
    def exhausted(self):
        """Every batch was read and every record and error handed out: nothing more will come."""
        return self._batches is None and self._error is None

    cdef object _next(self):
        cdef object batch, record, offset
        cdef FetchedRecord fetched
        while True:
            batch = self._batch
            if batch is not None and self._pending is not None:
                if self._pending_at < len(self._pending):
                    fetched = self._pending[self._pending_at]
                    self._pending_at += 1
                    if fetched.offset < self.next_fetch_offset:
                        continue
                    self.next_fetch_offset = fetched.offset + 1
                    return fetched
                self._pending = None
                self.next_fetch_offset = batch.next_offset
                self._batch = None
            elif batch is not None:
                record = next(self._records, None)
                if record is not None:
                    offset = record.offset
                    if offset < self.next_fetch_offset:
                        continue  # before the fetch position: part of a batch already consumed
                    self.next_fetch_offset = offset + 1
                    return _record(
                        self._topic, self._partition, offset, record.timestamp, record.timestamp_type,
                        record.key, record.value, record.headers,
                    )
                self.next_fetch_offset = batch.next_offset
                self._batch = None
            if self._batches is None:
                return None
            try:
                self._batch = self._next_batch()
            except BaseException:
                self._batches = None
                raise
            if self._batch is None:
                self._batches = None
                return None
            if self._pending is None:
                # Iterating a batch starts with iter(): a compressed batch is decompressed there,
                # and an old-format batch gives an iterator of its own.
                self._records = iter(self._batch)

    cdef object _next_batch(self):
        """The next batch holding records to yield, skipping control and aborted batches."""
        cdef object batches = self._batches, batch, producer
        cdef Py_ssize_t at
        while batches.has_next():
            batch = batches.next_batch()
            at = self._follow(batch)
            if self._check_crcs and not batch.validate_crc():
                raise CorruptRecordException(f"Invalid CRC - TopicPartition(topic={self._topic!r}, partition={self._partition!r})")
            if self._read_committed:
                producer = batch.producer_id
                if producer is not None:
                    self._note_aborts_up_to(batch.base_offset)
                    if batch.is_control_batch and self._is_abort_marker(batch):
                        self._aborted_producers.discard(producer)
                    if batch.is_transactional and producer in self._aborted_producers:
                        self.next_fetch_offset = batch.next_offset
                        continue
            if batch.is_control_batch:
                self.next_fetch_offset = batch.next_offset
                continue
            if at >= 0:
                self._pending = _decode_v2(self._raw, at, self._topic, self._partition)
                self._pending_at = 0
            return batch
        return None

    cdef Py_ssize_t _follow(self, object batch) except -2:
        """Where ``batch`` starts in the response's bytes if it is a v2 batch decoded here, else -1.

        The reader follows aiokafka's ``MemoryRecords`` through the response (each batch 12 bytes
        of offset and length, then its length); should the two disagree (another base offset), it
        leaves the rest of the response to aiokafka's decoder."""
        cdef bytes raw = self._raw
        if raw is None:
            return -1
        cdef const unsigned char* buf = <const unsigned char*>PyBytes_AS_STRING(raw)
        cdef Py_ssize_t size = PyBytes_GET_SIZE(raw), at = self._raw_pos
        if at + 17 > size:
            self._raw = None
            return -1
        self._raw_pos = at + 12 + _int32(buf + at + 8)
        if buf[at + 16] != 2:
            return -1  # an older message format: aiokafka's decoder reads it
        if (
            self._raw_pos < at + _V2_HEADER
            or self._raw_pos > size
            or _int64(buf + at) != batch.base_offset
        ):
            self._raw = None
            return -1
        return at

    cdef void _note_aborts_up_to(self, object base_offset):
        cdef list aborted = self._aborted
        while aborted and aborted[0][1] <= base_offset:
            self._aborted_producers.add(aborted.pop(0)[0])

    cdef bint _is_abort_marker(self, object batch) except -1:
        control = next(iter(batch), None)
        if control is None:
            raise CorruptRecordException("a control batch without a control record")
        return ControlRecord.parse(control.key) == ABORT_MARKER


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


cdef object _bytes_at(const unsigned char* buf, Py_ssize_t end, Py_ssize_t* pos, int64_t length):
    if length < 0:
        return None
    if pos[0] + length > end:
        raise CorruptRecordException("a record runs past the end of its batch")
    out = PyBytes_FromStringAndSize(<const char*>buf + pos[0], length)
    pos[0] += length
    return out


cdef list _decode_v2(bytes raw, Py_ssize_t at, object topic, object partition):
    """The records of the v2 batch at ``raw[at:]``, as aiokafka's C decoder reads them.

    Same fields, same rules: a LogAppendTime batch gives every record its max timestamp; a
    compressed batch is decompressed with the codec aiokafka uses; header keys are UTF-8; a
    record whose length does not match what was read, a negative header count or key size, or
    a batch whose record count does not match what it holds is corrupt.
    """
    cdef const unsigned char* head = <const unsigned char*>PyBytes_AS_STRING(raw) + at
    cdef Py_ssize_t batch_end = 12 + _int32(head + 8)
    cdef int attributes = (head[21] << 8) | head[22]
    cdef int codec = attributes & 0x07
    cdef int timestamp_type = (attributes >> 3) & 1
    cdef int64_t base_offset = _int64(head)
    cdef int64_t first_ts = _int64(head + 27), max_ts = _int64(head + 35)
    cdef int count = _int32(head + 57)
    cdef object data
    if codec == 0:
        data = raw
        pos_start = at + _V2_HEADER
        end = at + batch_end
    else:
        body = memoryview(raw)[at + _V2_HEADER : at + batch_end]
        if codec == 1:
            data = gzip_decode(body)
        elif codec == 2:
            data = snappy_decode(body.tobytes())
        elif codec == 3:
            data = lz4_decode(body.tobytes())
        elif codec == 4:
            data = zstd_decode(body.tobytes())
        else:
            raise CorruptRecordException(f"Invalid compression codec {codec:#04x}")
        if type(data) is not bytes:
            data = bytes(data)
        pos_start = 0
        end = PyBytes_GET_SIZE(data)
    cdef const unsigned char* buf = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t pos = pos_start, record_start, h_len, last_key_len = -1
    cdef int64_t length, ts_delta, offset_delta, key_len, value_len, n_headers, hv_len
    cdef const unsigned char* last_key_ptr = NULL
    cdef object key, value, h_key, h_value, last_key = None
    cdef list out = [], headers
    cdef object ts_type = timestamp_type
    for _ in range(count):
        length = _varint(buf, end, &pos)
        record_start = pos
        _varint(buf, end, &pos)  # record attributes: none defined
        ts_delta = _varint(buf, end, &pos)
        offset_delta = _varint(buf, end, &pos)
        key = _bytes_at(buf, end, &pos, _varint(buf, end, &pos))
        value = _bytes_at(buf, end, &pos, _varint(buf, end, &pos))
        n_headers = _varint(buf, end, &pos)
        if n_headers < 0:
            raise CorruptRecordException(f"Found invalid number of record headers {n_headers}")
        headers = []
        while n_headers:
            h_len = _varint(buf, end, &pos)
            if h_len < 0:
                raise CorruptRecordException(f"Invalid negative header key size {h_len}")
            if pos + h_len > end:
                raise CorruptRecordException("a record runs past the end of its batch")
            # Records mostly repeat their header names: reuse the last one's str when equal.
            if h_len == last_key_len and memcmp(buf + pos, last_key_ptr, h_len) == 0:
                h_key = last_key
            else:
                h_key = PyUnicode_DecodeUTF8(<const char*>buf + pos, h_len, NULL)
                last_key, last_key_len, last_key_ptr = h_key, h_len, buf + pos
            pos += h_len
            h_value = _bytes_at(buf, end, &pos, _varint(buf, end, &pos))
            headers.append((h_key, h_value))
            n_headers -= 1
        if pos - record_start != length:
            raise CorruptRecordException(
                f"Invalid record size: expected to read {length} bytes in record payload, "
                f"but instead read {pos - record_start}"
            )
        out.append(_record(
            topic, partition, base_offset + offset_delta, max_ts if timestamp_type else first_ts + ts_delta,
            ts_type, key, value, headers,
        ))
    if pos != end:
        raise CorruptRecordException(
            f"{end - pos} bytes left in a batch after its {count} records"
        )
    return out


cdef inline FetchedRecord _record(
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
