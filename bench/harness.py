"""``python -m bench run``: every system on every workload, one at a time, on one broker.

Three phases, all on the same broker:

1. **throughput** — the steady workload written up front (a backlog); each system drains it from
   the beginning. records/s is the rate while the output grew from 25 % to 75 % of the backlog
   (end offsets sampled every 100 ms), so neither start-up, a JVM's warm-up nor a reading client
   is in the figure; the headline systems drain it three times (median). The outputs of
   ``timesync/partition idle 0`` and
   ``kafka-streams idle 0`` are compared record by record (the same order up to ties), and the
   idle ``max`` output with the merge a merger with full knowledge makes.
2. **live** — per workload and system: fresh topics, the system started, the workload written at
   its arrival times (plus a backlog first for ``lagging``), then end markers. Latency is
   LogAppendTime of the output record − the moment its input was handed to the producer (or the
   moment the system became ready, for records written before). Disorder is measured over the
   output in the order one consumer of the topic sees it.
3. **spark** — see :mod:`bench.spark_bench`.

Runs are strictly sequential (this is a 2-core machine): a system runs alone with the producer.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import platform
import shutil
import statistics
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench import analysis, collect, scenarios
from bench import ceiling as bench_ceiling
from bench.analysis import Inputs, Output
from bench.plan import Plan
from bench.progress import console, track
from bench.scenarios import Scenario
from bench.systems import KS_PROFILES, TIMESYNC_LZ4_HC, CpuSampler, SystemSpec, running, usage
from testkit import workloads
from testkit.workloads import Event

SCHEMA_VERSION = 2


# --------------------------------------------------------------------------------------------
# Shared pieces


def _expected_markers(spec: SystemSpec, partitions_total: int, tasks: int) -> int:
    """End markers that reach the output: at idle ``max`` a task emits one and then waits forever
    for the partition it came from (it is empty again); otherwise every marker goes out."""
    if spec.kind != "passthrough" and spec.idle == "max":
        return 1 if spec.output_partitions(tasks) == 1 else tasks
    return partitions_total


def _run_metrics(
    spec: SystemSpec, out: Output, inputs: Inputs, duplicates: int, ideal: list[np.ndarray[Any, Any]]
) -> dict[str, Any]:
    """Latency and disorder of one run's output."""
    order = out.consumer_order()
    ids = out.id[order]
    ts = inputs.ts[ids]
    latencies = out.append_ms - inputs.available_ms[out.id]
    per_task = spec.output_partitions(int(inputs.partition.max()) + 1) > 1
    reference = ideal_inversions(ideal, inputs)
    result: dict[str, Any] = {
        "records_out": len(out.id),
        "missing": len(inputs) - len(out.id),
        "duplicates": duplicates,
        "latency": analysis.latency(latencies),
        "disorder": analysis.disorder(ts),
        "inversions_within_partitions": analysis.within_partitions(out, inputs) if per_task else None,
        "reference_inversions": reference,
        "enforced": int(out.enforced.sum()) if spec.kind == "timesync" else None,
        "marked_late": int(out.late.sum()) if spec.kind == "timesync" else None,
        "equals_ideal_merge": None,
    }
    if spec.kind != "passthrough" and spec.idle == "max":
        result["equals_ideal_merge"] = _equals_ideal(out, ideal, per_task)
    return result


def ideal_inversions(ideal: list[np.ndarray[Any, Any]], inputs: Inputs) -> int:
    return sum(analysis.inversions(inputs.ts[task]) for task in ideal)


def _equals_ideal(out: Output, ideal: list[np.ndarray[Any, Any]], per_task: bool) -> bool:
    if not per_task:
        return bool(np.array_equal(out.id[out.consumer_order()], ideal[0]))
    for p, task in enumerate(ideal):
        mine = out.partition == p
        got = out.id[mine][np.argsort(out.offset[mine], kind="stable")]
        if not np.array_equal(got, task):
            return False
    return True


def _usage_fields(pid: int, cpu_at_ready: float) -> dict[str, Any]:
    used = usage(pid)
    return {
        "cpu_s": round(used.cpu_s - cpu_at_ready, 2),
        "cpu_s_with_start": round(used.cpu_s, 2),
        "peak_rss_mib": round(used.peak_rss_bytes / 2**20, 1),
    }


