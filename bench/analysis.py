"""What the benchmark computes from the records: latency, disorder, reference orders.

Pure functions over numpy arrays, no Kafka: the harness reads the topics and hands the columns
over, so every figure here can be unit-tested on small hand-made inputs.

Records are identified by their *id*: the index of the input record in the workload (header
``bench.id``). Per id the harness knows the input coordinates (topic position in the input list,
partition, offset), the event timestamp, and the wall-clock millisecond the record became
available to the system under test.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

# Latencies are recorded in ms with 3 significant digits up to one hour.
HDR_MAX_MS = 3_600_000
CDF_PERCENTILES = (0.0, 1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 97, 98, 99, 99.5, 99.9, 99.99, 100.0)

Int64 = np.ndarray[Any, np.dtype[np.int64]]


@dataclass(frozen=True)
class Inputs:
    """Columns indexed by record id (``len`` = number of input records)."""

    topic: Int64  # position of the record's topic in the input list (the tie-break order)
    partition: Int64
    offset: Int64
    ts: Int64  # event timestamp, ms
    available_ms: Int64  # wall-clock ms when the system could first read it

    def __len__(self) -> int:
        return len(self.ts)


@dataclass(frozen=True)
class Output:
    """The data records of one output topic as read back: one entry per record, any order."""

    id: Int64
    partition: Int64
    offset: Int64
    append_ms: Int64  # the broker's LogAppendTime: when the record became visible
    enforced: np.ndarray[Any, np.dtype[np.bool_]]
    late: np.ndarray[Any, np.dtype[np.bool_]]

    def consumer_order(self) -> Int64:
        """Positions in the order one consumer of the whole topic sees them: by append time, then
        partition and offset (exactly the offset order when there is one partition)."""
        return np.lexsort((self.offset, self.partition, self.append_ms))


def latency(latencies_ms: Int64) -> dict[str, Any]:
    """p50/p95/p99/p99.9/max/mean of latencies (ms) through an HdrHistogram, and CDF points."""
    hist = HdrHistogram(1, HDR_MAX_MS, 3)
    values, counts = np.unique(np.clip(latencies_ms, 0, HDR_MAX_MS), return_counts=True)
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        hist.record_value(value, count)
    if hist.get_total_count() == 0:
        return {"count": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "p999_ms": None,
                "max_ms": None, "mean_ms": None, "cdf": []}  # fmt: skip
    return {
        "count": int(hist.get_total_count()),
        "p50_ms": int(hist.get_value_at_percentile(50)),
        "p95_ms": int(hist.get_value_at_percentile(95)),
        "p99_ms": int(hist.get_value_at_percentile(99)),
        "p999_ms": int(hist.get_value_at_percentile(99.9)),
        "max_ms": int(hist.get_max_value()),
        "mean_ms": round(float(hist.get_mean_value()), 1),
        "cdf": [[p, int(hist.get_value_at_percentile(p))] for p in CDF_PERCENTILES],
    }


def inversions(ts: Sequence[int] | Int64) -> int:
    """Pairs ``i < j`` with ``ts[i] > ts[j]``: the exact distance from sorted (bottom-up merge
    count, vectorised per level; O(n log² n) in numpy)."""
    a = np.asarray(ts, dtype=np.int64)
    n = len(a)
    if n < 2:
        return 0
    ranks = np.unique(a, return_inverse=True)[1].astype(np.int64)
    size = 1 << (n - 1).bit_length()
    work = np.full(size, n + 1, dtype=np.int64)  # padding larger than every rank adds no pairs
    work[:n] = ranks
    total = 0
    width = 1
    while width < size:
        blocks = work.reshape(-1, 2, width)
        left, right = blocks[:, 0, :], blocks[:, 1, :]
        # Both halves are sorted; count, for each right element, the left elements above it. A
        # block-major key makes one global searchsorted serve every block at once.
        block = np.arange(blocks.shape[0], dtype=np.int64)[:, None] * (n + 2)
        flat_left = (left + block).ravel()
        pos = np.searchsorted(flat_left, (right + block).ravel(), side="right")
        start = (np.arange(blocks.shape[0], dtype=np.int64) * width)[:, None]
        above = width - (pos.reshape(-1, width) - start)
        total += int(above.sum())
        work = np.sort(work.reshape(-1, 2 * width), axis=1).ravel()
        width *= 2
    return total


def disorder(ts: Int64) -> dict[str, Any]:
    """How far a sequence of timestamps is from event-time order.

    ``late`` records arrive below the running maximum; lateness = running max − timestamp (0 for
    records in order), whose p99 and max are taken over all records (Kafka Streams'
    ``record-lateness`` convention). ``inversions`` counts every out-of-order pair.
    """
    if len(ts) == 0:
        return {"late_records": 0, "late_share": 0.0, "inversions": 0, "lateness_p99_ms": 0,
                "lateness_max_ms": 0}  # fmt: skip
    lateness = np.maximum.accumulate(ts) - ts
    late = int(np.count_nonzero(lateness))
    return {
        "late_records": late,
        "late_share": round(late / len(ts), 6),
        "inversions": inversions(ts),
        "lateness_p99_ms": int(np.percentile(lateness, 99, method="higher")),
        "lateness_max_ms": int(lateness.max()),
    }


def within_partitions(out: Output, inputs: Inputs) -> int:
    """Inversions summed over the output partitions, each read in offset order on its own."""
    total = 0
    for p in np.unique(out.partition):
        mine = out.partition == p
        order = np.argsort(out.offset[mine], kind="stable")
        total += inversions(inputs.ts[out.id[mine][order]])
    return total


def ideal_merge(inputs: Inputs, per_partition_index: bool = False) -> list[Int64]:
    """The merge with full knowledge: per task, always the head record with the smallest
    timestamp (ties by topic position, partition), never reordering a partition.

    This is what a merger that waits for every partition (``max.task.idle.ms=max``) emits; the
    inversions it still holds come from partitions that are themselves out of order. One task
    over every partition, or (``per_partition_index``) one task per partition index, as Kafka
    Streams and ``task.grouping=partition`` form them. Returns the ids per task.
    """
    queues: dict[tuple[int, int], list[int]] = {}
    order = np.lexsort((inputs.offset, inputs.partition, inputs.topic))
    for i in order.tolist():
        queues.setdefault((int(inputs.topic[i]), int(inputs.partition[i])), []).append(i)
    tasks: dict[int, list[tuple[int, int]]] = {}
    for topic, part in queues:
        tasks.setdefault(part if per_partition_index else 0, []).append((topic, part))
    ts = inputs.ts.tolist()
    result = []
    for task in sorted(tasks):
        heap: list[tuple[int, int, int, int]] = []
        for topic, part in tasks[task]:
            heap.append((ts[queues[(topic, part)][0]], topic, part, 0))
        heapq.heapify(heap)
        out: list[int] = []
        while heap:
            _, topic, part, pos = heapq.heappop(heap)
            queue = queues[(topic, part)]
            out.append(queue[pos])
            if pos + 1 < len(queue):
                heapq.heappush(heap, (ts[queue[pos + 1]], topic, part, pos + 1))
        result.append(np.asarray(out, dtype=np.int64))
    return result


def optimum_order(inputs: Inputs) -> Int64:
    """The offline optimum: every record sorted by (timestamp, topic position, partition, offset)."""
    return np.lexsort((inputs.offset, inputs.partition, inputs.topic, inputs.ts))


def same_order_up_to_ties(a: Int64, b: Int64, ts: Int64) -> dict[str, Any]:
    """Compare two output orders (ids) of the same records.

    ``equal`` when both hold the same ids and, cutting each into runs of equal timestamp, the
    runs hold the same ids in the same sequence of timestamps — the order among equal timestamps
    is free (Kafka Streams has no tie-break there). Also counts positions whose id differs.
    """
    same_length = len(a) == len(b)
    n = min(len(a), len(b))
    positions = int(np.count_nonzero(a[:n] != b[:n])) + abs(len(a) - len(b))
    if not same_length:
        return {"equal": False, "equal_exactly": False, "positions_differing": positions,
                "tie_runs_differing": None}  # fmt: skip
    ts_a, ts_b = ts[a], ts[b]
    if not np.array_equal(ts_a, ts_b):
        return {"equal": False, "equal_exactly": False, "positions_differing": positions,
                "tie_runs_differing": None}  # fmt: skip
    # Same timestamp sequence: compare each run of equal timestamps as a set of ids.
    cuts = np.flatnonzero(np.diff(ts_a)) + 1
    differing = 0
    for run_a, run_b in zip(np.split(a, cuts), np.split(b, cuts), strict=True):
        if not np.array_equal(np.sort(run_a), np.sort(run_b)):
            differing += 1
    return {
        "equal": differing == 0,
        "equal_exactly": positions == 0,
        "positions_differing": positions,
        "tie_runs_differing": differing,
    }
