# The kernel's record columns — a timestamp, and where the record sits (a chunk and a row in it)
# — kept as three parallel C arrays by the queue (_kernel_queue.pyx) and by what a take hands
# over (_kernel_taken.pyx). Header-only: both grow them with this one helper.

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport realloc


cdef inline int grow_columns(
    int64_t** ts, int32_t** where, int32_t** row, Py_ssize_t* cap, Py_ssize_t need, Py_ssize_t least
) except -1:
    """Room for ``need`` entries in each column: the capacity doubles (at least ``least``), so a
    run of appends costs amortised O(1). MemoryError leaves every column valid (a column already
    grown just has room to spare)."""
    cdef Py_ssize_t size = cap[0]
    cdef int64_t* new_ts
    cdef int32_t* new_where
    cdef int32_t* new_row
    if need <= size:
        return 0
    size = max(need, 2 * size, least)
    new_ts = <int64_t*>realloc(ts[0], size * sizeof(int64_t))
    if new_ts == NULL:
        raise MemoryError()
    ts[0] = new_ts
    new_where = <int32_t*>realloc(where[0], size * sizeof(int32_t))
    if new_where == NULL:
        raise MemoryError()
    where[0] = new_where
    new_row = <int32_t*>realloc(row[0], size * sizeof(int32_t))
    if new_row == NULL:
        raise MemoryError()
    row[0] = new_row
    cap[0] = size
    return 0