# --------------------------------------------------------------------------------------------
# Phase 1: throughput on a backlog


@dataclass
class Backlog:
    topics: list[str]
    partitions: int
    inputs: Inputs
    markers: int
    mean_value_bytes: float = 0.0
    #: a few of its values, for ProducerPerformance's ``--payload-file``
    sample_values: list[bytes] = field(default_factory=list)


def shape_events(
    shape: str, topics: list[str], partitions: int, records: int, seed: int, value_bytes: int = 100
) -> list[Event]:
    """The backlog's records: ``keyless`` — ``value_bytes`` of padding, no key (the bench's
    classic shape); ``json`` — :func:`testkit.workloads.clickstream` (~250 B JSON, keyed, one
    header). Timestamps 1 ms apart per partition, in the past, with up to 3 ms of jitter."""
    base = collect.now_ms() - records
    if shape == "json":
        return workloads.clickstream(topics, partitions, records, base, seed=seed)
    if shape != "keyless":
        raise ValueError(f"unknown record shape {shape!r}: keyless or json")
    pad = b"x" * value_bytes
    tps = [(t, q) for t in topics for q in range(partitions)]
    n = len(tps)
    rng = np.random.default_rng(seed)
    jitter = rng.integers(0, 4, records)
    return [
        Event(tps[i % n][0], tps[i % n][1], base + (i // n) * n + int(jitter[i]), None, pad, 0)
        for i in range(records)
    ]


async def write_backlog(
    bootstrap: str, name: str, events: list[Event], topics: list[str], partitions: int, what: str
) -> Backlog:
    """Create ``topics`` and write ``events`` (all now), then one end marker per partition."""
    await collect.create(bootstrap, topics, partitions, False, {})
    sent = np.zeros(len(events), dtype=np.int64)
    with track(f"{what}: write the backlog", total=len(events)) as bar:
        await collect.produce_tagged(bootstrap, events, 0, sent, paced=False, progress=bar.update)
    markers = collect.end_markers(topics, partitions, max(e.ts for e in events))
    await collect.produce_markers(bootstrap, markers)
    inputs = await collect.read_inputs(bootstrap, topics, partitions, len(events), sent)
    mean = sum(len(e.value) for e in events) / len(events)
    return Backlog(topics, partitions, inputs, len(markers), mean, [e.value for e in events[:2000]])


async def throughput_run(
    bootstrap: str,
    tag: str,
    spec: SystemSpec,
    backlog: Backlog,
    log_dir: Path,
    keep_output: bool,
    round_no: int = 1,
    warmup: tuple[list[str], int] | None = None,
) -> tuple[dict[str, Any], Output | None]:
    n = len(backlog.inputs)
    out_parts = spec.output_partitions(backlog.partitions)
    output = f"bench-{tag}-out-{spec.slug}-r{round_no}"
    await collect.create(bootstrap, [], 0, False, {output: out_parts})
    expected = n + _expected_markers(spec, backlog.markers, backlog.partitions)
    run_id = f"{tag}-{spec.slug}-r{round_no}"
    warm = warmup if spec.warms_up else None
    async with running(spec, bootstrap, backlog.topics, output, run_id, log_dir, warm) as system:
        sampler = CpuSampler(system.pid)
        sampler.start()
        samples = await collect.wait_for_count(
            bootstrap, output, out_parts, expected, timeout_s=max(120, n / 2000)
        )
        await sampler.stop()
        fields = _usage_fields(system.pid, system.cpu_at_ready_s)
        start_s = system.start_s
    # The end markers (one per input partition) come last: read past them to the data records.
    first, last = await collect.edge_append_times(bootstrap, output, out_parts, tail=backlog.markers + 64)
    span_ms = max(1, last - first)
    steady = collect.steady_rate(samples, expected) if samples else None
    drain_cpu = sampler.cpu_at(last) - sampler.cpu_at(first)
    result = {
        "system": spec.as_json(),
        "records": n,
        "complete": samples is not None,
        "warmup_records": warm[1] if warm else 0,
        # The steady rate needs a few end-offset samples inside the middle half of the drain; a
        # backlog drained in a fraction of a second (--quick) only has the overall rate.
        "records_per_s": round(steady) if steady else (round(n / span_ms * 1000) if samples else None),
        "records_per_s_method": "steady" if steady else "overall",
        "records_per_s_overall": round(n / span_ms * 1000) if samples else None,
        "first_to_last_output_s": round(span_ms / 1000, 3),
        "start_s": round(start_s, 2),
        **fields,
        "cpu_s": round(drain_cpu, 2),
        "cpu_us_per_record": round(drain_cpu / n * 1e6, 2),
    }
    kept = None
    if keep_output:
        kept, _ = await collect.read_output(bootstrap, output, out_parts, n, timeout_s=120)
    return result, kept


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


# --------------------------------------------------------------------------------------------
# Phase 2: live workloads


async def live_run(
    bootstrap: str, tag: str, p: Plan, name: str, spec: SystemSpec, log_dir: Path, round_no: int = 1
) -> tuple[dict[str, Any], Scenario, Inputs]:
    prefix = f"bench-{tag}-{name}-{spec.slug}" + (f"-r{round_no}" if round_no > 1 else "")
    scenario = scenarios.build(name, prefix, p.sizes, p.seed, collect.now_ms())
    output = f"{prefix}-out"
    out_parts = spec.output_partitions(scenario.partitions)
    await collect.create(
        bootstrap, scenario.topics, scenario.partitions, scenario.log_append_time, {output: out_parts}
    )
    n = scenario.records
    sent = np.zeros(n, dtype=np.int64)
    if scenario.backlog:
        await collect.produce_tagged(bootstrap, scenario.backlog, 0, sent, paced=False)
    run_id = f"{tag}-{name}-{spec.slug}" + (f"-r{round_no}" if round_no > 1 else "")
    warmup: list[Event] = []
    if p.sizes.warmup_s > 0 and not scenario.backlog:
        warmup = collect.warmup_events(
            scenario.topics, scenario.partitions, scenario.first_ts, p.sizes.warmup_s, p.sizes.rate_per_s
        )
    async with running(spec, bootstrap, scenario.topics, output, run_id, log_dir) as system:
        cpu_at_start = system.cpu_at_ready_s
        workload_start_ms = system.ready_ms
        if warmup:
            await collect.produce_warmup(bootstrap, warmup)
            await asyncio.sleep(0.5)
            cpu_at_start = usage(system.pid).cpu_s
            workload_start_ms = collect.now_ms()
        first_live = len(scenario.backlog)
        await collect.produce_tagged(bootstrap, scenario.live, first_live, sent, paced=True)
        produced_ms = collect.now_ms()
        last_ts = max(e.ts for e in (*scenario.backlog, *scenario.live))
        # A marker appended in the same millisecond as a data record of another partition would
        # tie with it (LogAppendTime) and could go out first, leaving that record held at idle max.
        await asyncio.sleep(0.005)
        await collect.produce_markers(
            bootstrap, collect.end_markers(scenario.topics, scenario.partitions, last_ts)
        )
        out, duplicates = await collect.read_output(bootstrap, output, out_parts, n, timeout_s=60)
        fields = _usage_fields(system.pid, cpu_at_start)
        status = await system.status()
        start_s = system.start_s
        available = np.maximum(sent, system.ready_ms)
    inputs = await collect.read_inputs(
        bootstrap, scenario.topics, scenario.partitions, n, available, warmup=len(warmup)
    )
    ideal = analysis.ideal_merge(inputs, per_partition_index=out_parts > 1)
    result = {
        "system": spec.as_json(),
        "records": n,
        "warmup_records": len(warmup),
        "produce_s": round((produced_ms - workload_start_ms) / 1000, 2),
        "start_s": round(start_s, 2),
        **fields,
        **_run_metrics(spec, out, inputs, duplicates, ideal),
    }
    if status is not None:
        tasks = status.get("tasks", {}).values()
        result["sidecar_status"] = {
            "records_out": sum(int(t.get("records_out", 0)) for t in tasks),
            "enforced": sum(int(t.get("enforced", 0)) for t in tasks),
            "late": sum(int(t.get("late", 0)) for t in tasks),
        }
    return result, scenario, inputs


def optimum(scenario: Scenario, inputs: Inputs) -> dict[str, Any]:
    """The offline optimum: every record known before any goes out. Sorted → no disorder; each
    record is visible at the end of the input (the last record's availability)."""
    order = analysis.optimum_order(inputs)
    end = int(inputs.available_ms.max())
    return {
        "system": {"kind": "optimum", "idle": None, "grouping": "single", "label": "optimum"},
        "records": len(inputs),
        "records_out": len(inputs),
        "missing": 0,
        "duplicates": 0,
        "latency": analysis.latency(end - inputs.available_ms),
        "disorder": analysis.disorder(inputs.ts[order]),
        "inversions_within_partitions": None,
        "reference_inversions": ideal_inversions(analysis.ideal_merge(inputs), inputs),
        "enforced": None,
        "marked_late": None,
        "equals_ideal_merge": None,
        "cpu_s": None,
        "cpu_s_with_start": None,
        "peak_rss_mib": None,
        "start_s": None,
        "produce_s": None,
    }


STEADY_HEADLINE = ("passthrough", "timesync idle 0")


async def live_phase(bootstrap: str, tag: str, p: Plan, log_dir: Path) -> list[dict[str, Any]]:
    """Every system on every workload. On ``steady`` the two systems of the added-latency goal run
    ``steady_repeats - 1`` more times, alternating; their p99 is then the median over the rounds
    (one p99 on a shared machine is one stall away from another figure)."""
    results = []
    repeat = [s for s in p.live_systems if s.label in STEADY_HEADLINE] if "steady" in p.workloads else []
    total = len(p.workloads) * len(p.live_systems) + len(repeat) * (p.steady_repeats - 1)
    done = 0
    with track("live runs", total=total) as bar:
        for name in p.workloads:
            runs: list[dict[str, Any]] = []
            last: tuple[Scenario, Inputs] | None = None
            schedule = [(1, spec) for spec in p.live_systems]
            if name == "steady":
                schedule += [(r, spec) for r in range(2, p.steady_repeats + 1) for spec in repeat]
            by_label: dict[str, dict[str, Any]] = {}
            for round_no, spec in schedule:
                result, scenario, inputs = await live_run(bootstrap, tag, p, name, spec, log_dir, round_no)
                lat, dis = result["latency"], result["disorder"]
                console.print(
                    f"  {name:<10} {spec.label:<24} p99 {lat['p99_ms']} ms  max {lat['max_ms']} ms  "
                    f"late {dis['late_share']:.2%}  inversions {dis['inversions']:,}"
                    + ("" if not result["missing"] else f"  [red]missing {result['missing']}[/]")
                    + (f"  (round {round_no})" if round_no > 1 else "")
                )
                if round_no == 1:
                    runs.append(result)
                    by_label[spec.label] = result
                    result["latency_p99_runs_ms"] = [lat["p99_ms"]]
                    last = (scenario, inputs)
                else:
                    by_label[spec.label]["latency_p99_runs_ms"].append(lat["p99_ms"])
                done += 1
                bar.update(done)
            assert last is not None
            scenario, inputs = last
            runs.append(optimum(scenario, inputs))
            results.append(
                {
                    "name": name,
                    "description": scenarios.DESCRIPTIONS[name],
                    "records": scenario.records,
                    "backlog_records": len(scenario.backlog),
                    "topics": len(scenario.topics),
                    "partitions_per_topic": scenario.partitions,
                    "duration_s": round(scenario.duration_ms / 1000, 1),
                    "log_append_time": scenario.log_append_time,
                    "runs": runs,
                }
            )
    return results


# --------------------------------------------------------------------------------------------
# The run


def _version(cmd: Sequence[str]) -> str | None:
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (proc.stdout + proc.stderr).strip().splitlines()
    return text[0].strip() if text else None


def environment() -> tuple[dict[str, Any], dict[str, Any]]:
    """(machine, versions) for results.json."""
    from importlib import metadata

    def pkg(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    cpu = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    machine = {
        "hostname": platform.node(),
        "os": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_bytes": mem,
        "load_average_at_start": list(os.getloadavg()),
    }
    from bench.peers.kafka_streams import POM
    from testkit.local_broker import load_launcher

    launcher = load_launcher()
    versions = {
        "python": platform.python_version(),
        "timesync": pkg("timesync"),
        "aiokafka": pkg("aiokafka"),
        "pyspark": pkg("pyspark"),
        "java": _version(["java", "-version"]),
        "kafka_broker": getattr(launcher, "KAFKA_VERSION", None) or _pom_version(launcher),
        "kafka_streams": _pom_property(POM, "kafka.version"),
        "kafka_tools": _pom_property(bench_ceiling.TOOLS_DIR / "pom.xml", "kafka.version"),
        "confluent_kafka": pkg("confluent-kafka"),
        "librdkafka": _librdkafka(),
        "git_commit": _version(["git", "-C", str(Path(__file__).parent), "rev-parse", "HEAD"]),
    }
    return machine, versions


def _librdkafka() -> str | None:
    try:
        import confluent_kafka
    except ImportError:
        return None
    return str(confluent_kafka.libversion()[0])


def _pom_property(pom: Path, name: str) -> str | None:
    import re

    match = re.search(rf"<{re.escape(name)}>([^<]+)</", pom.read_text())
    return match.group(1) if match else None


def _pom_version(launcher: Any) -> str | None:
    repo = Path(launcher.__file__).parent
    for pom in (repo / "broker" / "pom.xml", repo / "pom.xml"):
        if pom.is_file():
            found = _pom_property(pom, "kafka.version")
            if found:
                return found
    return None


async def run(bootstrap: str, p: Plan, out_dir: Path) -> dict[str, Any]:
    """Run the plan against ``bootstrap``; return results (see bench/README.md for the schema)."""
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    started = time.time()
    tag = uuid.uuid4().hex[:6]
    machine, versions = environment()
    log_dir = out_dir / "logs"
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    console.print(f"[bold]timesync bench[/] run {tag} ({'quick' if p.quick else 'full'}), broker {bootstrap}")
    from bench.peers.kafka_streams import build

    with track("kafka streams peer: build (cached)", total=None):
        build_started = time.monotonic()
        build()
        bench_ceiling.fetch_tools()
        ks_build_s = time.monotonic() - build_started
    phases = {"kafka_streams_build": round(ks_build_s, 1)}
    mark = time.monotonic()
    throughput = await throughput_phase(bootstrap, tag, p, log_dir)
    phases["throughput"] = round(time.monotonic() - mark, 1)
    cost_curves = None
    if p.curves:
        from bench import curves

        mark = time.monotonic()
        cost_curves = await curves.curves_phase(bootstrap, tag, p, log_dir)
        phases["curves"] = round(time.monotonic() - mark, 1)
    early = None
    if p.spark and p.quick:
        from bench import spark_bench

        early = spark_bench.EarlySession()
    live: list[dict[str, Any]] = []
    if p.live:
        mark = time.monotonic()
        live = await live_phase(bootstrap, tag, p, log_dir)
        phases["live"] = round(time.monotonic() - mark, 1)
    spark = spark_jobs = None
    if p.spark:
        from bench import spark_bench

        mark = time.monotonic()
        spark, session = await spark_bench.spark_phase(bootstrap, tag, p, out_dir, early)
        phases["spark"] = round(time.monotonic() - mark, 1)
        from bench import spark_rates

        mark = time.monotonic()
        spark_jobs = await spark_rates.spark_rates_phase(bootstrap, tag, p, session, log_dir)
        phases["spark_jobs"] = round(time.monotonic() - mark, 1)
    results: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": tag,
        "quick": p.quick,
        "seed": p.seed,
        "started_at": dt.datetime.fromtimestamp(started, dt.UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.time() - started, 1),
        "machine": machine,
        "versions": versions,
        "kafka_streams_build_s": round(ks_build_s, 1),
        "phase_s": phases,
        "load_average_at_end": list(os.getloadavg()),
        "sizes": p.sizes.as_json(),
        "throughput": throughput,
        "curves": cost_curves,
        "workloads": live,
        "spark": spark,
        "spark_jobs": spark_jobs,
    }
    from bench.goals import goals

    results["goals"] = goals(results)
    return results
