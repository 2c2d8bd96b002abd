# What a take chose, in output order, held as C arrays (sidecar/core/_kernel_taken.pyx): the
# records of an Emit made by the C take, read by the output encoder without a Python object per
# record.

from libc.stdint cimport int32_t, int64_t


cdef class Taken:
    cdef int64_t* ts
    cdef int32_t* chunk_no
    cdef int32_t* row
    cdef readonly Py_ssize_t n
    cdef Py_ssize_t cap
    cdef list chunks

    cdef int reserve(self, Py_ssize_t more) except -1
    cdef object record(self, Py_ssize_t i)
