"""A throttled output: the sidecar stops reading ahead, its memory stays bounded, it catches up.

The output is slowed by a Kafka producer quota (``producer_byte_rate``) on the sidecar's client
id, which is what an overloaded or rate-limited cluster does: the broker delays the produce
responses, fetches go on at full speed. A backlog waits on the inputs. While throttled, the
sidecar must take in no more than it can hold, and the process's memory must not grow with the
backlog; once the quota is lifted, everything comes out.

What the sidecar may hold: per partition its merge buffer (``buffered.records.per.partition``,
paused above it, plus the fetch response that crossed it) and one fetch response prefetched by
aiokafka, and the batch being written (at most ``MAX_EMIT_RECORDS``). A slow output holds the
pipeline in the write, so it stops fetching: the inputs are held back without a pause, and the
merge buffers stay nearly empty. ``/status`` says so: its ``output`` shows the write the pipeline
waits in, since when, and the batches in flight.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from sidecar.kafka.admin import TopicSpec
from sidecar.service.pipeline import MAX_EMIT_RECORDS
from testkit import kafka_io, ordered
from testkit.sidecar_process import SidecarProcess
from testkit.workloads import steady

from .conftest import Size
from .delivery import check, per_partition, table_row, wait_committed
from .quotas import set_client_quota

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(400)]

PARTITIONS = 2
VALUE_BYTES = 1000
#: The output's quota while throttled: about 500 records/s of VALUE_BYTES.
THROTTLE_BYTES_PER_S = 500_000
THROTTLED_S = 6.0
LIMIT = 1000  # buffered.records.per.partition
#: aiokafka fetches up to 1 MiB per partition per response.
FETCH_RECORDS = (1024 * 1024) // VALUE_BYTES + 1
#: Records the sidecar may hold at once (see the module's docstring).
HOLD_BOUND = MAX_EMIT_RECORDS + 2 * PARTITIONS * (LIMIT + 2 * FETCH_RECORDS)
#: What holding HOLD_BOUND records may add to the RSS: their values twice (the fetched and the
#: encoded copy). It does not depend on the backlog: at full size (191 MiB) it is far below it.
RSS_GROWTH_BOUND_MIB = 2 * HOLD_BOUND * VALUE_BYTES / 2**20


class OutputEnd:
    """The output's end offset (its partition 0), read with one consumer kept open."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        self.tp = TopicPartition(topic, 0)

    async def __aenter__(self) -> OutputEnd:
        await self.consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def end(self) -> int:
        return int((await self.consumer.end_offsets([self.tp]))[self.tp])


def memory_mib(pid: int) -> tuple[float, float]:
    """(resident now, peak resident) of a process, in MiB, from /proc."""
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in {"VmRSS", "VmHWM"}:
                fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


async def test_throttled_output_pauses_inputs_bounds_memory_and_catches_up_when_lifted(
    bootstrap: str, topic_name: Callable[[str], str], tmp_path: Path, size: Size
) -> None:
    a, b, out = topic_name("a"), topic_name("b"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, PARTITIONS), TopicSpec(b, PARTITIONS)])
    noise = random.Random(5)  # incompressible values: the quota counts bytes on the wire (lz4)
    events = [
        dataclasses.replace(e, value=noise.randbytes(VALUE_BYTES))
        for e in steady([a, b], PARTITIONS, size.records, 1_700_000_000_000, seed=5, rate_per_s=10_000)
    ]
    await kafka_io.produce(bootstrap, events)
    expected = per_partition((e.topic, e.partition) for e in events)
    client_id = f"timesync-{out}"  # the sidecar's client id (sidecar.kafka.clients)
    await set_client_quota(bootstrap, client_id, "producer_byte_rate", THROTTLE_BYTES_PER_S)

    process = SidecarProcess(
        bootstrap, [a, b], out, {"buffered.records.per.partition": LIMIT}, log_dir=tmp_path
    )
    try:
        await process.start()
        rss_start, _ = memory_mib(process.pid)
        samples = []
        outputs = []  # /status "output" while throttled
        started = time.monotonic()
        async with OutputEnd(bootstrap, out) as output:
            while time.monotonic() - started < THROTTLED_S:
                status = await process.status()
                task = status["tasks"]["0"]
                outputs.append(status["output"])
                code, _ = await process.get("/healthz")
                # Held: taken in, not yet in the output (heartbeats are records of the output too).
                held = task["records_in"] - (await output.end() - task["heartbeats"])
                samples.append((task, held, code))
                await asyncio.sleep(0.25)
        _, peak_throttled = memory_mib(process.pid)

        await set_client_quota(bootstrap, client_id, "producer_byte_rate", None)
        lifted = time.monotonic()
        await wait_committed(bootstrap, f"timesync-{out}", expected, timeout_s=180)
        catch_up_s = time.monotonic() - lifted
        _, peak_total = memory_mib(process.pid)
        assert await process.stop() == 0, process.log_tail()
    finally:
        await set_client_quota(bootstrap, client_id, "producer_byte_rate", None)
        if process.proc is not None and process.proc.returncode is None:
            await process.stop()
    got = ordered.data(await kafka_io.read_topics(bootstrap, [out], idle_s=1.0, timeout_s=180))
    delivery = check(expected, got)

    taken_in = samples[-1][0]["records_in"]
    most_held = max(held for _, held, _ in samples)
    most_buffered = max(p["buffered"] for task, _, _ in samples for p in task["partitions"])
    paused = sum(1 for task, _, _ in samples for p in task["partitions"] if p["paused"])
    unhealthy = sum(1 for _, _, code in samples if code != 200)
    backlog_mib = size.records * VALUE_BYTES / 2**20
    print(
        f"\nbacklog {size.records} records ({backlog_mib:.0f} MiB); throttled {THROTTLED_S:g} s at "
        f"{THROTTLE_BYTES_PER_S / 1000:g} kB/s: {taken_in} records taken in, at most {most_held} held "
        f"(bound {HOLD_BOUND}), at most {most_buffered} in one merge buffer (limit {LIMIT}), "
        f"{paused} paused partition samples; /healthz not 200 in {unhealthy} of {len(samples)} samples"
    )
    print(
        f"RSS: {rss_start:.0f} MiB at start, peak {peak_throttled:.0f} MiB while throttled, "
        f"peak {peak_total:.0f} MiB overall; caught up {catch_up_s:.1f} s after the quota was lifted"
    )
    blocked = [o for o in outputs if o["blocked"]]
    longest = max((o["writing"]["waiting_ms"] for o in outputs if o["writing"]), default=0)
    print(
        f"/status output blocked in {len(blocked)} of {len(outputs)} samples, longest wait in one "
        f"write {longest / 1000:.1f} s, at most {max(o['batches_in_flight'] for o in outputs)} "
        f"batches in flight; e.g. {blocked[-1]['blocked'] if blocked else None!r}"
    )
    print(delivery.line())
    print(table_row("slow output (producer quota)", 1, delivery))
    assert taken_in < size.records / 2, "the throttled sidecar left the backlog on the broker"
    assert most_held <= HOLD_BOUND
    assert most_buffered <= LIMIT + FETCH_RECORDS
    # Memory follows what the sidecar may hold, never the backlog on the broker.
    assert peak_throttled - rss_start < RSS_GROWTH_BOUND_MIB
    assert any(o["writing"] and o["writing"]["topic"] == out for o in outputs), "/status shows the write"
    assert blocked, "/status says the pipeline is blocked writing"
    assert f"writing to {out}[0]" in blocked[-1]["blocked"]
    assert delivery.problems == []
    assert delivery.lost == 0
    assert delivery.duplicates == 0
