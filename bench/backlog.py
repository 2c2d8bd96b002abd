"""A backlog — records written before any system starts — and one system draining it.

The unit of work of the throughput phase (:mod:`bench.throughput`) and of the cost curves
(:mod:`bench.curves`): :func:`shape_events` makes the records, :func:`write_backlog` writes them
with one end marker per partition, :func:`throughput_run` starts one system on them and measures
its rate, CPU and memory while it drains the backlog into its own output topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench import collect
from bench.analysis import Inputs, Output
from bench.progress import track
from bench.systems import CpuSampler, SystemSpec, running, usage_fields
from testkit import workloads
from testkit.workloads import Event


def _expected_markers(spec: SystemSpec, partitions_total: int, tasks: int) -> int:
    """End markers that reach the output: at idle ``max`` a task emits one and then waits forever
    for the partition it came from (it is empty again); otherwise every marker goes out."""
    if spec.kind != "passthrough" and spec.idle == "max":
        return 1 if spec.output_partitions(tasks) == 1 else tasks
    return partitions_total


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
        fields = usage_fields(system.pid, system.cpu_at_ready_s)
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
