"""End to end on the real broker: the ordered topic holds every input once, in the merge order."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.workloads import Event, with_offsets

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def two_topics_one_fast_one_sparse(fast: str, sparse: str, seed: int = 3) -> list[Event]:
    rng = random.Random(seed)
    events = []
    for i in range(3_000):  # fast: 2 partitions, one record per ms each, with jitter
        p = i % 2
        ts = 1_000_000 + i // 2 + rng.randrange(3)
        events.append(Event(fast, p, ts, b"f%d" % i, b"fast-%d" % i, 0))
    for i in range(40):  # sparse: a record now and then, some sharing timestamps with the fast topic
        ts = 1_000_000 + rng.randrange(1_500)
        events.append(Event(sparse, i % 2, ts, b"s%d" % i, b"sparse-%d" % i, 0))
    # Each partition must be written in timestamp order (the merge never reorders one partition).
    events.sort(key=lambda e: (e.topic, e.partition, e.ts))
    return events


def expected_merge(events: list[Event], topic_order: list[str]) -> list[tuple[str, int, int]]:
    """The k-way merge DESIGN defines: timestamp, then topic order, partition, offset."""
    offsets: dict[tuple[str, int], int] = {}
    keyed = []
    for e in events:
        offset = offsets.get((e.topic, e.partition), 0)
        offsets[(e.topic, e.partition)] = offset + 1
        keyed.append((e.ts, topic_order.index(e.topic), e.partition, offset, e.topic))
    keyed.sort()
    return [(topic, partition, offset) for _, _, partition, offset, topic in keyed]


async def test_pre_produced_inputs_come_out_once_in_exact_merge_order_with_headers(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    fast, sparse, out = topic_name("fast"), topic_name("sparse"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(fast, 2), TopicSpec(sparse, 2)])
    events = two_topics_one_fast_one_sparse(fast, sparse)
    await kafka_io.produce(bootstrap, events)

    side = await sidecar([fast, sparse], out, max_task_idle_ms=0)
    got = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=len(events), timeout_s=60))

    assert (await side.status())["input_reader"] == "native"  # the records were read in C

    assert [o.source for o in got] == expected_merge(events, [fast, sparse])
    by_source = {(e.topic, e.partition, i): e for (e, i) in with_offsets(events)}
    high = -1
    for o in got:
        e = by_source[o.source]  # type: ignore[index]
        assert (o.key, o.value, o.timestamp) == (e.key, e.value, e.ts)
        high = max(high, o.timestamp)
        assert o.stream_time == high, "stream time after each record is the running maximum"
        assert o.watermark is not None
        assert o.watermark <= o.timestamp or o.watermark == -1
    assert not any(o.late for o in got)


async def test_live_producers_with_idle_max_give_sorted_output_and_nothing_enforced(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    a, b, out = topic_name("a"), topic_name("b"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, 2), TopicSpec(b, 2)])
    await sidecar([a, b], out, max_task_idle_ms="max", watermark_heartbeat_ms=0)
    base = 2_000_000
    events = [
        Event(t, p, base + 4 * i + 2 * ti + p, b"k", b"v", send_at_ms=i * 2)
        for i in range(1_500)
        for ti, t in enumerate((a, b))
        for p in range(2)
    ]

    await kafka_io.produce(bootstrap, events, paced=True, speed=2.0)
    await asyncio.sleep(2)
    got = ordered.data(await kafka_io.read_topics(bootstrap, [out], idle_s=2, timeout_s=60))

    assert len(got) > 0.9 * len(events), "all but the tail held back by the last empty partition"
    stamps = [o.timestamp for o in got]
    assert stamps == sorted(stamps)
    assert not any(o.enforced for o in got)
    assert len({o.source for o in got}) == len(got), "no duplicates"
