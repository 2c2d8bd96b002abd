"""A partition's state; the choice of the next record, stream time and lateness.

Theory of operation
-------------------
Each input partition has a queue of fetched records in offset order (``record_queue.py``: two
parallel lists, records and their event times, with a head index, so taking a run of records
is a slice, not a loop of pops). Non-empty partitions sit in a heap keyed by their head:
``(head timestamp, rank)``, where the rank is the partition's place in the tie-break order
(position of its topic in ``input.topics``, then partition number). The head with the smallest
key goes next; records are never reordered inside a partition.

Instead of one heap operation per record, the merge takes a *run*: after choosing partition
``p``, it keeps taking from ``p`` while p's next head still beats the second-best head. The
result is exactly the record-by-record merge, but a fast partition beside slow ones costs one
heap operation per run rather than per record. When a partition's buffered timestamps are known
to be non-decreasing (the common case, tracked at push), the run's end is found by binary
search in C instead of a Python loop.

Stream time is the largest timestamp emitted so far (never decreasing); a record emitted below
it is late by the difference. Partition time is the largest timestamp taken from a partition.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from sidecar.core.record_queue import BufferedRecords, RecordQueue
from sidecar.core.records import InputRecord, TopicPartition

if TYPE_CHECKING:
    from sidecar.core.watermarks import PartitionWatermark


class PartitionState:
    """Everything the task knows about one input partition."""

    __slots__ = (
        "caught_up_at",
        "counted_from",
        "index",
        "lag",
        "next_offset",
        "partition_time",
        "paused",
        "queue",
        "quiet_since",
        "rank",
        "start_offset",
        "stopped_at",
        "tp",
        "watermark",
        "watermark_policy",
    )

    def __init__(
        self,
        tp: TopicPartition,
        index: int,
        rank: int,
        policy: PartitionWatermark,
        queue: BufferedRecords | None = None,
    ) -> None:
        """``queue`` holds its buffered records: by default a Python :class:`RecordQueue`."""
        self.tp = tp
        self.index = index
        self.rank = rank
        #: The buffered records, in offset order (``record_queue.py``; the C kernel's own, or not).
        self.queue: BufferedRecords = queue if queue is not None else RecordQueue()
        #: Lag from the last fetch response; ``None`` until a fetch told us.
        self.lag: int | None = None
        #: Time of the last fetch response that showed lag 0.
        self.caught_up_at: int | None = None
        # The idle rule's quiet clock, kept by ``readiness.py`` (see its docstring).
        #: Start of the partition's quiet spell: its last arrival, or the first fetch that showed
        #: it caught up since its lag was unknown or positive; ``None`` while it is not caught up.
        self.quiet_since: int | None = None
        #: The clock's origin: the quiet time counted so far is ``clock − counted_from``.
        self.counted_from: int | None = None
        #: When the clock stopped (the partition paused, or the task holding nothing); ``None``
        #: while it runs. A task starts holding nothing: the clock starts stopped.
        self.stopped_at: int | None = 0
        #: Paused for backpressure or by an operator's hold: not fetched, its lag stale.
        self.paused = False
        #: Offset of the first record pushed (where consumption started) and after the last one
        #: (valid, skipped or dead-lettered); ``None`` before any push.
        self.start_offset: int | None = None
        self.next_offset: int | None = None
        self.partition_time: int | None = None
        self.watermark_policy = policy
        self.watermark: int | None = None

    @property
    def buffered(self) -> int:
        return self.queue.buffered

    @property
    def empty(self) -> bool:
        """Nothing of this partition is buffered."""
        return self.queue.empty

    def head_offset(self) -> int | None:
        return self.queue.head_offset()


def ranks(
    partitions: Sequence[TopicPartition], topic_order: Sequence[str] | None
) -> dict[TopicPartition, int]:
    """Each partition's place in the tie-break order: its topic's in ``topic_order`` (by
    default, first appearance), then its partition number."""
    order = (
        list(topic_order) if topic_order is not None else list(dict.fromkeys(tp.topic for tp in partitions))
    )
    unknown = {tp.topic for tp in partitions} - set(order)
    if unknown:
        raise ValueError(f"topics {sorted(unknown)} are not in the topic order {order}")
    ranked = sorted(partitions, key=lambda tp: (order.index(tp.topic), tp.partition))
    return {tp: r for r, tp in enumerate(ranked)}


def queue_of(p: PartitionState) -> RecordQueue:
    """``p``'s queue, on the Python take path (which only ever gives partitions Python queues)."""
    return cast(RecordQueue, p.queue)


def run_end(p: PartitionState, bound_ts: int, wins_ties: bool, limit: int) -> int:
    """Index after the last record p may emit before the next-best head (``bound_ts``) must go.

    The head itself always goes (it is the smallest). ``wins_ties``: on an equal timestamp p
    still goes first, because its rank is smaller than the next-best partition's.
    """
    q = queue_of(p)
    ts, h = q.timestamps, q.head
    stop = min(len(ts), h + limit)
    if q.monotonic:
        end = bisect_right(ts, bound_ts, h + 1, stop) if wins_ties else bisect_left(ts, bound_ts, h + 1, stop)
        return max(end, h + 1)
    j = h + 1
    if wins_ties:
        while j < stop and ts[j] <= bound_ts:
            j += 1
    else:
        while j < stop and ts[j] < bound_ts:
            j += 1
    return j


def late_positions(ts: list[int], start: int, end: int, stream_time: int) -> list[tuple[int, int]]:
    """(index, lateness) of the records in ``ts[start:end]`` below the stream time at their turn.

    ``stream_time`` is the stream time before ``start``; it rises as the run goes. (For a sorted
    run the late records are a prefix, found by one binary search instead.)
    """
    late = []
    high = stream_time
    for j in range(start, end):
        t = ts[j]
        if t < high:
            late.append((j, high - t))
        else:
            high = t
    return late


def cut_index(p: PartitionState, ts_bound: int, rank_bound: int) -> int:
    """Index after p's last buffered record whose key (timestamp, rank) is at most the bound.

    Only for a monotonic partition: its keys are sorted, so this is a binary search.
    """
    q = queue_of(p)
    if p.rank <= rank_bound:
        return bisect_right(q.timestamps, ts_bound, q.head)
    return bisect_left(q.timestamps, ts_bound, q.head)


def count_upto(parts: Sequence[PartitionState], ts_bound: int, rank_bound: int) -> int:
    """How many buffered records of monotonic partitions have a key at most (ts_bound, rank_bound)."""
    return sum(cut_index(p, ts_bound, rank_bound) - queue_of(p).head for p in parts)


def merge_sorted(
    chunks: Sequence[tuple[list[InputRecord], list[int]]],
) -> tuple[list[InputRecord], list[int]]:
    """Merge per-partition chunks, each sorted, given in tie-break (rank) order.

    Python's sort is stable: sorting the concatenation by timestamp alone keeps equal timestamps
    in rank order and, within a partition, in offset order — exactly the merge's total order —
    and timsort merges pre-sorted runs in C, far faster than a heap in Python.
    """
    if len(chunks) == 1:
        return chunks[0]
    records: list[InputRecord] = []
    stamps: list[int] = []
    for recs, ts in chunks:
        records += recs
        stamps += ts
    order = sorted(range(len(stamps)), key=stamps.__getitem__)
    return [records[i] for i in order], [stamps[i] for i in order]
