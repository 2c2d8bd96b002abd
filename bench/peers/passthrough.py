"""The raw passthrough: aiokafka consume → produce with no ordering at all — the latency floor.

It uses the same client settings and the same batch writer as the sidecar (acks=all,
idempotence, lz4, linger 5 ms, 512 KiB batches) so that the difference between the two is the
merge, the stamping and the bookkeeping. Its batches are aiokafka's own, though: a raw aiokafka
application cannot pick the lz4 level, so they are compressed with LZ4 HC level 9, where the
sidecar's native encoder uses Kafka's default (the fast compressor); the benchmark also runs
the sidecar at ``compression.lz4.level=10`` for the ratio at equal effort.

Records keep key, value, timestamp and headers and go to partition 0 of the output topic, as
with ``task.grouping=single``. Offsets are committed every 100 ms after the outputs are acked,
like the sidecar does.

    python -m bench.peers.passthrough --bootstrap-servers H:P --input-topics a,b --output-topic out
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from typing import Any

import uvloop
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from bench.peers.arguments import copy_arguments
from sidecar.kafka.admin import TopicSpec, ensure_topics, wait_for_partitions
from sidecar.output.writer import BATCH_BYTES, MAX_MESSAGE_BYTES, OutputWriter


def copy_into_batches(records: list[Any], new_batch: Callable[[], Any]) -> list[Any]:
    """Append records as they are (key, value, timestamp, headers) straight into producer batches."""
    batch = new_batch()
    batches = [batch]
    append = batch.append
    for r in records:
        headers = list(r.headers)  # aiokafka's record builder takes only a list
        if append(timestamp=r.timestamp, key=r.key, value=r.value, headers=headers) is None:
            batch = new_batch()
            batches.append(batch)
            append = batch.append
            append(timestamp=r.timestamp, key=r.key, value=r.value, headers=headers)
    return batches


async def prepare_topics(bootstrap: str, inputs: list[str], output: str) -> dict[str, int]:
    """The output topic (one partition) created if missing; each input's partition count."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        counts: dict[str, int] = await wait_for_partitions(admin, inputs)
        await ensure_topics(
            admin, [TopicSpec(output, 1, configs={"max.message.bytes": str(MAX_MESSAGE_BYTES)})]
        )
        await wait_for_partitions(admin, [output])
    finally:
        await admin.close()
    return counts


def clients(bootstrap: str, group: str) -> tuple[AIOKafkaProducer, AIOKafkaConsumer]:
    """The producer and consumer, with the sidecar's settings (see the module docstring)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        compression_type="lz4",
        linger_ms=5,
        max_batch_size=BATCH_BYTES,
        max_request_size=MAX_MESSAGE_BYTES,
    )
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    return producer, consumer


async def run(bootstrap: str, inputs: list[str], output: str, group: str, stop: asyncio.Event) -> int:
    """Copy every input partition to output partition 0 until ``stop``; the records written."""
    counts = await prepare_topics(bootstrap, inputs, output)
    producer, consumer = clients(bootstrap, group)
    await producer.start()
    await consumer.start()
    consumer.assign([TopicPartition(t, p) for t in inputs for p in range(counts[t])])
    writer = OutputWriter(producer)
    acked: dict[TopicPartition, int] = {}
    written = 0
    print("READY", flush=True)

    def on_ack(offsets: dict[TopicPartition, int], _: asyncio.Future[object]) -> None:
        acked.update(offsets)

    async def committer() -> None:
        while True:
            await asyncio.sleep(0.1)
            if acked:
                offsets = dict(acked)
                acked.clear()
                await consumer.commit(offsets)

    commits = asyncio.create_task(committer())
    try:
        while not stop.is_set():
            fetched = await consumer.getmany(timeout_ms=100, max_records=20_000)
            if not fetched:
                continue
            # One write per poll, as the sidecar does: a send per input partition would wait for
            # the previous batch of the same output partition to drain each time.
            records = [r for recs in fetched.values() for r in recs]
            futures = await writer.send(output, 0, copy_into_batches(records, producer.create_batch))
            if futures:
                done = {tp: recs[-1].offset + 1 for tp, recs in fetched.items() if recs}
                futures[-1].add_done_callback(lambda f, o=done: on_ack(o, f))
            written += len(records)
        await producer.flush()
    finally:
        commits.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await commits
        if acked:
            await consumer.commit(dict(acked))
        await consumer.stop()
        await producer.stop()
    return written


def main(argv: list[str] | None = None) -> int:
    args = copy_arguments("passthrough", __doc__.split("\n\n")[0], argv)

    async def serve() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        return await run(
            args.bootstrap_servers, args.input_topics.split(","), args.output_topic, args.group_id, stop
        )

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        written = runner.run(serve())
    print(f"passthrough: {written} records written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
