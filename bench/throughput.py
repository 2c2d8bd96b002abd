"""Phase 1, throughput: every system drains the same backlog, per record shape.

records/s is the rate while the output grew from 25 % to 75 % of the backlog (end offsets sampled
every 100 ms), so neither start-up, a JVM's warm-up nor a reading client is in the figure; the
headline systems drain it several times (median). Kafka's own producer and consumer tools on
the same broker give the ceiling. The outputs of ``timesync/partition idle 0`` and ``kafka-streams
idle 0`` are compared record by record (the same order up to ties), and the idle ``max`` output
with the merge a merger with full knowledge makes (:func:`order_checks`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import analysis, collect
from bench import ceiling as bench_ceiling
from bench.analysis import Inputs, Output
from bench.backlog import Backlog, shape_events, throughput_run, write_backlog
from bench.plan import Plan
from bench.progress import console, track
from bench.systems import KS_PROFILES, TIMESYNC_LZ4_HC, SystemSpec

HEADLINE = (
    "passthrough",
    "rdkafka-copy",
    "timesync idle 0",
    TIMESYNC_LZ4_HC.label,
    "timesync/partition idle 0",
    "kafka-streams idle 0",
    *(f"kafka-streams idle 0 {profile}" for profile in KS_PROFILES),
)

SHAPES = {
    "keyless": "100 B values of padding, no key, the bench.id header only",
    "json": "~250 B JSON click events, keyed by user, one traceparent header (+ bench.id)",
}


async def ceiling(
    bootstrap: str, tag: str, shape: str, backlog: Backlog, p: Plan, work_dir: Path
) -> dict[str, Any]:
    """Kafka's own producer and consumer alone on this broker, on this shape's records
    (:mod:`bench.ceiling`); the ceiling of a consume → produce copy is the lower rate."""
    topic = f"bench-{tag}-ceiling-{shape}"
    await collect.create(bootstrap, [], 0, False, {topic: 1})
    payload = None
    if shape != "keyless":
        payload = work_dir / f"payload-{shape}.txt"
        payload.write_bytes(b"\n".join(backlog.sample_values))
    record_bytes = round(backlog.mean_value_bytes)
    with track(f"throughput ({shape}): Kafka's ProducerPerformance", total=None):
        producer = await bench_ceiling.producer_performance(
            bootstrap, topic, p.ceiling_records, record_bytes, payload
        )
    with track(f"throughput ({shape}): Kafka's ConsumerPerformance", total=None):
        consumer = await bench_ceiling.consumer_performance(
            bootstrap, backlog.topics, len(backlog.inputs), f"bench-{tag}-cperf-{shape}"
        )
    bound = "producer" if producer["records_per_s"] <= consumer["records_per_s"] else "consumer"
    rate = min(producer["records_per_s"], consumer["records_per_s"])
    console.print(
        f"  ceiling ({shape}): ProducerPerformance {producer['records_per_s']:,} records/s, "
        f"ConsumerPerformance {consumer['records_per_s']:,} records/s"
    )
    return {"records_per_s": rate, "bound_by": bound, "producer": producer, "consumer": consumer}


async def throughput_phase(bootstrap: str, tag: str, p: Plan, log_dir: Path) -> list[dict[str, Any]]:
    """Per record shape: the backlog, the ceiling, then every system drains the backlog once;
    the headline systems again in ``throughput_repeats - 1`` more rounds, in rotated order, and
    report the round with the median rate (its CPU and RSS with it): on a shared 2-core machine
    one drain can be off by a third. A JVM peer first drains a warm-up backlog of the same shape
    (other topics) in the same process."""
    results = []
    for shape in p.throughput_shapes:
        systems = p.throughput_systems if shape == p.throughput_shapes[0] else p.realistic_systems
        topics = [f"bench-{tag}-tp-{shape}-a", f"bench-{tag}-tp-{shape}-b"]
        events = shape_events(shape, topics, 2, p.throughput_records, p.seed, p.value_bytes)
        backlog = await write_backlog(bootstrap, shape, events, topics, 2, f"throughput ({shape})")
        del events
        warm_topics = [f"bench-{tag}-warm-{shape}-a", f"bench-{tag}-warm-{shape}-b"]
        warmup = None
        if any(s.warms_up for s in systems) and p.warmup_records:
            warm_events = shape_events(shape, warm_topics, 2, p.warmup_records, p.seed + 1, p.value_bytes)
            await write_backlog(
                bootstrap, shape, warm_events, warm_topics, 2, f"throughput ({shape}) warm-up"
            )
            warmup = (warm_topics, p.warmup_records)
        top = await ceiling(bootstrap, tag, shape, backlog, p, log_dir)
        first = shape == p.throughput_shapes[0]
        runs, outputs = await _drain_all(
            bootstrap, f"{tag}-{shape}", systems, backlog, p, log_dir, first, warmup
        )
        for run in runs:
            rate = run["records_per_s"]
            run["vs_ceiling"] = (
                round(rate / top["records_per_s"], 3) if rate and top["records_per_s"] else None
            )
        results.append(
            {
                "shape": shape,
                "workload": SHAPES[shape] + ", written before the systems start",
                "records": len(backlog.inputs),
                "value_bytes": round(backlog.mean_value_bytes, 1),
                "topics": len(backlog.topics),
                "partitions_per_topic": backlog.partitions,
                "rounds": p.throughput_repeats,
                "warmup_records": p.warmup_records,
                "ceiling": top,
                "runs": runs,
                "order_checks": order_checks(backlog.inputs, outputs) if first else {},
            }
        )
    return results


def _ks_idle_0(labels: Sequence[str]) -> str | None:
    """The Kafka Streams idle-0 run whose order the checks compare (the bench's own settings first)."""
    for label in ("kafka-streams idle 0", *(f"kafka-streams idle 0 {profile}" for profile in KS_PROFILES)):
        if label in labels:
            return label
    return None


async def _drain_all(
    bootstrap: str,
    tag: str,
    systems: Sequence[SystemSpec],
    backlog: Backlog,
    p: Plan,
    log_dir: Path,
    keep_outputs: bool,
    warmup: tuple[list[str], int] | None,
) -> tuple[list[dict[str, Any]], dict[str, Output]]:
    every: dict[str, list[dict[str, Any]]] = {}  # label → its rounds, in order
    outputs: dict[str, Output] = {}
    keep = {"timesync/partition idle 0", "timesync idle max", "timesync idle 0"}
    ks = _ks_idle_0([s.label for s in systems])
    if ks:
        keep.add(ks)
    schedule = [(1, spec) for spec in systems]
    headline = [spec for spec in systems if spec.label in HEADLINE]
    for round_no in range(2, p.throughput_repeats + 1):
        shift = (round_no - 1) % max(1, len(headline))
        schedule += [(round_no, spec) for spec in headline[shift:] + headline[:shift]]
    with track("throughput: systems", total=len(schedule)) as bar:
        for i, (round_no, spec) in enumerate(schedule):
            wanted = keep_outputs and round_no == 1 and spec.label in keep
            result, out = await throughput_run(
                bootstrap, tag, spec, backlog, log_dir, wanted, round_no, warmup
            )
            console.print(
                f"  {spec.label:<34} {result['records_per_s'] or 0:>9,} records/s steady, "
                f"{result['records_per_s_overall'] or 0:>9,} overall  "
                f"cpu {result['cpu_us_per_record']:.2f} µs/record  rss {result['peak_rss_mib']:.0f} MiB"
                + (f"  (round {round_no})" if round_no > 1 else "")
            )
            every.setdefault(spec.label, []).append(result)
            if out is not None:
                outputs["kafka-streams idle 0" if spec.label == ks else spec.label] = out
            bar.update(i + 1)
    runs = []
    for results in every.values():
        # The whole median round, so its CPU, RSS and overall rate go with its rate.
        measured = [r for r in results if r["records_per_s"] is not None]
        median = statistics.median_low(r["records_per_s"] for r in measured) if measured else None
        run = next((r for r in measured if r["records_per_s"] == median), results[0])
        run["records_per_s_runs"] = [r["records_per_s"] for r in results]
        runs.append(run)
    return runs, outputs


def _per_partition(out: Output) -> list[np.ndarray[Any, Any]]:
    result = []
    for p in range(int(out.partition.max()) + 1 if len(out.partition) else 0):
        mine = out.partition == p
        result.append(out.id[mine][np.argsort(out.offset[mine], kind="stable")])
    return result


def order_checks(inputs: Inputs, outputs: dict[str, Output]) -> dict[str, Any]:
    """timesync vs Kafka Streams (per task, up to ties) and idle ``max`` vs the full-knowledge merge."""
    checks: dict[str, Any] = {}
    ts_part, ks = outputs.get("timesync/partition idle 0"), outputs.get("kafka-streams idle 0")
    if ts_part is not None and ks is not None:
        a, b = _per_partition(ts_part), _per_partition(ks)
        per = [analysis.same_order_up_to_ties(x, y, inputs.ts) for x, y in zip(a, b, strict=False)]
        checks["timesync_partition_vs_kafka_streams_idle_0"] = {
            "equal_up_to_ties": len(a) == len(b) and all(c["equal"] for c in per),
            "equal_exactly": len(a) == len(b) and all(c["equal_exactly"] for c in per),
            "positions_differing": sum(c["positions_differing"] for c in per),
            "tie_runs_differing": sum(c["tie_runs_differing"] or 0 for c in per),
            "records_compared": int(sum(len(x) for x in a)),
        }
    single = analysis.ideal_merge(inputs)[0]
    ideal_inv = analysis.inversions(inputs.ts[single])
    for label in ("timesync idle 0", "timesync idle max"):
        out = outputs.get(label)
        if out is None:
            continue
        ids = out.id[out.consumer_order()]
        checks[label.replace(" ", "_")] = {
            "inversions": analysis.inversions(inputs.ts[ids]),
            "ideal_merge_inversions": ideal_inv,
            "equals_ideal_merge": bool(np.array_equal(ids, single)),
        }
    return checks
