# cython: language_level=3, boundscheck=False, wraparound=False
"""The take in C: a task's partitions merged in output order, with the batch's policies.

The same contract as :class:`sidecar.core.group.PartitionGroup` with
:class:`sidecar.core.batch.BatchDraft` (the reference: read their docstrings first), over
partitions whose records are held by :class:`~sidecar.core._kernel_queue.KernelQueue` s. It
makes no Python object per record: the heads sit in a C heap keyed ``(head time, rank)``; the
head partition goes for as long as its next record beats the second-best head (its *run*, found
by a scan of its times); each record of the run is judged on the way — refused by the output
topic's broker (stop, skip or dead letter), late (forward, drop or route aside), or emitted —
and written to a :class:`~sidecar.core._kernel_taken.Taken` as where it is and its time. When
a partition runs dry while others still hold records, the task's
:class:`~sidecar.core.readiness.Gate` is asked, as the Python take asks it: the take stops
there, or goes on as enforced processing.

What a take changes beyond the queues' heads — a partition's time, its watermark policy, the
quiet clocks when the task holds nothing any more — is done once per partition at its end, with
the smallest and largest time taken from it (a watermark policy sees one ``on_take`` per take:
the same values at the same clock reading, so the same watermarks). Python is called only per
take and per partition, and for the rare records that need an object of their own (a dead
letter, a late record routed aside, the refused record that stops the sidecar).
"""

from libc.stdint cimport INT64_MAX, INT64_MIN, int32_t, int64_t
from libc.stdlib cimport free, malloc

from sidecar.core._kernel_queue cimport KernelQueue
from sidecar.core._kernel_taken cimport Taken

from sidecar.core.readiness import Blockers, task_empty, task_holds
from sidecar.core.records import DeadLetter, Late, TopicPartition
from sidecar.core.timestamps import RefusedTimestampError

cdef enum:
    LATE_FORWARD = 0
    LATE_DROP = 1
    LATE_TOPIC = 2
    REFUSED_STOPS = 0
    REFUSED_SKIPPED = 1
    REFUSED_DEAD = 2

cdef object _NOTHING_HELD = Blockers()


cdef struct Head:
    int64_t ts
    Py_ssize_t rank
    Py_ssize_t index


cdef inline bint _before(Head* a, Head* b) noexcept nogil:
    return a.ts < b.ts or (a.ts == b.ts and a.rank < b.rank)


cdef void _sift_down(Head* heap, Py_ssize_t n, Py_ssize_t at) noexcept nogil:
    cdef Head item = heap[at]
    cdef Py_ssize_t child
    while True:
        child = 2 * at + 1
        if child >= n:
            break
        if child + 1 < n and _before(&heap[child + 1], &heap[child]):
            child += 1
        if not _before(&heap[child], &item):
            break
        heap[at] = heap[child]
        at = child
    heap[at] = item


cdef class KernelDraft:
    """What a take produced: the attributes :class:`~sidecar.core.batch.BatchDraft` gives the
    task (``records`` and ``timestamps`` as a :class:`Taken` and its times)."""

    cdef public object records, timestamps, late, lateness, routed, dead_letters, firsts
    cdef public Py_ssize_t refused_skipped, dropped_late, enforced_from
    cdef public int64_t stream_time, stream_time_before


