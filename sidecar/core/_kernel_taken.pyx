# cython: language_level=3, boundscheck=False, wraparound=False
"""The records a C take chose, in output order: the ``records`` (and ``timestamps``) of its Emit.

The Python take hands the output a list of records and a list of times. The C take
(``_kernel_take.pyx``) writes, per output record, its time and where it is — which pushed chunk
(kept alive here) and its row — and the output encoder (``sidecar/output/_stamp_encoder.pyx``)
reads those directly. For everyone else :class:`Taken` is a read-only sequence of the records
and :class:`TakenTimes` one of their times, equal to a list holding the same items, so an
``Emit`` reads alike whichever take made it; a record object is only looked up when asked for.
"""

from collections.abc import Sequence

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free

from sidecar.core._columns cimport grow_columns
from sidecar.core._kernel_queue cimport record_of


cdef class Taken:
    """The records of one take, in output order (see the module's docstring)."""

    def __cinit__(self):
        self.ts = NULL
        self.chunk_no = NULL
        self.row = NULL
        self.n = 0
        self.cap = 0
        self.chunks = []

    def __dealloc__(self):
        free(self.ts)
        free(self.chunk_no)
        free(self.row)

    cdef int reserve(self, Py_ssize_t more) except -1:
        return grow_columns(&self.ts, &self.chunk_no, &self.row, &self.cap, self.n + more, 16)

    cdef object record(self, Py_ssize_t i):
        return record_of(self.chunks[self.chunk_no[i]], self.row[i])

    @property
    def timestamps(self):
        """The output times, as a read-only sequence of ints."""
        return TakenTimes(self)

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self.record(i) for i in range(*index.indices(self.n))]
        cdef Py_ssize_t i = index
        if i < 0:
            i += self.n
        if i < 0 or i >= self.n:
            raise IndexError("record index out of range")
        return self.record(i)

    def __iter__(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            yield self.record(i)

    def __eq__(self, other):
        if isinstance(other, (list, tuple, Taken)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self):
        return f"Taken({list(self)!r})"


cdef class TakenTimes:
    """The output times of a :class:`Taken`, as a read-only sequence of ints."""

    cdef Taken _taken

    def __cinit__(self, Taken taken):
        self._taken = taken

    def __len__(self):
        return self._taken.n

    def __getitem__(self, index):
        cdef Taken t = self._taken
        if isinstance(index, slice):
            return [t.ts[i] for i in range(*index.indices(t.n))]
        cdef Py_ssize_t i = index
        if i < 0:
            i += t.n
        if i < 0 or i >= t.n:
            raise IndexError("timestamp index out of range")
        return t.ts[i]

    def __iter__(self):
        cdef Taken t = self._taken
        cdef Py_ssize_t i
        for i in range(t.n):
            yield t.ts[i]

    def __eq__(self, other):
        if isinstance(other, (list, tuple, TakenTimes)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self):
        return f"TakenTimes({list(self)!r})"


Sequence.register(Taken)
Sequence.register(TakenTimes)
