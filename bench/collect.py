"""Writing the benchmark's inputs with record ids, and reading topics back as analysis columns.

Every input record carries the header ``bench.id`` (its index in the workload, ASCII decimal);
all three merging systems copy input headers to their output, so an output record names its
input record whatever the system. End markers (header ``bench.end``) follow the data on every
input partition so that a merger that waits forever for an empty partition (idle ``max``)
releases its tail; warm-up records (header ``bench.warmup``, older than every workload record)
may precede the workload so that every system, a JVM's JIT included, is warm when it starts.
Neither is data: both are left out of every figure.

Output topics are created with ``message.timestamp.type=LogAppendTime``: the broker stamps each
output batch with the moment it was appended — when a consumer can first fetch it. End-to-end
latency is that time minus the wall-clock time the input record was handed to the producer, both
read from this machine's clock, with no reading consumer competing with the system under test.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.analysis import Inputs, Output
from sidecar.kafka.admin import TopicSpec
from sidecar.output.writer import MAX_MESSAGE_BYTES
from testkit import kafka_io
from testkit.workloads import Event

ID = "bench.id"
END = "bench.end"
WARMUP = "bench.warmup"
LOG_APPEND = {"message.timestamp.type": "LogAppendTime"}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def create(
    bootstrap: str, inputs: Sequence[str], partitions: int, log_append_time: bool, outputs: dict[str, int]
) -> None:
    """Input topics (``partitions`` each) and LogAppendTime output topics (name → partitions)."""
    specs = [TopicSpec(t, partitions, configs=LOG_APPEND if log_append_time else {}) for t in inputs]
    big = {**LOG_APPEND, "max.message.bytes": str(MAX_MESSAGE_BYTES)}
    specs += [TopicSpec(name, count, configs=big) for name, count in outputs.items()]
    await kafka_io.create_topics(bootstrap, specs)
    await kafka_io.topic_partition_counts(bootstrap, [*inputs, *outputs])


async def produce_tagged(
    bootstrap: str,
    events: Sequence[Event],
    first_id: int,
    sent_ms: np.ndarray[Any, np.dtype[np.int64]],
    *,
    paced: bool,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Write ``events`` with ids ``first_id…``; record each one's send time (wall ms) in ``sent_ms``.

    ``kafka_io.produce`` calls the header function once per event, in order, right before
    handing the record to the producer: the counter below therefore numbers them in list order.
    """
    position = iter(range(first_id, first_id + len(events)))

    def headers(_: Event) -> list[tuple[str, bytes]]:
        i = next(position)
        sent_ms[i] = time.time_ns() // 1_000_000
        return [(ID, b"%d" % i)]

    await kafka_io.produce(bootstrap, events, paced=paced, progress=progress, headers=headers)


def end_markers(topics: Sequence[str], partitions: int, after_ts: int) -> list[Event]:
    """One marker per input partition, later than every record, so idle ``max`` flushes."""
    return [Event(t, p, after_ts + 1, b"bench-end", b"", 0) for t in topics for p in range(partitions)]


async def produce_markers(bootstrap: str, markers: Sequence[Event]) -> None:
    await kafka_io.produce(bootstrap, markers, headers=lambda _: [(END, b"1")])


def warmup_events(
    topics: Sequence[str], partitions: int, before_ts: int, seconds: float, rate_per_s: float
) -> list[Event]:
    """Steady traffic on every input partition for ``seconds``, all older than ``before_ts``."""
    tps = [(t, p) for t in topics for p in range(partitions)]
    n = int(seconds * rate_per_s)
    start = before_ts - int(seconds * 1000) - 1000
    return [
        Event(
            tps[i % len(tps)][0],
            tps[i % len(tps)][1],
            start + int(i * 1000 / rate_per_s),
            b"w",
            b"{}",
            int(i * 1000 / rate_per_s),
        )
        for i in range(n)
    ]


async def produce_warmup(bootstrap: str, events: Sequence[Event]) -> None:
    """Warm-up records (header ``bench.warmup``, no id: left out of every figure), paced."""
    await kafka_io.produce(bootstrap, events, paced=True, headers=lambda _: [(WARMUP, b"1")])


def _header(headers: Sequence[tuple[str, bytes]], name: str) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