cdef class KernelGroup:
    """The input partitions of one task, their records in :class:`KernelQueue` s, taken in C."""

    cdef list parts, queues
    cdef Py_ssize_t count
    cdef Py_ssize_t* ranks
    cdef Head* heap
    # Per partition, during one take: the chunk last mapped into the Taken and its number there,
    # the head at the start, the smallest and largest time taken.
    cdef int32_t* mapped_slot
    cdef int32_t* mapped_no
    cdef Py_ssize_t* started
    cdef int64_t* low
    cdef int64_t* high
    cdef object _gate, _limits
    cdef bint _gated
    cdef int _late, _refused

    def __cinit__(self, parts, gate, config):
        self.parts = list(parts)
        self.queues = [p.queue for p in self.parts]
        for q in self.queues:
            if type(q) is not KernelQueue:
                raise TypeError(f"the C take needs KernelQueue s, not {type(q).__name__}")
        self.count = len(self.parts)
        self.ranks = <Py_ssize_t*>malloc(self.count * sizeof(Py_ssize_t))
        self.heap = <Head*>malloc(self.count * sizeof(Head))
        self.mapped_slot = <int32_t*>malloc(self.count * sizeof(int32_t))
        self.mapped_no = <int32_t*>malloc(self.count * sizeof(int32_t))
        self.started = <Py_ssize_t*>malloc(self.count * sizeof(Py_ssize_t))
        self.low = <int64_t*>malloc(self.count * sizeof(int64_t))
        self.high = <int64_t*>malloc(self.count * sizeof(int64_t))
        if not (self.ranks and self.heap and self.mapped_slot and self.mapped_no and self.started
                and self.low and self.high):
            raise MemoryError()
        for i, p in enumerate(self.parts):
            self.ranks[i] = p.rank
        self._gate = gate
        self._gated = gate.enabled
        self._limits = config.output_limits
        self._late = {"forward": LATE_FORWARD, "drop": LATE_DROP, "topic": LATE_TOPIC}[config.late_records]
        if config.refusal_stops:
            self._refused = REFUSED_STOPS
        else:
            self._refused = REFUSED_SKIPPED if config.timestamp_invalid == "skip" else REFUSED_DEAD

    def __dealloc__(self):
        free(self.ranks)
        free(self.heap)
        free(self.mapped_slot)
        free(self.mapped_no)
        free(self.started)
        free(self.low)
        free(self.high)

    @property
    def has_data(self):
        return self._holding(None)

    cdef bint _holding(self, KernelQueue but):
        cdef KernelQueue q
        for q in self.queues:
            if q is not but and q.head < q.size:
                return True
        return False

    def arrived(self, p, int64_t now_ms):
        """``p`` was empty and now holds records; if nothing else was held, the partitions'
        quiet clocks run again (``readiness.py``)."""
        if not self._holding(p.queue):
            task_holds(self.parts, now_ms)

    def blockers(self, int64_t now_ms):
        """What holds a take back now (nothing, when nothing is buffered: there is no take)."""
        if not self._holding(None):
            return _NOTHING_HELD
        return self._gate.assess(self.parts, now_ms)

    def take(self, int64_t now_ms, budget, int64_t stream_time, bint enforced):
        """As :meth:`PartitionGroup.take <sidecar.core.group.PartitionGroup.take>`."""
        cdef Py_ssize_t limit = budget if budget < <object>INT64_MAX else INT64_MAX
        cdef KernelDraft draft = KernelDraft()
        cdef Taken taken = Taken()
        draft.late, draft.lateness, draft.routed, draft.dead_letters = [], [], [], []
        draft.refused_skipped = draft.dropped_late = 0
        draft.stream_time = draft.stream_time_before = stream_time
        draft.enforced_from = 0 if enforced else -1
        self._merge(draft, taken, now_ms, limit)
        draft.records = taken
        draft.timestamps = taken.timestamps
        draft.firsts = self._settle(now_ms)
        if not self._holding(None):
            task_empty(self.parts, now_ms)
        return draft

    cdef int _merge(self, KernelDraft draft, Taken taken, int64_t now_ms, Py_ssize_t budget) except -1:
        """Take records in output order until a partition that runs dry blocks, a refused time
        stops the batch, or ``budget`` records are taken."""
        cdef Py_ssize_t heads = self._heads(taken, budget), h, end, i
        cdef int64_t lo = 0, hi = INT64_MAX
        cdef KernelQueue q
        cdef Head* heap = self.heap
        if self._limits is not None:
            window = self._limits.window(now_ms)
            lo = max(window[0], INT64_MIN)
            hi = min(window[1], INT64_MAX)
        while heads and budget > 0:
            i = heap[0].index
            q = <KernelQueue>self.queues[i]
            h = q.head
            end = self._run_end(q, i, heads, budget)
            stop = self._judge_run(draft, taken, q, i, h, end, lo, hi, now_ms)
            if stop < end:
                q.consume_to(stop)
                return 0
            q.consume_to(end)
            budget -= end - h
            if end < q.size:
                heap[0].ts = q.ts[end]
                _sift_down(heap, heads, 0)
                continue
            heads -= 1
            heap[0] = heap[heads]
            _sift_down(heap, heads, 0)
            if heads and self._gated:  # with nothing left to take there is nothing to judge
                if not self._gate.passes(self.parts[i], now_ms):
                    return 0
                if draft.enforced_from < 0:
                    draft.enforced_from = taken.n
        return 0

    cdef Py_ssize_t _heads(self, Taken taken, Py_ssize_t budget) except -1:
        """The heap of every partition holding records; the per-take notes reset."""
        cdef Py_ssize_t heads = 0, i, buffered = 0
        cdef KernelQueue q
        for i in range(self.count):
            q = <KernelQueue>self.queues[i]
            self.started[i] = q.head
            self.mapped_slot[i] = -1
            self.low[i] = INT64_MAX
            self.high[i] = INT64_MIN
            if q.head < q.size:
                self.heap[heads].ts = q.ts[q.head]
                self.heap[heads].rank = self.ranks[i]
                self.heap[heads].index = i
                heads += 1
                buffered += q.size - q.head
        for i in range(heads // 2 - 1, -1, -1):
            _sift_down(self.heap, heads, i)
        taken.reserve(min(buffered, budget))
        return heads

    cdef inline Py_ssize_t _run_end(self, KernelQueue q, Py_ssize_t i, Py_ssize_t heads, Py_ssize_t budget):
        """Index after the last record the head partition may emit before the next-best head
        must go (the head itself always goes); at most ``budget`` records."""
        cdef Py_ssize_t h = q.head, stop = q.size, j = h + 1
        cdef Head* second
        cdef int64_t* ts = q.ts
        if stop - h > budget:
            stop = h + budget
        if heads == 1:
            return stop
        second = &self.heap[1]
        if heads > 2 and _before(&self.heap[2], second):
            second = &self.heap[2]
        if self.ranks[i] < second.rank:  # wins ties
            while j < stop and ts[j] <= second.ts:
                j += 1
        else:
            while j < stop and ts[j] < second.ts:
                j += 1
        return j

    cdef Py_ssize_t _judge_run(
        self, KernelDraft draft, Taken taken, KernelQueue q, Py_ssize_t i, Py_ssize_t start,
        Py_ssize_t end, int64_t lo, int64_t hi, int64_t now_ms,
    ) except -1:
        """Each record of ``q[start:end]`` emitted, set aside as late, or refused; returns where
        the run stopped (``end``, or a refused record that stops the batch)."""
        cdef Py_ssize_t j, n
        cdef int64_t t, st = draft.stream_time
        cdef int32_t slot
        for j in range(start, end):
            t = q.ts[j]
            if t < lo or t > hi:
                if self._refuse(draft, taken, q, j, now_ms):
                    draft.stream_time = st
                    return j
            elif t < st and self._late != LATE_FORWARD:
                if self._late == LATE_TOPIC:
                    draft.routed.append(Late(q.record_at(j), t, st - t))
                else:
                    draft.dropped_late += 1
            else:
                n = taken.n
                if t < st:
                    draft.late.append(n)
                    draft.lateness.append(st - t)
                else:
                    st = t
                slot = q.slot[j]
                if slot != self.mapped_slot[i]:
                    self.mapped_slot[i] = slot
                    self.mapped_no[i] = <int32_t>len(taken.chunks)
                    taken.chunks.append(q.chunks[slot])
                taken.ts[n] = t
                taken.chunk_no[n] = self.mapped_no[i]
                taken.row[n] = q.row[j]
                taken.n = n + 1
            if t < self.low[i]:
                self.low[i] = t
            if t > self.high[i]:
                self.high[i] = t
        draft.stream_time = st
        return end

    cdef bint _refuse(self, KernelDraft draft, Taken taken, KernelQueue q, Py_ssize_t j, int64_t now_ms) except -1:
        """A time the broker would refuse: skipped, a dead letter, or — under ``none`` — the
        batch stops before it (``True``); the error itself when it would be the first."""
        cdef int64_t t = q.ts[j]
        if self._refused == REFUSED_SKIPPED:
            draft.refused_skipped += 1
            return False
        record = q.record_at(j)
        reason = self._limits.refusal(t, now_ms) or "refused"
        if self._refused == REFUSED_DEAD:
            draft.dead_letters.append(DeadLetter(record, reason, RefusedTimestampError.dead_letter_class))
            return False
        if taken.n or draft.routed or draft.dropped_late:
            return True
        raise RefusedTimestampError(TopicPartition(record.topic, record.partition), record.offset, reason)

    cdef dict _settle(self, int64_t now_ms):
        """After the take: each partition taken from moves its time and watermark; returns the
        first offset taken per partition index (for commits)."""
        cdef dict firsts = {}
        cdef Py_ssize_t i
        cdef KernelQueue q
        for i in range(self.count):
            q = <KernelQueue>self.queues[i]
            if q.head == self.started[i]:
                continue
            p = self.parts[i]
            high = self.high[i]
            if p.partition_time is None or high > p.partition_time:
                p.partition_time = high
            p.watermark_policy.on_take(self.low[i], high, now_ms)
            firsts[i] = q.record_at(self.started[i]).offset
        return firsts
