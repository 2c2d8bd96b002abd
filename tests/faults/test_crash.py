"""kill -9 the sidecar at random points of a run, restarting it each time.

At least once (the default): every input (topic, partition, offset) comes out at least once,
each input partition's order holds, and the copies of a record are identical but for the
headers a restart recomputes. Exactly once (``processing.guarantee=exactly_once_v2``): a
``read_committed`` consumer of the output sees every input exactly once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.sidecar_process import SidecarProcess
from testkit.workloads import steady

from .conftest import Size
from .delivery import check, end_offsets, per_partition, table_row, wait_committed

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(600)]

PARTITIONS = 2
#: After a restart becomes healthy, it runs this long (uniformly drawn) before the next kill.
KILL_AFTER_S = (0.0, 2.0)
#: Roughly how long one kill cycle takes (start ≈ 1–2 s, then the run above): the input is
#: written over the whole kill phase, so that every kill lands mid-stream.
CYCLE_S = 2.5


@dataclass
class KillRun:
    kills: int
    out_at_kill: list[int]  # records the killed run had written (its /status), per kill
    seconds: float


async def run_with_kills(
    bootstrap: str,
    inputs: list[str],
    output: str,
    records: int,
    kills: int,
    settings: dict[str, object],
    log_dir: Path,
    seed: int,
) -> tuple[KillRun, dict[tuple[str, int], int]]:
    """Write ``records`` paced over the kill phase; kill -9 the sidecar ``kills`` times; let a last
    run finish and stop it cleanly once its group has committed every input."""
    rng = random.Random(seed)
    rate = records / (kills * CYCLE_S)
    events = steady(inputs, PARTITIONS, records, base_ms=1_700_000_000_000, seed=seed, rate_per_s=rate)
    started = time.monotonic()
    producing = asyncio.create_task(kafka_io.produce(bootstrap, events, paced=True))
    out_at_kill: list[int] = []
    try:
        for _ in range(kills):
            process = SidecarProcess(bootstrap, inputs, output, settings, log_dir=log_dir)
            await process.start()
            await asyncio.sleep(rng.uniform(*KILL_AFTER_S))
            try:
                out_at_kill.append((await process.status())["tasks"]["0"]["records_out"])
            finally:
                await process.kill()
        last = SidecarProcess(bootstrap, inputs, output, settings, log_dir=log_dir)
        await last.start()
        await producing
        expected = per_partition((e.topic, e.partition) for e in events)
        ends = await end_offsets(bootstrap, expected)
        assert ends == expected, "the inputs hold exactly what was written"
        await wait_committed(bootstrap, f"timesync-{output}", ends, timeout_s=120)
        assert await last.stop() == 0, last.log_tail()
    finally:
        producing.cancel()
    return KillRun(kills, out_at_kill, time.monotonic() - started), expected


async def test_kill_9_at_random_points_loses_nothing_and_keeps_partition_order(
    bootstrap: str, topic_name: Callable[[str], str], tmp_path: Path, size: Size
) -> None:
    a, b, out = topic_name("a"), topic_name("b"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, PARTITIONS), TopicSpec(b, PARTITIONS)])

    run, expected = await run_with_kills(
        bootstrap, [a, b], out, size.crash_records, size.kills, {}, tmp_path, seed=8
    )
    got = ordered.data(await kafka_io.read_topics(bootstrap, [out], idle_s=1.0, timeout_s=120))
    delivery = check(expected, got)

    print(f"\nat-least-once, {run.kills} kills in {run.seconds:.1f} s; out at each kill: {run.out_at_kill}")
    print(delivery.line())
    print(table_row("crash (kill -9), at_least_once", run.kills + 1, delivery))
    assert sum(1 for n in run.out_at_kill if n > 0) >= run.kills // 2, "most kills land mid-stream"
    assert delivery.problems == []
    assert delivery.lost == 0
    assert delivery.rewinds <= run.kills, "a partition goes back only where a run was killed"


async def test_exactly_once_v2_under_kill_9_shows_each_input_once_to_read_committed(
    bootstrap: str, topic_name: Callable[[str], str], tmp_path: Path, size: Size
) -> None:
    a, b, out = topic_name("a"), topic_name("b"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, PARTITIONS), TopicSpec(b, PARTITIONS)])

    run, expected = await run_with_kills(
        bootstrap,
        [a, b],
        out,
        size.crash_records,
        size.kills,
        {"processing.guarantee": "exactly_once_v2"},
        tmp_path,
        seed=9,
    )
    committed = ordered.data(
        await kafka_io.read_topics(
            bootstrap, [out], idle_s=1.0, timeout_s=120, isolation_level="read_committed"
        )
    )
    everything = ordered.data(await kafka_io.read_topics(bootstrap, [out], idle_s=1.0, timeout_s=120))
    delivery = check(expected, committed)

    print(f"\nexactly_once_v2, {run.kills} kills in {run.seconds:.1f} s; out at each kill: {run.out_at_kill}")
    print(delivery.line())
    print(f"aborted (seen only by read_uncommitted): {len(everything) - len(committed)} records")
    print(table_row("crash (kill -9), exactly_once_v2, read_committed", run.kills + 1, delivery))
    assert sum(1 for n in run.out_at_kill if n > 0) >= run.kills // 2, "most kills land mid-stream"
    assert delivery.problems == []
    assert delivery.lost == 0
    assert delivery.duplicates == 0
    assert delivery.rewinds == 0
