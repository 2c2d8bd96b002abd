"""The benchmark's figures, on inputs small enough to check by hand (no broker)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from bench import analysis, collect
from bench.analysis import Inputs, Output


def _inputs(rows: list[tuple[int, int, int]]) -> Inputs:
    """(topic, partition, ts) per id, offsets in list order per partition."""
    seen: dict[tuple[int, int], int] = {}
    offsets = []
    for topic, part, _ in rows:
        offsets.append(seen.get((topic, part), 0))
        seen[(topic, part)] = offsets[-1] + 1
    col = lambda i: np.asarray([r[i] for r in rows], dtype=np.int64)  # noqa: E731
    return Inputs(col(0), col(1), np.asarray(offsets, dtype=np.int64), col(2), np.zeros(len(rows), np.int64))


@given(st.lists(st.integers(0, 20), max_size=200))
def test_inversions_count_every_out_of_order_pair(ts: list[int]) -> None:
    expected = sum(1 for i in range(len(ts)) for j in range(i + 1, len(ts)) if ts[i] > ts[j])
    assert analysis.inversions(ts) == expected


def test_disorder_measures_lateness_against_the_running_maximum() -> None:
    d = analysis.disorder(np.asarray([1, 5, 3, 6, 2, 7], dtype=np.int64))
    assert d["late_records"] == 2  # 3 (max 5) and 2 (max 6)
    assert d["late_share"] == round(2 / 6, 6)
    assert d["inversions"] == 4  # (5,3) (5,2) (3,2) (6,2)
    assert d["lateness_max_ms"] == 4


def test_ideal_merge_takes_the_smallest_head_and_keeps_partition_order() -> None:
    # Partition (0,0) holds 5 then 1: the 1 cannot overtake the 5, so one inversion remains.
    inputs = _inputs([(0, 0, 5), (0, 0, 1), (1, 0, 2), (1, 0, 6)])
    (merged,) = analysis.ideal_merge(inputs)
    assert inputs.ts[merged].tolist() == [2, 5, 1, 6]
    assert analysis.inversions(inputs.ts[merged]) == 2


def test_ideal_merge_breaks_ties_by_topic_position_then_partition() -> None:
    inputs = _inputs([(1, 0, 3), (0, 1, 3), (0, 0, 3)])
    (merged,) = analysis.ideal_merge(inputs)
    assert merged.tolist() == [2, 1, 0]


def test_ideal_merge_per_partition_index_forms_one_task_per_index() -> None:
    inputs = _inputs([(0, 0, 4), (0, 1, 1), (1, 0, 2), (1, 1, 3)])
    task0, task1 = analysis.ideal_merge(inputs, per_partition_index=True)
    assert task0.tolist() == [2, 0]
    assert task1.tolist() == [1, 3]


def test_orders_that_differ_only_among_equal_timestamps_are_equal_up_to_ties() -> None:
    ts = np.asarray([1, 2, 2, 3], dtype=np.int64)
    a, b = np.asarray([0, 1, 2, 3]), np.asarray([0, 2, 1, 3])
    same = analysis.same_order_up_to_ties(a, b, ts)
    assert same["equal"]
    assert not same["equal_exactly"]
    assert same["positions_differing"] == 2
    c = np.asarray([1, 0, 2, 3])  # swaps timestamps 1 and 2
    assert not analysis.same_order_up_to_ties(a, c, ts)["equal"]


def test_consumer_order_follows_append_time_across_partitions() -> None:
    out = Output(
        id=np.asarray([10, 11, 12]),
        partition=np.asarray([0, 1, 0]),
        offset=np.asarray([0, 0, 1]),
        append_ms=np.asarray([5, 3, 5]),
        enforced=np.zeros(3, bool),
        late=np.zeros(3, bool),
    )
    assert out.id[out.consumer_order()].tolist() == [11, 10, 12]


def test_latency_percentiles_and_cdf() -> None:
    lat = analysis.latency(np.arange(1, 101, dtype=np.int64))
    assert (lat["p50_ms"], lat["p99_ms"], lat["max_ms"], lat["count"]) == (50, 99, 100, 100)
    assert lat["cdf"][0] == [0.0, 1]
    assert lat["cdf"][-1] == [100.0, 100]
    assert analysis.latency(np.asarray([], dtype=np.int64))["p99_ms"] is None


def test_steady_rate_reads_the_middle_half_of_the_output() -> None:
    # 1,000 records: slow start (warm-up), then 100 records per 100 ms.
    samples = [(0, 0), (1000, 100), (1100, 200), (1200, 300), (1300, 400), (1400, 500), (1500, 600),
               (1600, 700), (1700, 800), (1800, 900), (1900, 1000)]  # fmt: skip
    assert collect.steady_rate(samples, 1000) == 1000.0
