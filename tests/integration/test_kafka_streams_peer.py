"""The Kafka Streams peer merges each task in Kafka Streams' order and marks every record's source.

Setup shared by the cases: two co-partitioned input topics ``a`` and ``b`` (2 partitions each),
all data produced before the peer starts, ``a`` entirely before ``b``. Timestamps interleave:
``a`` carries even and ``b`` odd milliseconds, so no two records of a task tie.

Why a perfect merge is the right expectation with ``max.task.idle.ms`` >= 0, although the first
fetch may bring only ``a``'s data: Kafka Streams (KIP-695, ``PartitionGroup.readyToProcess``)
processes a task only when each of its empty partitions has a *known* lag of 0. A partition not
fetched yet has an unknown lag, and one whose data is still on the broker has lag > 0; both keep
the task waiting. With all data written beforehand, lag 0 on an empty partition therefore means
that partition is exhausted, and nothing is ever processed ahead of data that exists.

The partitions hold different amounts of data, so in each task one partition runs dry first:
with ``max`` Kafka Streams then waits forever for it, and the other partition's tail never goes
out. With ``0`` the idle deadline passes at once and the tail follows, still in order.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka.structs import ConsumerRecord

from bench.peers.kafka_streams import IdleMs, KafkaStreamsPeer, PeerError, PeerSettings, build
from sidecar.kafka.admin import TopicSpec
from testkit.kafka_io import create_topics, produce, read_topics
from testkit.workloads import Event

pytestmark = [pytest.mark.broker, pytest.mark.slow]

# records per (topic, partition): task 0 runs b dry first, task 1 runs a dry first
COUNTS = {("a", 0): 60, ("b", 0): 40, ("a", 1): 40, ("b", 1): 60}
SOURCE_HEADERS = ("timesync.source.topic", "timesync.source.partition", "timesync.source.offset")

Coord = tuple[str, int, int]  # topic, partition, offset


@dataclass(frozen=True)
class Inputs:
    a: str
    b: str
    records: dict[Coord, ConsumerRecord[bytes, bytes]]


def _events(topic: str, role: str) -> Iterator[Event]:
    first = 1_000 if role == "a" else 1_001  # a: even ms, b: odd ms
    for partition in (0, 1):
        for i in range(COUNTS[(role, partition)]):
            yield Event(
                topic=topic,
                partition=partition,
                ts=first + 2 * i,
                key=f"k{i % 7}".encode(),
                value=f"{role}-{partition}-{i}".encode(),
                send_at_ms=0,
            )


@pytest.fixture(scope="module")
def peer_jar() -> Path:
    return build()


@pytest.fixture(scope="module")
async def inputs(bootstrap: str) -> Inputs:
    run = uuid.uuid4().hex[:8]
    a, b = f"ks-peer-a-{run}", f"ks-peer-b-{run}"
    await create_topics(bootstrap, [TopicSpec(a, partitions=2), TopicSpec(b, partitions=2)])
    for topic, role in ((a, "a"), (b, "b")):  # all of a, then all of b
        await produce(bootstrap, list(_events(topic, role)), headers=lambda e: [("origin", e.value)])
    written = await read_topics(bootstrap, [a, b], expected=sum(COUNTS.values()))
    assert len(written) == sum(COUNTS.values())
    return Inputs(a, b, {(r.topic, r.partition, r.offset): r for r in written})


def _source(record: ConsumerRecord[bytes, bytes]) -> Coord:
    headers = dict(record.headers)
    topic, partition, offset = (headers[h].decode("ascii") for h in SOURCE_HEADERS)
    return topic, int(partition), int(offset)


def _merged(inputs: Inputs, task: int) -> list[ConsumerRecord[bytes, bytes]]:
    """Task ``task``'s input records in timestamp order (no ties by construction)."""
    return sorted((r for r in inputs.records.values() if r.partition == task), key=lambda r: r.timestamp)


async def _run_peer(
    bootstrap: str, inputs: Inputs, idle: IdleMs, expected: int
) -> list[ConsumerRecord[bytes, bytes]]:
    """Run the peer until ``expected`` records are out, stop it cleanly, return the whole output."""
    output = f"ks-peer-out-{uuid.uuid4().hex[:8]}"
    peer = KafkaStreamsPeer(
        PeerSettings(bootstrap, [inputs.a, inputs.b], output, idle, f"ks-peer-test-{uuid.uuid4().hex[:8]}")
    )
    async with peer:
        assert peer.pid > 0
        await read_topics(bootstrap, [output], expected=expected, timeout_s=30)
        code = await peer.stop()
    assert code == 0, peer.stderr_tail()
    # Stopped: whatever it processed is on the broker, so this read sees the final output.
    return await read_topics(bootstrap, [output], idle_s=0.5, timeout_s=30)


