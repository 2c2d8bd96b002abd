# cython: language_level=3, boundscheck=False, wraparound=False
"""Fetched record batches read in C into light records: no Python frame per record.

Why: aiokafka's consumer turns every fetched record into a ``ConsumerRecord`` through a Python
generator, a method and a dataclass ``__init__`` of eleven fields (its C decoder builds a
``DefaultRecord`` and a headers list on the way) — about 1.2 µs per record, over a third of the
sidecar's CPU on small records. Here instead :class:`PartitionReader` reads one partition's
fetched batches as aiokafka's ``PartitionRecords`` reads them (the same skipping of control
batches and aborted transactions, CRC check and ``next_fetch_offset``), and
:meth:`PartitionReader.take` returns up to *n* records in one C loop. v2 batches are decoded
from the response's bytes (:mod:`sidecar.kafka._records`, which also holds
:class:`FetchedRecord`); batch boundaries, CRCs and old formats stay with aiokafka's
``MemoryRecords`` — after the reader has checked that each batch's bytes are what aiokafka's
decoder can read without reading past them.

Whatever fails while reading — a CRC, a batch or record that lies about its lengths, a codec, a
header key aiokafka's decoder refuses — the reader gives one verdict,
:class:`~sidecar.kafka.unreadable.UnreadableRecords`, naming the partition and the offsets from
the first it had not handed out to the end of the failing batch, and moves ``next_fetch_offset``
past them. :mod:`sidecar.kafka.fetch_hook` installs it into a consumer (aiokafka 0.14, pinned).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

from sidecar.kafka._records cimport FetchedRecord as _Record
from sidecar.kafka._records cimport V2Records, make_record, open_v2

from aiokafka.errors import CorruptRecordException
from aiokafka.record.control_record import ABORT_MARKER, ControlRecord

from sidecar.kafka._records import FetchedRecord  # noqa: F401  (re-exported: the reader's records)
from sidecar.kafka.codecs import DEFAULT_MAX_BATCH_BYTES
from sidecar.kafka.unreadable import UnreadableRecords, describe_cause

#: Records decoded from a v2 batch at a time: however many a batch holds, no more become objects
#: at once than this beyond what the consumer asked for.
cdef Py_ssize_t _CHUNK = 512


cdef class PartitionReader:
    """Reads the batches of one partition's fetch response, from ``fetch_offset`` on.

    ``batches`` is aiokafka's ``MemoryRecords`` of the response; ``aborted`` the response's
    aborted transactions as (producer id, first offset), sorted by first offset (read only when
    ``read_committed``); ``raw`` the response's bytes, when the hook could keep them (v2 batches
    are then decoded here, their records inflating to at most ``max_batch_bytes``, see
    :mod:`sidecar.kafka.codecs`). ``next_fetch_offset`` is where the consumer's position goes
    once the records read so far are consumed — after a record, the offset after it; after a
    skipped or finished batch, the batch's next offset (a compacted batch's last offset counts);
    after a verdict, the offset after the offsets it names.

    Iterating gives one :class:`FetchedRecord` per record. A batch that cannot be read raises
    :class:`~sidecar.kafka.unreadable.UnreadableRecords` and ends the reader: the consumer
    fetches again from ``next_fetch_offset``. :meth:`take` first returns the records it read
    before it and raises on the next call — aiokafka's ``getall`` loses them (its position has
    already moved past them when the error comes out).
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
    cdef Py_ssize_t _limit
    cdef V2Records _decoder
    cdef list _pending
    cdef Py_ssize_t _pending_at
    cdef object _deferred
    # The batch being read: where it lies in ``_raw`` (-1: not known) and its next offset.
    cdef Py_ssize_t _cur_at
    cdef Py_ssize_t _cur_len
    cdef object _cur_next
    cdef object _cur_base

    def __init__(
        self, tp, batches, aborted, fetch_offset, bint check_crcs, bint read_committed, raw=None,
        Py_ssize_t max_batch_bytes=DEFAULT_MAX_BATCH_BYTES,
    ):
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
        self._raw = raw if type(raw) is bytes else None
        self._raw_pos = 0
        self._limit = max_batch_bytes
        self._decoder = None
        self._pending = None
        self._pending_at = 0
        self._deferred = None
        self._cur_at = -1
        self._cur_len = 0
        self._cur_next = None
        self._cur_base = None

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
            self.next_fetch_offset = error.next_offset
            raise error
        while len(out) < limit:
            try:
                record = self._next()
            except UnreadableRecords as e:
                if not out:
                    raise
                # The records before it first; the verdict on the next call, and until then the
                # position stays before it (dropped unread — a pause, a seek — it comes again).
                self._error = e
                self.next_fetch_offset = e.first_offset
                break
            if record is None:
                break
            out.append(record)
        return out

    @property
    def exhausted(self):
        """Every batch was read and every record and verdict handed out: nothing more will come."""
        return self._batches is None and self._error is None

    cdef object _next(self):
        cdef object batch, record, offset, ts
        cdef _Record fetched
        while True:
            batch = self._batch
            if batch is not None and self._decoder is not None:
                if self._pending_at < len(self._pending):
                    fetched = self._pending[self._pending_at]
                    self._pending_at += 1
                    if fetched.offset < self.next_fetch_offset:
                        continue  # before the fetch position: part of a batch already consumed
                    self.next_fetch_offset = fetched.offset + 1
                    return fetched
                if self._deferred is not None:
                    return self._fail(self._deferred)
                if self._decoder.remaining:
                    self._pending = []
                    self._pending_at = 0
                    try:
                        self._decoder.fill(self._pending, _CHUNK)
                    except Exception as e:
                        self._deferred = e  # after the records decoded before it
                    continue
                self._decoder = None
                self._pending = None
                self._passed(batch)
                self._batch = None
            elif batch is not None:
                try:
                    record = next(self._records, None)
                except Exception as e:
                    return self._fail(e)
                if record is not None:
                    offset = record.offset
                    if offset < self.next_fetch_offset:
                        continue
                    self.next_fetch_offset = offset + 1
                    ts = record.timestamp
                    return make_record(  # aiokafka's record says None for the timestamp -1
                        self._topic, self._partition, offset, -1 if ts is None else ts,
                        0 if ts is None else record.timestamp_type, record.key, record.value, record.headers,
                    )
                self._passed(batch)
                self._batch = None
            if self._batches is None:
                return None
            try:
                self._batch = self._next_batch()
                if self._batch is not None and self._decoder is None:
                    # A compressed batch is decompressed by iter(); an old-format batch gives an
                    # iterator of its own.
                    self._records = iter(self._batch)
            except Exception as e:
                return self._fail(e)
            if self._batch is None:
                self._batches = None
                return None

    cdef inline void _passed(self, object batch):
        """After ``batch``: the position goes to its end, never back (aiokafka's reader goes
        back to the end of a batch that starts before the one it read last; a broker never
        sends such a response)."""
        cdef object end = batch.next_offset
        if end > self.next_fetch_offset:
            self.next_fetch_offset = end

    cdef object _fail(self, object error):
        """Raise the verdict on ``error``; ``None`` (the reader's end) when it names nothing."""
        verdict = self._verdict(error)
        if verdict is None:
            return None
        raise verdict from error

    cdef object _verdict(self, object error):
        """The verdict on what is left of the batch being read; the reader ends, and the
        consumer's position goes past it.

        Returns ``None`` when nothing is left of the batch — aiokafka's decoder found its tail
        corrupt after handing out every offset it holds: the reader then ends at the batch's
        end, as at a response's end, and the next fetch starts after it."""
        cdef object start = self.next_fetch_offset, resume = self._cur_next, data = None
        if resume is not None and resume <= start and self._batch is not None:
            self._batches = None
            self._batch = None
            self._records = None
            self._decoder = None
            self._pending = None
            self._deferred = None
            return None
        if self._cur_base is not None and start < self._cur_base and (resume is None or self._cur_base < resume):
            start = self._cur_base  # the offsets before the batch are not in the log (compacted)
        if resume is None or resume <= start:
            resume = start + 1
        if self._cur_at >= 0 and self._raw is not None:
            data = self._raw[self._cur_at : self._cur_at + self._cur_len]
        self.next_fetch_offset = resume
        self._batches = None
        self._batch = None
        self._records = None
        self._decoder = None
        self._pending = None
        self._deferred = None
        return UnreadableRecords(self._topic, self._partition, start, resume, describe_cause(error), data)

    cdef object _next_batch(self):
        """The next batch holding records to yield, skipping control and aborted batches."""
        cdef object batch, producer
        cdef Py_ssize_t at
        while self._batches.has_next():
            self._locate()
            batch = self._batches.next_batch()
            if self._cur_next is None:
                self._cur_next = batch.next_offset
            if self._cur_base is None and type(batch).__name__ == "DefaultRecordBatch":
                self._cur_base = batch.base_offset
            at = self._follow(batch)
            if self._check_crcs and not batch.validate_crc():
                raise CorruptRecordException("Invalid CRC")
            if self._read_committed:
                producer = batch.producer_id
                if producer is not None:
                    self._note_aborts_up_to(batch.base_offset)
                    if batch.is_control_batch and self._is_abort_marker(batch):
                        self._aborted_producers.discard(producer)
                    if batch.is_transactional and producer in self._aborted_producers:
                        self._passed(batch)
                        continue
            if batch.is_control_batch:
                self._passed(batch)
                continue
            if at >= 0:
                self._decoder = open_v2(self._raw, at, self._topic, self._partition, self._limit)
                self._pending = []
                self._pending_at = 0
            return batch
        return None

    cdef int _locate(self) except -1:
        """Before aiokafka's ``MemoryRecords`` reads the next batch: where it lies in the
        response's bytes, and whether aiokafka's decoder can read it at all.

        aiokafka 0.14 takes every batch's format from the *first* batch's magic byte and reads a
        v2 header of 61 bytes whatever the batch's length says: a batch of another format than
        the first is re-read from a ``MemoryRecords`` of its own, and a batch shorter than its
        header (or of a format Kafka never had) is refused here."""
        self._cur_at = -1
        self._cur_next = None
        self._cur_base = None
        cdef bytes raw = self._raw
        if raw is None:
            return 0
        cdef const unsigned char* buf = <const unsigned char*>PyBytes_AS_STRING(raw)
        cdef Py_ssize_t size = PyBytes_GET_SIZE(raw), at = self._raw_pos
        if size - at < 17:
            self._raw = None
            return 0
        cdef long length = (<long>buf[at + 8] << 24) | (buf[at + 9] << 16) | (buf[at + 10] << 8) | buf[at + 11]
        if buf[at + 8] & 0x80 or length < 14 or length > size - at - 12:
            self._raw = None  # aiokafka refuses it, or sees the response end there
            return 0
        cdef unsigned char magic = buf[at + 16]
        self._cur_at = at
        self._cur_len = 12 + length
        self._raw_pos = at + 12 + length
        self._cur_next = _next_offset_guess(buf, size, at, length, magic)
        if magic == 2:
            self._cur_base = _int64(buf + at)
        if magic > 2:
            raise CorruptRecordException(f"a batch of an unknown format (magic {magic})")
        if (magic == 2 and length < 49) or (magic == 1 and length < 22):
            raise CorruptRecordException(f"a v{magic} batch of {12 + length} bytes, shorter than its header")
        if (magic == 2) != (buf[16] == 2):
            # Another format than the first batch's: aiokafka reads it from bytes of its own.
            self._raw = raw = raw[at:]
            self._batches = type(self._batches)(raw)
            self._cur_at = 0
            self._raw_pos = 12 + length
        return 0

    cdef Py_ssize_t _follow(self, object batch) except -2:
        """Where ``batch`` starts in the response's bytes if it is a v2 batch decoded here, else -1
        (should the reader and aiokafka disagree on where it is, the rest is aiokafka's)."""
        cdef Py_ssize_t at = self._cur_at
        if at < 0 or self._raw is None:
            return -1
        cdef const unsigned char* buf = <const unsigned char*>PyBytes_AS_STRING(self._raw)
        if buf[at + 16] != 2:
            return -1  # an older message format: aiokafka's decoder reads it
        if _int64(buf + at) != batch.base_offset:
            self._raw = None
            self._cur_at = -1
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


cdef object _next_offset_guess(
    const unsigned char* buf, Py_ssize_t size, Py_ssize_t at, long length, unsigned char magic
):
    """Where the batch at ``at`` ends, for a verdict on it (``None``: unknown): its header's next
    offset (v2: base offset + last offset delta + 1; older formats: the last offset + 1), but no
    later than where the batch after it in the response begins — a header that fails its CRC
    may lie, its neighbour's offset is the broker's."""
    cdef object own = None, following = None
    cdef Py_ssize_t after = at + 12 + length
    if magic == 2 or magic > 2:
        if length >= 49:
            own = <object>_int64(buf + at) + <object>_int32(buf + at + 23) + 1
    else:
        own = <object>_int64(buf + at) + 1
    if size - after >= 8:
        following = <object>_int64(buf + after)
    if own is None or (following is not None and following < own):
        return following
    return own


cdef inline long long _int64(const unsigned char* p) noexcept nogil:
    cdef unsigned long long v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <long long>v


cdef inline int _int32(const unsigned char* p) noexcept nogil:
    return <int>((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16) | (<unsigned int>p[2] << 8) | p[3])
