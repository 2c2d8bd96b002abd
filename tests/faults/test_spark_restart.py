"""kill -9 the Spark job mid-run and start it again from its checkpoint.

The job (``timesync-spark aggregate``, a real process with its own Spark driver) counts records
per key in tumbling windows and writes each window once, to a Kafka topic. Spark's Kafka sink is
at least once: a micro-batch that was being written when the job died is written again after the
restart. So the check is on the results deduplicated by (key, window): every window is there,
with exactly its count (a replay that counted records twice would show a larger count), and the
copies of a result are identical.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from testkit import kafka_io
from tests.spark.ordered_topic import OrderedRecord, Stamper, create_ordered_topic, produce_async

from .conftest import Size

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]

KEYS = 10
STEP_MS = 10  # event time between records
WINDOW_MS = 1000
BASE_MS = 1_700_000_000_000
#: The first run reads the input in this many micro-batches, so it is killed while some remain.
BATCHES = 4
#: After the first results appear, the first run lives this long more (uniformly drawn).
KILL_AFTER_S = (0.0, 3.0)
START_TIMEOUT_S = 180.0


def workload(records: int) -> tuple[list[OrderedRecord], dict[tuple[str, int], int]]:
    """Records of KEYS keys in event-time order, then a heartbeat that closes every window;
    and the count each (key, window start) must end with."""
    stamp = Stamper(watermark_delay_ms=0)
    out = []
    expected: Counter[tuple[str, int]] = Counter()
    for i in range(records):
        ts = BASE_MS + i * STEP_MS
        key = f"k{i % KEYS}"
        out.append(stamp.record(ts, {"n": i}, key))
        expected[(key, ts - ts % WINDOW_MS)] += 1
    out.append(stamp.heartbeat(BASE_MS + records * STEP_MS + 10 * WINDOW_MS))
    return out, dict(expected)


async def end_offset(bootstrap: str, topic: str) -> int:
    """Records in the job's output topic so far (0 until the job creates it)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        if topic not in await consumer.topics():
            return 0
        tp = TopicPartition(topic, 0)
        return int((await consumer.end_offsets([tp]))[tp])
    finally:
        await consumer.stop()


async def spark_job(args: list[str], log: Path) -> asyncio.subprocess.Process:
    """``python -m spark_consumer ...`` in its own process group (its driver JVM included)."""
    with open(log, "ab") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "spark_consumer", *args,
            stdout=out, stderr=out, stdin=asyncio.subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip


def tail(log: Path, lines: int = 20) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


async def test_spark_job_killed_and_restarted_from_its_checkpoint_loses_and_doubles_nothing(
    bootstrap: str, topic_name: Callable[[str], str], tmp_path: Path, size: Size
) -> None:
    topic, output = topic_name("ordered"), topic_name("results")
    await create_ordered_topic(bootstrap, topic)
    records, expected = workload(size.spark_records)
    await produce_async(bootstrap, topic, records)
    common = [
        "aggregate", "--bootstrap-servers", bootstrap, "--topic", topic, "--output-topic", output,
        "--checkpoint", str(tmp_path / "checkpoint"), "--size", f"{WINDOW_MS}ms", "--agg", "count",
        "--master", "local[2]",
    ]  # fmt: skip
    log = tmp_path / "spark.log"

    batch = str(len(records) // BATCHES + 1)
    first = await spark_job([*common, "--trigger", "1s", "--max-offsets-per-trigger", batch], log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while await end_offset(bootstrap, output) == 0:
            assert first.returncode is None, f"the job exited with {first.returncode}:\n{tail(log)}"
            assert time.monotonic() < deadline, f"no result within {START_TIMEOUT_S} s:\n{tail(log)}"
            await asyncio.sleep(0.5)
        await asyncio.sleep(random.Random(7).uniform(*KILL_AFTER_S))
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the Python driver and its Spark JVM at once
        await first.wait()
    before_kill = await end_offset(bootstrap, output)

    # The restart first repeats the batch the kill interrupted (its offsets are in the checkpoint),
    # then reads the rest at once.
    second = await spark_job([*common, "--trigger", "available-now"], log)
    try:
        assert await asyncio.wait_for(second.wait(), START_TIMEOUT_S) == 0, tail(log)
    finally:
        if second.returncode is None:
            os.killpg(second.pid, signal.SIGKILL)
            await second.wait()

    written = await kafka_io.read_topics(bootstrap, [output], idle_s=1.0, timeout_s=60)
    results: dict[tuple[str, int], list[dict[str, object]]] = {}
    for r in written:
        row = json.loads(r.value)
        results.setdefault((row["key"], row["window_start"]), []).append(row)
    got = {window: rows[0]["count"] for window, rows in results.items()}
    lost = [w for w in expected if w not in got]
    wrong = {w: (got[w], n) for w, n in expected.items() if w in got and got[w] != n}
    differing = [w for w, rows in results.items() if any(row != rows[0] for row in rows)]
    duplicates = len(written) - len(results)

    print(
        f"\n{len(records)} records, {batch} per micro-batch in the first run; {before_kill} results "
        f"written before the kill, {len(written)} in all, {len(results)} distinct windows of "
        f"{len(expected)} expected"
    )
    print(f"lost {len(lost)}, wrong counts {len(wrong)}, duplicates {duplicates}")
    print(
        f"| Spark job kill -9 + restart from checkpoint | 2 | {len(expected)} | {len(lost)} | {duplicates} |"
    )
    assert 0 < before_kill < len(expected), "the job was killed mid-run"
    assert lost == []
    assert wrong == {}, "(window: (count written, count expected)): nothing counted twice or missed"
    assert set(got) == set(expected), "no result for a window that has no records"
    assert differing == [], "copies of a result are identical"
