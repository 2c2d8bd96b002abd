# A partition's buffered records held as C arrays (sidecar/core/_kernel_queue.pyx), for the C
# take (_kernel_take.pyx) to read without a Python object per record.

from libc.stdint cimport int32_t, int64_t


cdef class KernelQueue:
    cdef int64_t* ts
    cdef int32_t* slot
    cdef int32_t* row
    cdef readonly Py_ssize_t head
    cdef Py_ssize_t size
    cdef Py_ssize_t cap
    cdef list chunks

    cdef object record_at(self, Py_ssize_t j)
    cdef int _reserve(self, Py_ssize_t more) except -1
    cdef void _compact(self)
    cdef void consume_to(self, Py_ssize_t end) noexcept


cdef object record_of(object chunk, Py_ssize_t row)
