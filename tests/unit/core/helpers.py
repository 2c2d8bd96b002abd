"""Small drivers for the core: build records, drain a task, simulate a broker and a consumer."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sidecar.core import Emit, MergeTask, Record, TaskConfig, TopicPartition
from sidecar.core.task import Outcome

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
B0 = TopicPartition("b", 0)
B1 = TopicPartition("b", 1)
C0 = TopicPartition("c", 0)


def records(
    tp: TopicPartition, timestamps: Iterable[int], first_offset: int = 0, **kw: object
) -> list[Record]:
    return [Record(tp.topic, tp.partition, first_offset + i, ts, **kw) for i, ts in enumerate(timestamps)]  # type: ignore[arg-type]


def task(*tps: TopicPartition, topic_order: Sequence[str] | None = None, **config: object) -> MergeTask:
    return MergeTask(list(tps), TaskConfig(**config), topic_order=topic_order)  # type: ignore[arg-type]


def feed(
    t: MergeTask, tp: TopicPartition, timestamps: Iterable[int], now: int = 0, lag_after: int = 0
) -> list[Record]:
    """Push records as one fetch that leaves ``lag_after`` records on the broker."""
    offset = t._part(tp).next_offset or 0
    recs = records(tp, timestamps, offset)
    end = offset + len(recs)
    t.observe_fetch(tp, end + lag_after, end, now)
    t.push(tp, recs)
    return recs


def caught_up(t: MergeTask, tp: TopicPartition, now: int = 0) -> None:
    """A fetch for ``tp`` returned nothing and showed lag 0."""
    position = t._part(tp).next_offset or 0
    t.observe_fetch(tp, position, position, now)


def drain(t: MergeTask, now: int, max_records: int | None = None) -> tuple[list[Emit], Outcome]:
    """Poll until the task stops emitting; return the batches and the final outcome."""
    batches = []
    while True:
        out = t.poll(now, max_records)
        if not isinstance(out, Emit):
            return batches, out
        batches.append(out)


def emitted(batches: Iterable[Emit]) -> list[tuple[str, int, int]]:
    """(topic, offset, timestamp) of every main-output record, in order."""
    return [(r.topic, r.offset, ts) for b in batches for r, ts in zip(b.records, b.timestamps, strict=True)]


def timestamps_of(batches: Iterable[Emit]) -> list[int]:
    return [ts for b in batches for ts in b.timestamps]


def enforced_flags(batches: Iterable[Emit]) -> list[bool]:
    return [i >= b.enforced_from for b in batches for i in range(len(b.records))]


@dataclass
class Output:
    at: int
    record: Record
    timestamp: int
    enforced: bool
    late: bool


@dataclass
class SimulatedConsumer:
    """Broker logs per partition (records with the time they were appended), fetched on a schedule.

    Each fetch returns, per partition, up to ``max_fetch`` records appended by then, and reports
    the high watermark as of that moment — the way a real fetch response does.
    """

    task: MergeTask
    logs: dict[TopicPartition, list[tuple[int, Record]]]
    max_fetch: int = 10_000
    fetched: dict[TopicPartition, int] = field(default_factory=dict)
    out: list[Output] = field(default_factory=list)

    def fetch(self, now: int) -> None:
        for tp, log in self.logs.items():
            position = self.fetched.get(tp, 0)
            high_watermark = bisect_right(log, now, key=lambda entry: entry[0])
            new = [r for _, r in log[position : min(high_watermark, position + self.max_fetch)]]
            self.task.observe_fetch(tp, high_watermark, position + len(new), now)
            self.task.push(tp, new)
            self.fetched[tp] = position + len(new)

    def run(self, until: int, fetch_every: int, step: int = 1) -> list[Output]:
        for now in range(0, until + 1, step):
            if now % fetch_every == 0:
                self.fetch(now)
            batches, _ = drain(self.task, now)
            for b in batches:
                late = set(b.late)
                for i, (r, ts) in enumerate(zip(b.records, b.timestamps, strict=True)):
                    self.out.append(Output(now, r, ts, i >= b.enforced_from, i in late))  # type: ignore[arg-type]
                self.task.acked([b.batch_id])
        return self.out


def appended(
    tp: TopicPartition, times: Sequence[int], timestamps: Sequence[int] | None = None
) -> list[tuple[int, Record]]:
    """A broker log: record i appended at ``times[i]``, event time ``timestamps[i]`` (default: the same)."""
    stamps = timestamps if timestamps is not None else times
    return [
        (at, Record(tp.topic, tp.partition, i, ts))
        for i, (at, ts) in enumerate(zip(times, stamps, strict=True))
    ]
