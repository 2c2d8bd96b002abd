# The record type's fields, for the C modules that read them without attribute lookups
# (sidecar/output/_stamp_encoder.pyx), and the v2 batch decoder the reader drives
# (sidecar/kafka/_fetched.pyx).

cimport cython
from libc.stdint cimport int64_t


cdef class FetchedRecord:
    cdef readonly object topic
    cdef readonly object partition
    cdef readonly object offset
    cdef readonly object timestamp
    cdef readonly object timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef readonly tuple headers


cdef FetchedRecord make_record(
    object topic, object partition, object offset, object timestamp, object timestamp_type,
    object key, object value, object headers,
)


@cython.final
cdef class V2Records:
    cdef object _data
    cdef const unsigned char* _buf
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _end
    cdef readonly Py_ssize_t remaining
    cdef int64_t _base_offset
    cdef int64_t _first_ts
    cdef int64_t _max_ts
    cdef int64_t _last_delta
    cdef bint _log_append
    cdef object _ts_type
    cdef object _topic
    cdef object _partition
    cdef object _last_key
    cdef Py_ssize_t _last_key_len
    cdef const unsigned char* _last_key_ptr

    cdef int fill(self, list out, Py_ssize_t n) except -1
    cdef int _frame(self, int count) except -1
    cdef object _header_key(self, const unsigned char* p, Py_ssize_t n)


cdef V2Records open_v2(bytes raw, Py_ssize_t at, object topic, object partition, Py_ssize_t limit)
