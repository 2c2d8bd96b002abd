"""Prometheus metrics with Kafka Streams' meanings, updated per batch, never per record.

``prometheus_client``'s ``Histogram.observe`` costs about a microsecond; observing every output
record's lateness (almost always 0) would cost more than the merge itself. So the lateness
histogram is a small collector of our own that takes a batch at once: ``n`` on-time records
land in the first bucket in one addition, and only the rare late records are placed one by one.
"""

from __future__ import annotations

import contextlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics, generate_latest
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from sidecar.core.records import Emit

disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created series only add noise

LATENESS_BUCKETS_S = (0.0, 0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, 3600.0)


class LatenessHistogram(Collector):
    def __init__(self) -> None:
        self.bounds = LATENESS_BUCKETS_S
        self.bounds_ms = [round(b * 1000) for b in LATENESS_BUCKETS_S]
        self.counts = [0] * (len(self.bounds) + 1)  # last: +Inf
        self.sum_s = 0.0

    def observe_batch(self, on_time: int, lateness_ms: list[int]) -> None:
        """``on_time`` records with lateness 0, plus the lateness (ms) of each late one."""
        self.counts[0] += on_time
        if not lateness_ms:
            return
        ordered = sorted(lateness_ms)  # then one binary search per bucket, not per record
        below = 0
        for i, bound in enumerate(self.bounds_ms):
            upto = bisect_right(ordered, bound)
            self.counts[i] += upto - below
            below = upto
        self.counts[-1] += len(ordered) - below
        self.sum_s += sum(ordered) / 1000.0

    def collect(self) -> Iterable[HistogramMetricFamily]:
        cumulative = 0
        buckets = []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        family = HistogramMetricFamily(
            "timesync_record_lateness_seconds",
            "How far behind stream time each output record was (0 for records in order)",
        )
        family.add_metric([], buckets, self.sum_s)
        yield family


