"""On the real broker: a consumer with the C reader hooked in returns what aiokafka's own returns,
and the merge writes the same output bytes from either.

Two consumers read the same partitions — one hooked (:func:`sidecar.kafka.fetch_hook.install`),
one plain — through ``getmany`` in small chunks (so ``FetchResult.getall`` stops mid-response and
resumes), under ``read_committed`` over a topic holding an aborted and a committed transaction.
Their records must have equal fields and their positions must agree; the merge task and the
output encoders (native and Python) fed with either must produce byte-identical record batches.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.consumer import fetcher as aiokafka_fetcher

from sidecar.core import Emit, MergeTask, TaskConfig
from sidecar.core import TopicPartition as CoreTopicPartition
from sidecar.kafka import fetch_hook
from sidecar.kafka._fetched import FetchedRecord
from sidecar.kafka.admin import TopicSpec
from sidecar.output.batches import compressor
from sidecar.output.encoder import NativeEncoder, PythonEncoder
from testkit import kafka_io

pytestmark = [pytest.mark.broker]

FIELDS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers")
PER_PARTITION = 1_500


def shaped(topic: str, partition: int, rng: random.Random) -> list[dict[str, Any]]:
    """Click-like JSON records with keys and a header; timestamps jittered, some keys or values null."""
    out = []
    for i in range(PER_PARTITION):
        ts = 1_700_000_000_000 + i * 3 + rng.randrange(3)
        value = orjson.dumps({"ts": ts, "i": i, "user": f"u-{rng.randrange(5000):05d}", "page": "/cart"})
        out.append(
            {
                "topic": topic,
                "value": None if i % 97 == 5 else value,
                "key": None if i % 11 == 0 and i % 97 != 5 else b"u-%05d" % rng.randrange(5000),
                "partition": partition,
                "timestamp_ms": ts,
                "headers": [("traceparent", b"00-%032x-01" % rng.getrandbits(128))] if i % 13 else [],
            }
        )
    return out


async def write(bootstrap: str, topics: list[str]) -> None:
    await kafka_io.create_topics(bootstrap, [TopicSpec(t, 2) for t in topics])
    rng = random.Random(17)
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, compression_type="lz4")
    txn = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topics[0]}-txn")
    await plain.start()
    await txn.start()
    try:
        for topic in topics:
            for partition in (0, 1):
                records = shaped(topic, partition, rng)
                half = len(records) // 2
                futures = [await plain.send(**r) for r in records[:half]]
                for f in futures:
                    await f
                # An aborted transaction, then a committed one, in the middle of partition 0.
                if partition == 0:
                    await txn.begin_transaction()
                    for r in records[half : half + 20]:
                        await (await txn.send(**{**r, "value": b"aborted"}))
                    await txn.abort_transaction()
                    await txn.begin_transaction()
                    for r in records[half : half + 20]:
                        await (await txn.send(**r))
                    await txn.commit_transaction()
                    records = records[:half] + records[half + 20 :]
                futures = [await plain.send(**r) for r in records[half:]]
                for f in futures:
                    await f
    finally:
        await plain.stop()
        await txn.stop()


async def read_all(
    bootstrap: str, tps: list[TopicPartition], hooked: bool
) -> tuple[dict[Any, list[Any]], str]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_partition_fetch_bytes=64 * 1024,  # several fetch responses per partition
    )
    await consumer.start()
    reader = fetch_hook.install(consumer) if hooked else "aiokafka"
    got: dict[Any, list[Any]] = {tp: [] for tp in tps}
    try:
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            fetched = await consumer.getmany(timeout_ms=1000, max_records=333)
            for tp, records in fetched.items():
                got[tp] += records
        positions = {tp: await consumer.position(tp) for tp in tps}
        assert positions == ends
    finally:
        await consumer.stop()
    return got, reader


def merged(fetched: dict[Any, list[Any]]) -> list[Emit]:
    task = MergeTask([CoreTopicPartition(*tp) for tp in fetched], TaskConfig(max_task_idle_ms=-1))
    for tp, records in fetched.items():
        for i in range(0, len(records), 400):
            task.push(tp, records[i : i + 400])
    emits = []
    while isinstance(out := task.poll(1_800_000_000_000, 1_000), Emit):
        emits.append(out)
    return emits


def encoded(emits: list[Emit], native: bool) -> list[bytes]:
    encoder = (
        NativeEncoder(compressor("lz4", 9), False, 64 * 1024)
        if native
        else PythonEncoder(compressor("lz4", None), False, 64 * 1024)
    )
    out = []
    for emit in emits:
        for batch in encoder.encode(emit):
            batch._set_producer_state(5, 0, 0)
            out.append(bytes(batch._build()))
    return out


async def test_the_hooked_consumer_returns_aiokafkas_records_and_the_output_is_byte_identical(
    bootstrap: str, topic_name: Callable[[str], str]
) -> None:
    topics = [topic_name("a"), topic_name("b")]
    await write(bootstrap, topics)
    tps = [TopicPartition(t, p) for t in topics for p in (0, 1)]

    ours, reader = await read_all(bootstrap, tps, hooked=True)
    theirs, _ = await read_all(bootstrap, tps, hooked=False)

    assert reader == "native"
    assert aiokafka_fetcher.MemoryRecords is fetch_hook._KeptBytes  # v2 batches decoded by the reader
    assert all(type(r) is FetchedRecord for records in ours.values() for r in records)
    for tp in tps:
        assert [tuple(getattr(r, f) for f in FIELDS) for r in ours[tp]] == [
            tuple(getattr(r, f) for f in FIELDS) for r in theirs[tp]
        ], tp
    assert sum(map(len, ours.values())) == 4 * PER_PARTITION
    assert not any(r.value == b"aborted" for records in ours.values() for r in records)

    emits_ours, emits_theirs = merged(ours), merged(theirs)
    assert sum(map(len, emits_ours)) == 4 * PER_PARTITION
    for native in (True, False):
        assert encoded(emits_ours, native) == encoded(emits_theirs, native)
