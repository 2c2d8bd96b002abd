# cython: language_level=3, boundscheck=False, wraparound=False
"""A partition's buffered records as C arrays: the C merge kernel's queue.

The same contract as the Python :class:`~sidecar.core.record_queue.RecordQueue` (the reference;
``BufferedRecords`` is what the rest of the core reads), held so that the take
(``_kernel_take.pyx``) reads it in C: per buffered record its event time (``int64``) and where
the record is — which pushed *chunk* (the sequence a push handed over, kept as it came) and its
row there. A push adds one chunk and converts its event times once; no Python object is made
per record, and a record object is only looked up when someone asks for it (a dead letter, a
late record routed aside, ``/status``). The consumed prefix is dropped as the Python queue drops
it (past 4,096 records and half the queue), with the chunks no buffered record needs.
"""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_GetSlice
from cpython.long cimport PyLong_AsLongLong
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free
from libc.string cimport memmove

from sidecar.core._columns cimport grow_columns

#: How far the head may advance before the consumed prefix is dropped (as record_queue.py).
cdef Py_ssize_t _COMPACT_AT = 4096


cdef object record_of(object chunk, Py_ssize_t row):
    """The record at ``row`` of a pushed chunk."""
    if type(chunk) is list:
        return <object>PyList_GET_ITEM(chunk, row)
    return chunk[row]


cdef class KernelQueue:
    """A partition's buffered records: event times and where each record is, in offset order."""

    def __cinit__(self):
        self.ts = NULL
        self.slot = NULL
        self.row = NULL
        self.head = 0
        self.size = 0
        self.cap = 0
        self.chunks = []

    def __dealloc__(self):
        free(self.ts)
        free(self.slot)
        free(self.row)

    @property
    def empty(self):
        return self.head == self.size

    @property
    def buffered(self):
        return self.size - self.head

    def head_timestamp(self):
        if self.head == self.size:
            raise IndexError("the queue is empty")
        return self.ts[self.head]

    def last_timestamp(self):
        if self.head == self.size:
            raise IndexError("the queue is empty")
        return self.ts[self.size - 1]

    def max_timestamp(self):
        cdef Py_ssize_t j
        cdef int64_t high
        if self.head == self.size:
            return None
        high = self.ts[self.head]
        for j in range(self.head + 1, self.size):
            if self.ts[j] > high:
                high = self.ts[j]
        return high

    def head_offset(self):
        if self.head == self.size:
            return None
        return self.record_at(self.head).offset

    def buffered_offsets(self):
        return [self.record_at(j).offset for j in range(self.head, self.size)]

    def append(self, records, timestamps):
        """Queue records already validated, in offset order, with their event times."""
        cdef Py_ssize_t n = len(timestamps), i, at
        cdef int32_t slot
        cdef list times = timestamps if type(timestamps) is list else list(timestamps)
        if n == 0:
            return
        if len(records) != n:
            raise ValueError(f"{len(records)} records but {n} event times")
        if self.head == self.size:  # nothing buffered: start afresh rather than compact
            self.head = self.size = 0
            del self.chunks[:]
        elif self.head >= _COMPACT_AT and self.head * 2 >= self.size:
            self._compact()
        self._reserve(n)
        # A list is copied (the caller may reuse it); any other sequence is kept as it came.
        chunk = PyList_GetSlice(records, 0, n) if type(records) is list else records
        slot = <int32_t>len(self.chunks)
        at = self.size
        for i in range(n):
            self.ts[at + i] = PyLong_AsLongLong(<object>PyList_GET_ITEM(times, i))
        for i in range(n):
            self.slot[at + i] = slot
            self.row[at + i] = <int32_t>i
        self.chunks.append(chunk)
        self.size = at + n

    cdef object record_at(self, Py_ssize_t j):
        return record_of(<object>PyList_GET_ITEM(self.chunks, self.slot[j]), self.row[j])

    cdef void consume_to(self, Py_ssize_t end) noexcept:
        self.head = end

    cdef int _reserve(self, Py_ssize_t more) except -1:
        return grow_columns(&self.ts, &self.slot, &self.row, &self.cap, self.size + more, 64)

    cdef void _compact(self):
        """Drop the consumed prefix, and the chunks only it needed (their slots renumbered)."""
        cdef Py_ssize_t keep = self.size - self.head, j
        cdef int32_t first = self.slot[self.head]
        memmove(self.ts, self.ts + self.head, keep * sizeof(int64_t))
        memmove(self.slot, self.slot + self.head, keep * sizeof(int32_t))
        memmove(self.row, self.row + self.head, keep * sizeof(int32_t))
        if first:
            for j in range(keep):
                self.slot[j] -= first
            del self.chunks[:first]
        self.size = keep
        self.head = 0