def _per_partition(name: str, documentation: str, registry: CollectorRegistry) -> Gauge:
    """A gauge with a series per input partition (labels ``topic``, ``partition``)."""
    return Gauge(name, documentation, ["topic", "partition"], registry=registry)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.records_in = Counter("timesync_records_in", "Records consumed from the input topics", registry=r)
        self.records_out = Counter("timesync_records_out", "Records written to the ordered topic", registry=r)
        self.enforced = Counter(
            "timesync_enforced_processing",
            "Records emitted while an input partition was empty and past its idle deadline",
            registry=r,
        )
        self.late = Counter(
            "timesync_late_records", "Records emitted (or routed) below stream time", registry=r
        )
        self.dropped = Counter(
            "timesync_dropped_records", "Records not written to the ordered topic", ["reason"], registry=r
        )
        self.restamped = Counter(
            "timesync_restamped_records",
            "Records written with a time other than their own (timestamp.invalid=partition-time)",
            ["reason"],
            registry=r,
        )
        self.restamped.labels("partition-time")  # its one reason: a series from the start, at 0
        #: Per task: the core's drop and restamp counts already added to the counters above.
        self._counted: dict[str, dict[tuple[str, str], int]] = {}
        self.heartbeats = Counter("timesync_heartbeats", "Watermark control records written", registry=r)
        self._partition_gauges(r)
        #: The process's, not a task's: an operator's pause holds every task and survives restarts.
        self.operator_paused = Gauge(
            "timesync_operator_paused",
            "1 while an operator's PUT /pause holds the sidecar (nothing fetched or written)",
            registry=r,
        )
        self.watermark = Gauge(
            "timesync_watermark_seconds", "Task watermark (event time)", ["task"], registry=r
        )
        self.stream_time = Gauge(
            "timesync_stream_time_seconds", "Task stream time (event time)", ["task"], registry=r
        )
        self._registry_gauges(r)
        self.lateness = LatenessHistogram()
        r.register(self.lateness)

    def _partition_gauges(self, r: CollectorRegistry) -> None:
        """The series per input partition."""
        self.lag = _per_partition("timesync_consumer_lag", "Records on the broker not fetched yet", r)
        self.buffered = _per_partition(
            "timesync_buffered_records", "Records fetched and waiting to be merged", r
        )
        self.paused = _per_partition("timesync_partition_paused", "1 while fetching is paused", r)
        self.idle = _per_partition(
            "timesync_partition_idle_seconds",
            "max.task.idle.ms=auto: how long the partition is waited for once quiet, learnt from its gaps",
            r,
        )

    def _registry_gauges(self, r: CollectorRegistry) -> None:
        """The schema registry's unavailability, as the health sees it."""
        #: Read when scraped, from the health (:meth:`watch_registry`): 0 while nothing waits.
        self.registry_unavailable = Gauge(
            "timesync_schema_registry_unavailable_seconds",
            "How long fetched records have been waiting for an unusable schema registry (0: none wait)",
            registry=r,
        )
        self.registry_unhealthy_after = Gauge(
            "timesync_schema_registry_unhealthy_after_seconds",
            "schema.registry.unhealthy.after.ms in seconds: past it /healthz is unhealthy (0: never)",
            registry=r,
        )

    def watch_registry(self, waited: Callable[[], float], unhealthy_after_s: float | None) -> None:
        """Report the registry's unavailability from ``waited`` (seconds, read at each scrape)."""
        self.registry_unavailable.set_function(waited)
        self.registry_unhealthy_after.set(unhealthy_after_s or 0)

    def observe_task(self, task: str, snapshot: Mapping[str, Any], incarnation: int = 0) -> None:
        """Gauges from a task snapshot, and the drops and restamps the core counts at push (an
        invalid timestamp skipped, a time the output topic would refuse, a partition-time
        restamp); called about once a second, not per record. ``incarnation`` tells one run of
        the task from the next (a restart or rebalance starts its counts from zero)."""
        counted = self._counted.get(task)
        if counted is None or counted.get(("incarnation", "")) != incarnation:
            counted = self._counted[task] = {("incarnation", ""): incarnation}
        for family, counter, counts in (
            ("dropped", self.dropped, snapshot.get("dropped", {})),
            ("restamped", self.restamped, snapshot.get("restamped", {})),
        ):
            for reason, total in counts.items():
                if family == "dropped" and reason == "late":
                    continue  # counted per batch by observe_emit
                grown = total - counted.get((family, reason), 0)
                if grown > 0:
                    counter.labels(reason).inc(grown)
                counted[(family, reason)] = total
        if snapshot["watermark"] >= 0:
            self.watermark.labels(task).set(snapshot["watermark"] / 1000.0)
        if snapshot["stream_time"] >= 0:
            self.stream_time.labels(task).set(snapshot["stream_time"] / 1000.0)
        for p in snapshot["partitions"]:
            labels = (p["topic"], str(p["partition"]))
            if p["lag"] is not None:
                self.lag.labels(*labels).set(p["lag"])
            self.buffered.labels(*labels).set(p["buffered"])
            self.paused.labels(*labels).set(1 if p["paused"] else 0)
            if "idle" in p:  # only under auto: a fixed setting is in the config
                self.idle.labels(*labels).set(p["idle"]["idle_ms"] / 1000.0)

    def observe_emit(self, emit: Emit) -> None:
        """Counters and the lateness histogram for one emitted batch."""
        written = len(emit.records)
        if written:
            self.records_out.inc(written)
        if emit.enforced_count:
            self.enforced.inc(emit.enforced_count)
        late = len(emit.late) + len(emit.late_routed) + emit.dropped_late
        if late:
            self.late.inc(late)
        if emit.dropped_late:
            self.dropped.labels("late").inc(emit.dropped_late)
        if emit.dead_letters:
            self.dropped.labels("dead-letter").inc(len(emit.dead_letters))
        self.lateness.observe_batch(
            written - len(emit.late), [*emit.lateness, *(x.lateness for x in emit.late_routed)]
        )

    def forget_task(self, task: str, partitions: Iterable[tuple[str, int]]) -> None:
        """Drop the series of a task that left this replica (a rebalance moved it): a gauge left
        behind would be double-counted by dashboards summing lag across replicas, and show a
        watermark falling behind for ever."""
        self._counted.pop(task, None)
        for gauge in (self.watermark, self.stream_time):
            with contextlib.suppress(KeyError):
                gauge.remove(task)
        for topic, partition in partitions:
            for gauge in (self.lag, self.buffered, self.paused, self.idle):
                with contextlib.suppress(KeyError):
                    gauge.remove(topic, str(partition))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