async def read_output(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float
) -> tuple[Output, int]:
    """Read ``topic`` from the start until ``expected`` distinct ids arrived (or ``timeout_s``).

    Returns the data records (first copy of each id) and the number of duplicate copies seen.
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    ids: list[int] = []
    parts: list[int] = []
    offsets: list[int] = []
    appended: list[int] = []
    enforced: list[bool] = []
    late: list[bool] = []
    seen: set[int] = set()
    duplicates = 0
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout_s
        while len(seen) < expected and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200, max_records=20_000)
            for records in batch.values():
                for r in records:
                    raw = _header(r.headers, ID)
                    if raw is None:
                        continue  # heartbeat, end marker
                    i = int(raw)
                    if i in seen:
                        duplicates += 1
                        continue
                    seen.add(i)
                    ids.append(i)
                    parts.append(r.partition)
                    offsets.append(r.offset)
                    appended.append(r.timestamp)
                    enforced.append(_header(r.headers, "timesync.enforced") == b"1")
                    late.append(_header(r.headers, "timesync.late") == b"1")
    finally:
        await consumer.stop()
    out = Output(
        id=np.asarray(ids, dtype=np.int64),
        partition=np.asarray(parts, dtype=np.int64),
        offset=np.asarray(offsets, dtype=np.int64),
        append_ms=np.asarray(appended, dtype=np.int64),
        enforced=np.asarray(enforced, dtype=np.bool_),
        late=np.asarray(late, dtype=np.bool_),
    )
    return out, duplicates


async def read_inputs(
    bootstrap: str,
    topics: Sequence[str],
    partitions: int,
    records: int,
    available_ms: np.ndarray[Any, Any],
    warmup: int = 0,
) -> Inputs:
    """The input records by id: topic position, partition, offset and timestamp as the broker
    holds them (for a LogAppendTime topic, the append time is the event time). The topics also
    hold ``warmup`` warm-up records and one end marker per partition."""
    everything = records + warmup + len(topics) * partitions
    got = await kafka_io.read_topics(bootstrap, list(topics), expected=everything)
    position = {t: i for i, t in enumerate(topics)}
    topic = np.full(records, -1, dtype=np.int64)
    part = np.zeros(records, dtype=np.int64)
    offset = np.zeros(records, dtype=np.int64)
    ts = np.zeros(records, dtype=np.int64)
    for r in got:
        raw = _header(r.headers, ID)
        if raw is None:
            continue
        i = int(raw)
        topic[i], part[i], offset[i], ts[i] = position[r.topic], r.partition, r.offset, r.timestamp
    missing = int(np.count_nonzero(topic < 0))
    if missing:
        raise RuntimeError(f"{missing} of {records} input records could not be read back from {topics}")
    return Inputs(topic, part, offset, ts, np.asarray(available_ms, dtype=np.int64))


async def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        return [ends[tp] for tp in tps]
    finally:
        await consumer.stop()


async def wait_for_count(
    bootstrap: str, topic: str, partitions: int, count: int, timeout_s: float, poll_s: float = 0.1
) -> list[tuple[int, int]] | None:
    """Wait until ``topic`` holds ``count`` records, asking only for end offsets (a consumer reading
    along would compete with the system under test for the CPU).

    Returns the samples (wall ms, records in the topic) taken on the way, or ``None`` on timeout.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    samples: list[tuple[int, int]] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            total = sum((await consumer.end_offsets(tps)).values())
            samples.append((now_ms(), total))
            if total >= count:
                return samples
            await asyncio.sleep(poll_s)
        return None
    finally:
        await consumer.stop()


def crossing(samples: Sequence[tuple[int, int]], level: float) -> float | None:
    """The wall-clock ms at which the count first reached ``level``, interpolated between the
    end-offset samples (wall ms, count) around it; ``None`` if the samples never cross it."""
    for (t0, n0), (t1, n1) in itertools.pairwise(samples):
        if n0 < level <= n1:
            return t0 + (t1 - t0) * (level - n0) / (n1 - n0)
    return None


def steady_rate(
    samples: Sequence[tuple[int, int]], total: int, low: float = 0.25, high: float = 0.75
) -> float | None:
    """Records/s while the output grew from ``low`` to ``high`` of ``total`` (interpolated from
    end-offset samples): the rate once start-up and warm-up (a JVM's JIT) are behind."""
    a, b = crossing(samples, low * total), crossing(samples, high * total)
    if a is None or b is None or b <= a:
        return None
    return (high - low) * total / ((b - a) / 1000)


async def edge_append_times(bootstrap: str, topic: str, partitions: int, tail: int = 64) -> tuple[int, int]:
    """(first, last) LogAppendTime among the data records of ``topic``: the first record of each
    partition and the data records among the last ``tail`` of each."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    first: list[int] = []
    last: list[int] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        begins = await consumer.beginning_offsets(tps)
        for tp in tps:
            if ends[tp] <= begins[tp]:
                continue
            consumer.assign([tp])
            for start, limit in ((begins[tp], 1), (max(begins[tp], ends[tp] - tail), tail)):
                consumer.seek(tp, start)
                got: list[Any] = []
                while len(got) < min(limit, ends[tp] - start):
                    batch = await consumer.getmany(tp, timeout_ms=1000, max_records=limit)
                    got += batch.get(tp, [])
                data = [r.timestamp for r in got[:limit] if _header(r.headers, ID) is not None]
                (first if limit == 1 else last).extend(data)
    finally:
        await consumer.stop()
    return min(first), max(last)
