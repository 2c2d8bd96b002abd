"""``PartitionGroup``: a task's partitions, which head goes next, and how a batch is taken.

Theory of operation
-------------------
The partitions with buffered records sit in a heap keyed by their head, ``(timestamp, rank)``
(see ``merge.py``). Readiness is the :class:`~sidecar.core.readiness.Gate`'s to decide; the group
only takes, in output order, until a partition that runs dry blocks (or the budget is spent).
It knows two ways to take the same records:

* **sorted** — every buffer is known to be non-decreasing (the common case): find the point
  where the merge would stop by binary searches over the buffers' last keys, then merge what
  comes before it with one stable sort, in C;
* **runs** — the general case: pop the smallest head, take its run (while it beats the
  second-best head), repeat.

Both hand the chosen records to the same :class:`~sidecar.core.batch.BatchDraft`, which applies
the late and refused-timestamp policies, and consume partitions the same way (``_consume``).
The property tests hold both to a record-by-record reference model.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from sidecar.core.batch import NO_BOUND, BatchDraft
from sidecar.core.config import TaskConfig
from sidecar.core.merge import PartitionState, count_upto, cut_index, merge_sorted, queue_of, run_end
from sidecar.core.readiness import Blockers, Gate, task_empty, task_holds
from sidecar.core.records import InputRecord


class PartitionGroup:
    """The input partitions of one task, in index order and in tie-break (rank) order."""

    __slots__ = ("_config", "_gate", "heap", "parts", "ranked")

    def __init__(self, parts: Sequence[PartitionState], gate: Gate, config: TaskConfig) -> None:
        self.parts = list(parts)
        self.ranked = sorted(self.parts, key=lambda p: p.rank)
        #: ``(head timestamp, rank, index)`` of every partition holding records.
        self.heap: list[tuple[int, int, int]] = []
        self._gate = gate
        self._config = config

    @property
    def has_data(self) -> bool:
        return bool(self.heap)

    def arrived(self, p: PartitionState, now_ms: int) -> None:
        """``p`` was empty and now holds records: it competes for the head again. If nothing was
        held before, the partitions' quiet clocks run again (``readiness.py``)."""
        if not self.heap:
            task_holds(self.parts, now_ms)
        heapq.heappush(self.heap, (p.queue.head_timestamp(), p.rank, p.index))

    def blockers(self, now_ms: int) -> Blockers:
        """What holds a take back now (nothing, when nothing is buffered: there is no take)."""
        if not self.heap:
            return Blockers()
        return self._gate.assess(self.parts, now_ms)

    def take(self, now_ms: int, budget: int, stream_time: int, enforced: bool) -> BatchDraft:
        """Take records in output order into a draft until a partition that runs dry blocks,
        a refused time stops the batch, or ``budget`` records are taken; ``stream_time`` is the
        task's before the take, ``enforced`` whether what is taken is enforced from the start (an
        empty partition passed already). If nothing is held any more, the quiet clocks stop:
        nothing is waited for. Raises :class:`RefusedTimestampError` as :meth:`BatchDraft.add`."""
        draft = BatchDraft(self._config, now_ms, stream_time)
        if enforced:
            draft.mark_enforced()
        if all(queue_of(p).monotonic for p in self.parts if not p.queue.empty):
            self._take_sorted(draft, now_ms, budget)
        else:
            self._take_runs(draft, now_ms, budget)
        if not self.heap:
            task_empty(self.parts, now_ms)
        return draft

    def _take_sorted(self, draft: BatchDraft, now_ms: int, budget: int) -> None:
        """Every buffer is sorted: cut each where the merge would stop, then sort once.

        The merge stops right after the last record of the first partition to run dry whose
        verdict blocks. Partitions run dry in the order of their last keys (timestamp, rank), so
        that cut is found with binary searches, and the records up to it are merged by one
        stable sort. Same output as the record-by-record merge, at C speed.
        """
        active = [p for p in self.ranked if not p.queue.empty]
        queues = {p.index: queue_of(p) for p in active}
        cut, enforced_key, over_budget = self._sorted_cut(active, now_ms, budget)
        ends = {p.index: cut_index(p, *cut) if cut else len(queues[p.index].timestamps) for p in active}
        chunks = [(q.records[q.head : ends[i]], q.timestamps[q.head : ends[i]]) for i, q in queues.items()]
        records, stamps = merge_sorted([c for c in chunks if c[1]])
        if over_budget and len(records) > budget:
            records, stamps = records[:budget], stamps[:budget]
            _recut(active, ends, records, stamps)
        # Enforced processing starts after the first partition that ran dry and passed.
        enforced_at = len(records) if enforced_key is None else count_upto(active, *enforced_key)
        taken = draft.add_merged(records, stamps, enforced_at)
        if taken < len(records):  # stopped at a refused time: it and what follows stay buffered
            records, stamps = records[:taken], stamps[:taken]
            _recut(active, ends, records, stamps)
        for p in active:
            q, end = queues[p.index], ends[p.index]
            if end > q.head:
                draft.firsts[p.index] = q.records[q.head].offset
                _consume(p, end, now_ms)
        self.heap[:] = [(p.queue.head_timestamp(), p.rank, p.index) for p in active if not p.queue.empty]
        heapq.heapify(self.heap)

    def _sorted_cut(
        self, active: list[PartitionState], now_ms: int, budget: int
    ) -> tuple[tuple[int, int] | None, tuple[int, int] | None, bool]:
        """Where the sorted take stops, as the key of its last record (``None``: take
        everything); the key of the first partition that ran dry and passed (enforced
        processing follows it); and whether the budget, not readiness, set the cut."""
        gated = self._gate.enabled
        if not gated and sum(p.queue.buffered for p in active) <= budget:
            return None, None, False
        enforced_key = None
        order = sorted(active, key=lambda p: (p.queue.last_timestamp(), p.rank))
        for q in order:
            key = (q.queue.last_timestamp(), q.rank)
            if count_upto(active, *key) > budget:
                return key, enforced_key, True
            if not gated or q is order[-1]:
                continue  # nothing follows the last record: no readiness to judge
            if not self._gate.passes(q, now_ms):
                return key, enforced_key, False
            if enforced_key is None:
                enforced_key = key
        return None, enforced_key, False

    def _take_runs(self, draft: BatchDraft, now_ms: int, budget: int) -> None:
        """The general merge loop, for buffers that are not sorted: runs of records in order."""
        heap, parts = self.heap, self.parts
        while heap and budget > 0:
            _, rank, i = heap[0]
            p = parts[i]
            if len(heap) == 1:
                end = run_end(p, NO_BOUND, True, budget)
            else:
                second = heap[1] if len(heap) == 2 or heap[1] < heap[2] else heap[2]
                end = run_end(p, second[0], rank < second[1], budget)
            q = queue_of(p)
            h, ts = q.head, q.timestamps
            draft.firsts.setdefault(i, q.records[h].offset)
            taken = draft.add(q.records, ts, h, end, q.monotonic)
            if taken < end:  # a refused time stops the batch; it stays at the head, unconsumed
                if taken == h and draft.firsts.get(i) == q.records[h].offset:
                    del draft.firsts[i]
                _consume(p, taken, now_ms)
                heapq.heapreplace(heap, (ts[taken], p.rank, i))
                return
            _consume(p, end, now_ms)
            budget -= end - h
            if end < len(ts):
                heapq.heapreplace(heap, (ts[end], p.rank, i))
                continue
            heapq.heappop(heap)
            if heap and self._gate.enabled:  # with nothing left to take there is nothing to judge
                if not self._gate.passes(p, now_ms):
                    return
                draft.mark_enforced()


def _consume(p: PartitionState, end: int, now_ms: int) -> None:
    """``p``'s records up to ``end`` were taken: its head, partition time and watermark move."""
    q = queue_of(p)
    h, ts = q.head, q.timestamps
    if end == h:
        return
    if q.monotonic:
        low, high = ts[h], ts[end - 1]
    else:
        low, high = min(ts[h:end]), max(ts[h:end])
    if p.partition_time is None or high > p.partition_time:
        p.partition_time = high
    p.watermark_policy.on_take(low, high, now_ms)
    q.head = end


def _recut(
    active: list[PartitionState], ends: dict[int, int], records: list[InputRecord], stamps: list[int]
) -> None:
    """Set ``ends`` so that exactly the (merged, shortened, non-empty) ``records`` are taken."""
    last = next(p for p in active if p.tp == (records[-1].topic, records[-1].partition))
    others = 0
    for p in active:
        if p is not last:
            ends[p.index] = cut_index(p, stamps[-1], last.rank)
            others += ends[p.index] - queue_of(p).head
    ends[last.index] = queue_of(last).head + len(records) - others
