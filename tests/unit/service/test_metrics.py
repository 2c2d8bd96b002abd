"""Every drop and every restamp reaches Prometheus as a counter with its reason."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from sidecar.core import MergeTask, Record, TaskConfig, TopicPartition
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
