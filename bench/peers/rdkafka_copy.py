"""The librdkafka copy: confluent-kafka consume → produce with no ordering at all.

The fastest Python client there is, doing the least a sidecar could do: the benchmark's answer
to "how fast could a Python process move these records at all?". librdkafka decodes fetched
batches and builds produce batches in C on its own threads; Python touches each record once
(``consume`` returns a ``Message``, ``produce`` hands it back). Records keep key, value,
timestamp and headers and go to partition 0 of the output topic, as with the passthrough and
``task.grouping=single``. The producer uses the settings Kafka's own perf tools are run with in
the benchmark (acks=all, idempotence, lz4, linger 5 ms, 256 KiB batches); offsets are committed
every 100 ms once every record consumed before was delivered (at-least-once, as the sidecar).

    python -m bench.peers.rdkafka_copy --bootstrap-servers H:P --input-topics a,b --output-topic out
"""

from __future__ import annotations

import collections
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.peers.arguments import copy_arguments
from sidecar.output.writer import MAX_MESSAGE_BYTES

COMMIT_INTERVAL_S = 0.1
BATCH = 10_000


def _partitions(admin: AdminClient, topics: list[str], timeout_s: float = 30.0) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    while True:
        meta = admin.list_topics(timeout=10)
        found = {
            t: len(meta.topics[t].partitions)
            for t in topics
            if t in meta.topics and meta.topics[t].partitions
        }
        if len(found) == len(topics):
            return found
        if time.monotonic() > deadline:
            raise SystemExit(
                f"rdkafka_copy: topics missing on the broker: {sorted(set(topics) - set(found))}"
            )
        time.sleep(0.2)


def prepare_topics(bootstrap: str, inputs: list[str], output: str) -> dict[str, int]:
    """The output topic (one partition) created if missing; each input's partition count."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    counts = _partitions(admin, inputs)
    if output not in admin.list_topics(timeout=10).topics:
        futures = admin.create_topics(
            [NewTopic(output, 1, 1, config={"max.message.bytes": str(MAX_MESSAGE_BYTES)})]
        )
        for future in futures.values():  # keep ``admin`` referenced until they resolve
            try:
                future.result(30)
            except KafkaException as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise
    _partitions(admin, [output])
    return counts


def clients(bootstrap: str, group: str, on_delivery: Callable[[Any, Any], None]) -> tuple[Producer, Consumer]:
    """The producer (Kafka's perf tools' settings, see the module docstring) and the consumer."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 5,
            "batch.size": 262_144,
            "message.max.bytes": MAX_MESSAGE_BYTES,
            "on_delivery": on_delivery,
        }
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    return producer, consumer


def run(bootstrap: str, inputs: list[str], output: str, group: str) -> int:
    """Copy the inputs to output partition 0 until SIGTERM/SIGINT; records written, -1 on failure."""
    counts = prepare_topics(bootstrap, inputs, output)
    acked = 0
    failed: list[str] = []

    def on_delivery(error: Any, _: Any) -> None:
        nonlocal acked
        if error is not None:
            failed.append(str(error))
        acked += 1

    producer, consumer = clients(bootstrap, group, on_delivery)
    consumer.assign([TopicPartition(t, p) for t in inputs for p in range(counts[t])])
    stop = False

    def on_signal(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print("READY", flush=True)
    written = 0
    consumed: dict[tuple[str, int], int] = {}  # next offset per input partition
    # (records handed to the producer, offsets then): committed once that many were delivered.
    due: collections.deque[tuple[int, list[TopicPartition]]] = collections.deque()
    last_mark = time.monotonic()
    produce, poll = producer.produce, producer.poll
    while not stop and not failed:
        messages = consumer.consume(BATCH, 0.1)
        for m in messages:
            if m.error():
                continue
            while True:
                try:
                    produce(output, m.value(), m.key(), 0, timestamp=m.timestamp()[1], headers=m.headers())
                    break
                except BufferError:  # the producer queue is full: let it send
                    poll(0.05)
            consumed[(m.topic(), m.partition())] = m.offset() + 1
            written += 1
        poll(0)
        now = time.monotonic()
        if consumed and now - last_mark >= COMMIT_INTERVAL_S:
            due.append((written, [TopicPartition(t, p, o) for (t, p), o in consumed.items()]))
            consumed.clear()
            last_mark = now
        # At-least-once: an offset is committed once every record produced before it is delivered
        # (one output partition, idempotent: deliveries are acknowledged in order).
        while due and due[0][0] <= acked:
            consumer.commit(offsets=due.popleft()[1], asynchronous=True)
    producer.flush()
    if failed:
        print(f"rdkafka_copy: delivery failed: {failed[0]}", file=sys.stderr)
        consumer.close()
        return -1
    commit_last(consumer, [tp for _, tps in due for tp in tps], consumed)
    consumer.close()
    return written


def commit_last(
    consumer: Consumer, pending: list[TopicPartition], consumed: dict[tuple[str, int], int]
) -> None:
    """At the end, every record was delivered: commit the newest offset of each input partition."""
    offsets = pending + [TopicPartition(t, p, o) for (t, p), o in consumed.items()]
    if offsets:
        latest = {(tp.topic, tp.partition): tp for tp in offsets}
        consumer.commit(offsets=list(latest.values()), asynchronous=False)


def main(argv: list[str] | None = None) -> int:
    args = copy_arguments("rdkafka_copy", __doc__.split("\n\n")[0], argv)
    written = run(args.bootstrap_servers, args.input_topics.split(","), args.output_topic, args.group_id)
    print(f"rdkafka_copy: {written} records written", file=sys.stderr)
    return 0 if written >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
