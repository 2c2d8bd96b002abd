# cython: language_level=3, boundscheck=False, wraparound=False
"""Fetched record batches read in C into light records: no Python frame per record.

Why this exists: aiokafka's consumer turns every fetched record into a ``ConsumerRecord``
through a Python generator, a Python method and a dataclass ``__init__`` of eleven fields —
about 1.2 µs per record, more than a third of the sidecar's CPU on small records. The record
batches themselves are decoded by aiokafka's C extension (``DefaultRecordBatch``) in about
0.2 µs per record; this module keeps that, and replaces only the Python layer above it:

* :class:`FetchedRecord` — the fields the merge reads (:class:`sidecar.core.records.InputRecord`),
  set once in C, read-only;
* :class:`PartitionReader` — reads one partition's fetched batches the way aiokafka's
  ``PartitionRecords`` does (same skipping of control batches and aborted transactions, same CRC
  check, the same ``next_fetch_offset`` after every record), yielding ``FetchedRecord`` s;
  :meth:`PartitionReader.take` returns up to *n* of them in one C loop.

:mod:`sidecar.kafka.fetch_hook` installs it into a consumer (aiokafka 0.14, pinned).
"""

from cpython.list cimport PyList_AsTuple

from aiokafka.errors import CorruptRecordException
from aiokafka.record.control_record import ABORT_MARKER, ControlRecord


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
        return (
            self.topic == o.topic and self.partition == o.partition and self.offset == o.offset
            and self.timestamp == o.timestamp and self.timestamp_type == o.timestamp_type
            and self.key == o.key and self.value == o.value and self.headers == o.headers
        )

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
    cdef object _topic
    cdef object _partition
    cdef list _aborted
    cdef set _aborted_producers
    cdef bint _check_crcs
    cdef bint _read_committed
    cdef object _error

    def __init__(self, tp, batches, aborted, fetch_offset, bint check_crcs, bint read_committed):
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
        while True:
            batch = self._batch
            if batch is not None:
                record = next(batch, None)
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

    cdef object _next_batch(self):
        """The next batch holding records to yield, skipping control and aborted batches."""
        cdef object batches = self._batches, batch, producer
        while batches.has_next():
            batch = batches.next_batch()
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
            # Iterating a batch starts with iter(): a compressed batch is decompressed there.
            return iter(batch)
        return None

    cdef void _note_aborts_up_to(self, object base_offset):
        cdef list aborted = self._aborted
        while aborted and aborted[0][1] <= base_offset:
            self._aborted_producers.add(aborted.pop(0)[0])

    cdef bint _is_abort_marker(self, object batch) except -1:
        control = next(iter(batch), None)
        if control is None:
            raise CorruptRecordException("a control batch without a control record")
        return ControlRecord.parse(control.key) == ABORT_MARKER


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
