"""``python -m bench core``: records/s through ``MergeTask`` alone, and allocations per record.

No broker, no event loop: the records are built up front, then pushed in fetch-sized chunks
(``observe_fetch`` + ``push`` per partition), the task is polled until it stops emitting, and
every batch is acked — the same calls the sidecar makes, minus Kafka. Two shapes of input:

* ``interleaved`` — every partition steady, timestamps interleaved record by record: the worst
  case for the merge, since runs from one partition are about one record long;
* ``bursty`` — partitions take turns producing bursts: long runs, the best case.

Idle ``-1`` never waits; ``max`` waits for every partition, so each poll stops when one runs dry.
``stamp`` adds building the output headers (what the producer needs), for comparison.
``--merge native,python`` runs each configuration on the C merge kernel and on the Python core
that specifies it (``sidecar/core/kernel.py``), alternating, so that the two share the machine's
load of the moment.
The collector is tuned as the sidecar tunes it (``sidecar.cli.tune_gc``), so the figures are
the ones the service gets.
"""

from __future__ import annotations

import gc
import platform
import random
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sidecar.core import Emit, MergeTask, Record, TaskConfig, TopicPartition
from sidecar.core.kernel import MergeName, merge_name
from sidecar.core.readiness import IDLE_FOREVER
from sidecar.core.stamping import Stamper

FETCH = 500  # records per partition per fetch, as aiokafka's getmany hands them over


@dataclass
class CoreResult:
    merge: str
    shape: str
    partitions: int
    idle: str
    stamp: bool
    records: int
    seconds: float
    records_per_s: float
    blocks_per_record: float
    bytes_per_record: float


def build(shape: str, partitions: int, records: int, seed: int = 1) -> list[list[Record]]:
    rng = random.Random(seed)
    per = records // partitions
    out: list[list[Record]] = []
    for p in range(partitions):
        topic = f"in{p % 4}"
        if shape == "interleaved":
            stamps = [1_700_000_000_000 + i * partitions + rng.randrange(partitions) for i in range(per)]
        else:  # bursty: partition p owns a burst of 200 consecutive milliseconds in turn
            stamps = [
                1_700_000_000_000 + (i // 200) * 200 * partitions + p * 200 + i % 200 for i in range(per)
            ]
        stamps.sort()
        out.append([Record(topic, p // 4, o, ts, value=b"x" * 100) for o, ts in enumerate(stamps)])
    return out


def drive(parts: list[list[Record]], idle: int, stamp: bool, native: bool | None = None) -> int:
    """Push every partition in fetch-sized chunks, poll and ack; return records emitted.
    ``native``: the take in C, in Python, or (``None``) as this process chose."""
    tps = [TopicPartition(f"in{p % 4}", p // 4) for p in range(len(parts))]
    task = MergeTask(tps, TaskConfig(max_task_idle_ms=idle, watermark_heartbeat_ms=0), native=native)
    stamper = Stamper()
    out = 0
    total = len(parts[0])
    for now, start in enumerate(range(0, total, FETCH), 1):
        end = min(start + FETCH, total)
        for tp, recs in zip(tps, parts, strict=True):
            task.observe_fetch(tp, total, end, now)
            task.push(tp, recs[start:end])
        while True:
            result = task.poll(now)
            if not isinstance(result, Emit):
                break
            if stamp:
                stamper.stamp(result)
            out += len(result.records)
            task.acked((result.batch_id,))
    return out


def measure(
    shape: str, partitions: int, idle: str, stamp: bool, records: int, merge: MergeName | None = None
) -> CoreResult:
    """One configuration; ``merge``: on that take path (``None``: this process's choice)."""
    native = None if merge is None else merge == "native"
    parts = build(shape, partitions, records)
    idle_ms = -1 if idle == "-1" else IDLE_FOREVER
    gc.collect()
    t0 = time.perf_counter()
    emitted = drive(parts, idle_ms, stamp, native)
    seconds = time.perf_counter() - t0
    # Allocations: a smaller run under tracemalloc (it slows Python down several times).
    small = build(shape, partitions, min(records, 100_000))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    small_out = drive(small, idle_ms, stamp, native)
    after = tracemalloc.take_snapshot()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    diff = after.compare_to(before, "filename")
    blocks = sum(max(0, d.count_diff) for d in diff)
    return CoreResult(
        merge or merge_name(),
        shape,
        partitions,
        idle,
        stamp,
        emitted,
        round(seconds, 3),
        round(emitted / seconds),
        round(blocks / max(1, small_out), 3),
        round(peak / max(1, small_out), 1),
    )


def run(records: int = 1_000_000, quick: bool = False, merges: Sequence[MergeName] = ()) -> list[CoreResult]:
    """Every configuration, once per take path of ``merges`` in turn (none: this process's)."""
    from bench.progress import track
    from sidecar.cli import tune_gc

    tune_gc()
    configs = [
        (shape, partitions, idle, stamp)
        for stamp in (False, True)
        for shape in ("interleaved", "bursty")
        for partitions in (2, 8, 64)
        for idle in ("-1", "max")
        if not (stamp and partitions != 8)
    ]
    if quick:
        records = min(records, 100_000)
    paths: Sequence[MergeName | None] = merges or (None,)
    results = []
    with track("bench core", total=len(configs) * len(paths)) as progress:
        for i, (shape, partitions, idle, stamp) in enumerate(configs):
            for j, merge in enumerate(paths):
                results.append(measure(shape, partitions, idle, stamp, records, merge))
                progress.update(i * len(paths) + j + 1)
    return results


def report(results: list[CoreResult]) -> str:
    lines = [
        f"MergeTask throughput — {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}, fetch chunks of {FETCH} records per partition, "
        f"GC thresholds {gc.get_threshold()} (as the sidecar sets them)",
        "",
        "| merge | input | partitions | idle | + stamping | records | records/s "
        "| blocks alive/record | peak bytes/record |",
        "|---|---|---:|---:|:-:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.merge} | {r.shape} | {r.partitions} | {r.idle} | {'yes' if r.stamp else ''} "
            f"| {r.records:,} | {r.records_per_s:,} | {r.blocks_per_record} | {r.bytes_per_record} |"
        )
    return "\n".join(lines)


def as_json(results: list[CoreResult]) -> list[dict[str, Any]]:
    return [asdict(r) for r in results]