def _assert_forwarded_unchanged(inputs: Inputs, out: list[ConsumerRecord[bytes, bytes]]) -> None:
    for record in out:
        source = inputs.records[_source(record)]
        assert record.partition == source.partition, "task i must write to output partition i"
        assert (record.key, record.value, record.timestamp) == (source.key, source.value, source.timestamp)
        assert list(record.headers) == [
            *source.headers,
            *zip(
                SOURCE_HEADERS,
                (source.topic.encode(), b"%d" % source.partition, b"%d" % source.offset),
                strict=True,
            ),
        ]


async def test_idle_zero_merges_every_record_once_in_timestamp_order_per_task(
    bootstrap: str, peer_jar: Path, inputs: Inputs
) -> None:
    out = await _run_peer(bootstrap, inputs, 0, expected=len(inputs.records))

    assert Counter(_source(r) for r in out) == Counter(inputs.records.keys())  # each input exactly once
    _assert_forwarded_unchanged(inputs, out)
    for task in (0, 1):
        partition = [r for r in out if r.partition == task]
        timestamps = [r.timestamp for r in partition]
        assert timestamps == sorted(timestamps), f"output partition {task} is out of timestamp order"
        assert [_source(r) for r in partition] == [
            (r.topic, r.partition, r.offset) for r in _merged(inputs, task)
        ]


async def test_idle_max_waits_forever_for_the_partition_that_ran_dry(
    bootstrap: str, peer_jar: Path, inputs: Inputs
) -> None:
    # Per task, everything up to the last record of the shorter partition goes out; then that
    # partition is empty with lag 0 and the task idles for good.
    expected: dict[int, list[Coord]] = {}
    for task in (0, 1):
        last_of_shorter = min(
            max(r.timestamp for r in inputs.records.values() if (r.topic, r.partition) == (topic, task))
            for topic in (inputs.a, inputs.b)
        )
        expected[task] = [
            (r.topic, r.partition, r.offset) for r in _merged(inputs, task) if r.timestamp <= last_of_shorter
        ]
    assert len(expected[0]) < COUNTS[("a", 0)] + COUNTS[("b", 0)]  # the test means something

    out = await _run_peer(bootstrap, inputs, "max", expected=sum(map(len, expected.values())))

    _assert_forwarded_unchanged(inputs, out)
    for task in (0, 1):
        assert [_source(r) for r in out if r.partition == task] == expected[task]


async def test_start_fails_with_the_peers_reason_when_an_input_topic_is_missing(
    bootstrap: str, peer_jar: Path, inputs: Inputs
) -> None:
    missing = f"ks-peer-missing-{uuid.uuid4().hex[:8]}"
    peer = KafkaStreamsPeer(
        PeerSettings(bootstrap, [inputs.a, missing], f"{missing}-out", 0, f"{missing}-app")
    )

    with pytest.raises(PeerError, match=rf"exited with code 2 before READY(.|\n)*input topic '{missing}'"):
        await peer.start()
    assert peer.returncode == 2


async def test_warmup_drains_other_topics_in_the_same_jvm_before_it_is_ready(
    bootstrap: str, peer_jar: Path, inputs: Inputs
) -> None:
    # The benchmark warms the JVM's JIT up this way: READY only once the warm-up instance
    # (its own application id, output "<output>-warmup") forwarded the warm-up records; the
    # measured instance then starts from the beginning of its own inputs.
    total = len(inputs.records)
    output = f"ks-peer-out-{uuid.uuid4().hex[:8]}"
    peer = KafkaStreamsPeer(
        PeerSettings(
            bootstrap,
            [inputs.a, inputs.b],
            output,
            0,
            f"ks-peer-test-{uuid.uuid4().hex[:8]}",
            warmup_topics=[inputs.a, inputs.b],
            warmup_records=total,
        )
    )
    async with peer:
        warmed = await read_topics(bootstrap, [f"{output}-warmup"], idle_s=0.5, timeout_s=10)
        assert Counter(_source(r) for r in warmed) == Counter(inputs.records.keys())
        await read_topics(bootstrap, [output], expected=total, timeout_s=30)
        code = await peer.stop()
    assert code == 0, peer.stderr_tail()
    out = await read_topics(bootstrap, [output], idle_s=0.5, timeout_s=30)
    assert Counter(_source(r) for r in out) == Counter(inputs.records.keys())
