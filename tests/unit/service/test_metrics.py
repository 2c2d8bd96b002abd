"""Every drop and every restamp reaches Prometheus as a counter with its reason; learnt idles as gauges."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from sidecar.core import IDLE_AUTO, MergeTask, Record, TaskConfig, TopicPartition
from sidecar.service.metrics import Metrics

A0 = TopicPartition("a", 0)


def samples(metrics: Metrics, name: str) -> dict[str, float]:
    """``reason`` label → value of counter ``name`` (its ``_total`` samples)."""
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            if sample.name == name + "_total":
                out[sample.labels.get("reason", "")] = sample.value
    return out


def run(invalid: str, stamps: list[int]) -> MergeTask:
    task = MergeTask([A0], TaskConfig(max_task_idle_ms=-1, timestamp_invalid=invalid))  # type: ignore[arg-type]
    task.push(A0, [Record("a", 0, i, ts) for i, ts in enumerate(stamps)])
    while task.poll(0).__class__.__name__ == "Emit":
        pass
    return task


def test_skipped_invalid_timestamps_are_counted_as_drops() -> None:
    metrics = Metrics()
    task = run("skip", [5, -1, 7, -1])
    metrics.observe_task("t0", task.snapshot(0), incarnation=1)
    assert samples(metrics, "timesync_dropped_records") == {"invalid-timestamp": 2}


def test_partition_time_restamps_are_counted_and_not_counted_twice() -> None:
    metrics = Metrics()
    task = run("partition-time", [5, -1, 7, -1])
    metrics.observe_task("t0", task.snapshot(0), incarnation=1)
    metrics.observe_task("t0", task.snapshot(0), incarnation=1)  # the next second: nothing new
    assert samples(metrics, "timesync_restamped_records") == {"partition-time": 2}


def test_a_task_started_again_adds_its_own_counts() -> None:
    metrics = Metrics()
    metrics.observe_task("t0", run("skip", [-1, -1, -1]).snapshot(0), incarnation=1)
    metrics.observe_task("t0", run("skip", [-1]).snapshot(0), incarnation=2)  # restarted: counts from 0
    assert samples(metrics, "timesync_dropped_records") == {"invalid-timestamp": 4}


def idle_gauge(metrics: Metrics) -> dict[tuple[str, str], float]:
    return {
        (s.labels["topic"], s.labels["partition"]): s.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for s in family.samples
        if s.name == "timesync_partition_idle_seconds"
    }


def test_the_learnt_idle_is_a_gauge_per_partition_under_auto_only() -> None:
    metrics = Metrics()
    auto = MergeTask([A0], TaskConfig(max_task_idle_ms=IDLE_AUTO, max_task_idle_budget_ms=250))
    metrics.observe_task("t0", run("skip", [5]).snapshot(0), incarnation=1)
    assert idle_gauge(metrics) == {}  # a fixed setting: nothing learnt

    metrics.observe_task("t1", auto.snapshot(0), incarnation=1)
    assert idle_gauge(metrics) == {("a", "0"): 0.25}  # nothing learnt yet: the budget

    metrics.forget_task("t1", [("a", 0)])
    assert idle_gauge(metrics) == {}
