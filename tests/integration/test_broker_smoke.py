"""The broker behaves as real Kafka in the ways timesync relies on."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from sidecar.kafka.admin import TopicSpec
from testkit.kafka_io import create_topics, read_topics

pytestmark = pytest.mark.broker

CREATE_TIME, LOG_APPEND_TIME = 0, 1


async def test_records_keep_headers_and_explicit_create_time(
    bootstrap: str, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("in")
    await create_topics(bootstrap, [TopicSpec(topic, partitions=2)])
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        headers = [("a", b"1"), ("a", b"2"), ("bin", bytes(range(5)))]
        await producer.send_and_wait(topic, b"v0", key=b"k", partition=1, timestamp_ms=1_000, headers=headers)
        await producer.send_and_wait(topic, b"v1", key=None, partition=1, timestamp_ms=500)
    finally:
        await producer.stop()

    records = await read_topics(bootstrap, [topic], expected=2)

    assert [(r.partition, r.offset, r.timestamp, r.timestamp_type) for r in records] == [
        (1, 0, 1_000, CREATE_TIME),
        (1, 1, 500, CREATE_TIME),
    ]
    assert list(records[0].headers) == headers
    assert records[1].key is None


async def test_log_append_time_topic_stamps_broker_time(
    bootstrap: str, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("lat")
    await create_topics(bootstrap, [TopicSpec(topic, configs={"message.timestamp.type": "LogAppendTime"})])
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    before = int(time.time() * 1000)
    try:
        meta = await producer.send_and_wait(topic, b"v", timestamp_ms=1_000)
    finally:
        await producer.stop()
    after = int(time.time() * 1000)

    (record,) = await read_topics(bootstrap, [topic], expected=1)

    assert record.timestamp_type == LOG_APPEND_TIME
    assert before - 1_000 <= record.timestamp <= after + 1_000, "broker time, not the 1000 the producer sent"
    assert meta.timestamp == record.timestamp


async def test_consumer_knows_high_watermark_after_one_fetch(
    bootstrap: str, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("hw")
    await create_topics(bootstrap, [TopicSpec(topic, partitions=2)])
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(3):
            await producer.send_and_wait(topic, b"x", partition=0, timestamp_ms=i + 1)
    finally:
        await producer.stop()
    full, empty = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([full, empty])
        assert consumer.highwater(full) is None, "nothing is known before the first fetch"
        fetched: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + 10
        while (
            consumer.highwater(full) is None or consumer.highwater(empty) is None
        ) and time.monotonic() < deadline:
            for tp, recs in (await consumer.getmany(timeout_ms=500)).items():
                fetched[tp] = fetched.get(tp, 0) + len(recs)
        assert consumer.highwater(full) == 3
        assert consumer.highwater(empty) == 0, "an empty partition's fetch shows lag 0"
        assert consumer.last_poll_timestamp(empty) is not None
        assert await consumer.position(empty) == 0
    finally:
        await consumer.stop()


async def test_consumer_group_commits_and_reads_back_offsets(
    bootstrap: str, topic_name: Callable[[str], str]
) -> None:
    topic, group = topic_name("commit"), topic_name("group")
    await create_topics(bootstrap, [TopicSpec(topic)])
    tp = TopicPartition(topic, 0)
    first = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await first.start()
    try:
        first.assign([tp])
        await first.commit({tp: OffsetAndMetadata(42, "timesync")})
    finally:
        await first.stop()

    second = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await second.start()
    try:
        second.assign([tp])
        assert await second.committed(tp) == 42
    finally:
        await second.stop()
