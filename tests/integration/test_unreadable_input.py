"""Bytes no Kafka client of ours writes, on the real broker, through the sidecar as a process.

The broker checks neither header keys nor what a compressed batch inflates to. Both are written
here as hand-built v2 batches (``testkit/raw_batches.py``) between ordinary records:

- a header key that is not UTF-8 passes through with its bytes unchanged, under
  ``errors.tolerance=all`` and ``none`` alike — on the ordered topic, read back by key bytes, and
  on the dead letter queue when its record is bad for another reason. Before, the sidecar exited
  1 on such a key, and again at every restart;
- a batch that inflates past ``fetch.max.bytes``: under ``all`` one record in the dead letter
  queue names its offset and the rest flows; under ``none`` the sidecar stops with one line
  naming it and the command past it — which, run, lets the next start go on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from sidecar.core.stamping import header_key_bytes
from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, offsets_command, ordered, raw_batches

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

#: Two keys no UTF-8 decoder takes: a lone continuation byte, and a surrogate encoded as UTF-8.
RAW_KEYS = (b"\x80trace", b"span-\xed\xa0\x80")
HOUR = 3_600_000
#: Past the sidecar's bound (fetch.max.bytes, 50 MiB) once inflated; a few KiB compressed.
BOMB = 60 * 1024 * 1024


async def ordinary(bootstrap: str, topic: str, first_ts: int, n: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sends = [
            await producer.send(
                topic,
                orjson.dumps({"ts": first_ts + i}),
                key=b"k%d" % i,
                partition=0,
                headers=[("app", b"1")],
            )
            for i in range(n)
        ]
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


async def raw_keyed(bootstrap: str, topic: str, ts: int, with_bad_value: bool) -> int:
    """One hand-built batch: records carrying the raw keys (and, if asked, one whose value is not
    JSON); the offset of its first record."""
    records = [
        raw_batches.record(0, b"r0", orjson.dumps({"ts": ts}), [(RAW_KEYS[0], b"x"), (b"app", b"1")]),
        raw_batches.record(1, b"r1", orjson.dumps({"ts": ts + 1}), [(RAW_KEYS[1], None)]),
    ]
    if with_bad_value:
        records.append(raw_batches.record(2, b"r2", b"not json", [(RAW_KEYS[0], b"y")]))
    data = raw_batches.batch(records, ts)
    return await raw_batches.send(bootstrap, topic, 0, data, len(records))


@pytest.mark.parametrize("tolerance", ["all", "none"])
async def test_a_header_key_that_is_not_utf8_passes_through_byte_for_byte(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar, tolerance: str
) -> None:
    src, out, dlq = topic_name("in"), topic_name("out"), topic_name("dlq")
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    now = int(time.time() * 1000) - HOUR
    await ordinary(bootstrap, src, now, 20)
    first = await raw_keyed(bootstrap, src, now + 100, with_bad_value=tolerance == "all")
    await ordinary(bootstrap, src, now + 200, 20)
    errors = {"errors_deadletterqueue_topic_name": dlq} if tolerance == "all" else {}

    process = await sidecar(
        [src], out, timestamp_extractor="json:ts", errors_tolerance=tolerance, max_task_idle_ms=0, **errors
    )
    written = ordered.data(
        await kafka_io.read_topics(bootstrap, [out], expected=42, timeout_s=60, raw_header_keys=True)
    )

    bad = {first + 2} if tolerance == "all" else set()
    assert sorted(o.source_offset for o in written) == [o for o in range(42 + len(bad)) if o not in bad]
    raw = {o.source_offset: [(header_key_bytes(k), v) for k, v in o.headers] for o in written}
    assert raw[first][:2] == [(RAW_KEYS[0], b"x"), (b"app", b"1")]
    assert raw[first + 1][:1] == [(RAW_KEYS[1], None)]
    assert [o.timestamp for o in written] == sorted(o.timestamp for o in written)
    assert (await process.get("/healthz"))[0] == 200, "it runs on"
    if tolerance == "all":
        [dead] = await kafka_io.read_topics(bootstrap, [dlq], expected=1, timeout_s=30, raw_header_keys=True)
        dead_headers = [(header_key_bytes(k), v) for k, v in dead.headers]
        assert dead_headers[0] == (RAW_KEYS[0], b"y")
        assert dict(dead_headers)[b"__connect.errors.offset"] == b"%d" % (first + 2)
    assert await process.stop() == 0


async def bombed(bootstrap: str, topic: str, now: int) -> int:
    """10 ordinary records, a zstd batch whose one record inflates to 60 MiB, 10 more; the bomb's
    offset."""
    await ordinary(bootstrap, topic, now, 10)
    bomb = raw_batches.batch([raw_batches.record(0, b"bomb", b"\x00" * BOMB)], now + 50, "zstd")
    assert len(bomb) < 64 * 1024
    offset = await raw_batches.send(bootstrap, topic, 0, bomb, 1)
    await ordinary(bootstrap, topic, now + 100, 10)
    return offset


async def test_a_batch_inflating_past_the_bound_is_a_dead_letter_under_tolerance_all(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src, out, dlq = topic_name("in"), topic_name("out"), topic_name("dlq")
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    offset = await bombed(bootstrap, src, int(time.time() * 1000) - HOUR)

    process = await sidecar(
        [src],
        out,
        timestamp_extractor="json:ts",
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
    )
    written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=20, timeout_s=60))
    [trace] = await kafka_io.read_topics(bootstrap, [dlq], expected=1, timeout_s=30)
    assert await process.stop() == 0

    assert sorted(o.source_offset for o in written) == [o for o in range(21) if o != offset]
    headers = dict(trace.headers)
    assert headers["__connect.errors.offset"] == headers["timesync.errors.last.offset"] == b"%d" % offset
    assert headers["__connect.errors.exception.class.name"] == b"CorruptRecordException"
    message = headers["__connect.errors.exception.message"].decode()
    assert message.startswith(
        f"cannot read {src}[0] at offset {offset}: DecompressionFailed: zstd records inflate past"
    )
    assert trace.key is None
    assert trace.value is not None  # the batch as fetched, which any Kafka library reads
    assert trace.value[16] == 2
    assert len(trace.value) < 64 * 1024


async def test_under_tolerance_none_it_stops_naming_the_offset_and_the_command_past_it_works(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src, out = topic_name("in"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    offset = await bombed(bootstrap, src, int(time.time() * 1000) - HOUR)

    process = await sidecar([src], out, wait=None, timestamp_extractor="json:ts")
    assert await process.wait(timeout_s=60) == 1
    line = process.log_tail(1)
    past = f"--partition {src}:0 --to-offset {offset + 1}"
    assert line == (
        f"timesync-sidecar: cannot read {src}[0] at offset {offset}: DecompressionFailed: zstd records "
        "inflate past 52428800 bytes (fetch.max.bytes): a decompression bomb, or a producer far outside "
        "Kafka's batch limits; stopping (errors.tolerance=none; errors.tolerance=all sends such offsets "
        f"to the dead letter queue; or, with every replica stopped: timesync-sidecar offsets reset {past})"
    )

    reset = await offsets_command.reset(bootstrap, [src], out, *past.split())
    assert reset.returncode == 0, reset.stderr
    again = await sidecar([src], out, timestamp_extractor="json:ts")
    written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=20, timeout_s=60, idle_s=3))
    assert await again.stop() == 0
    assert {o.source_offset for o in written} == {o for o in range(21) if o != offset}, "nothing lost"
