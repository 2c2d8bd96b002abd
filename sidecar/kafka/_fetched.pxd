# The record type's fields, for the C modules that read them without attribute lookups
# (sidecar/output/_stamp_encoder.pyx).

cdef class FetchedRecord:
    cdef readonly object topic
    cdef readonly object partition
    cdef readonly object offset
    cdef readonly object timestamp
    cdef readonly object timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef readonly tuple headers
