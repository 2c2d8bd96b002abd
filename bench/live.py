"""Phase 2, live: every system on every workload, the records written at their arrival times.

Per workload and system: fresh topics, the system started, the workload written at its arrival
times (plus a backlog first for ``lagging``), then end markers. Latency is LogAppendTime of the
output record − the moment its input was handed to the producer (or the moment the system became
ready, for records written before). Disorder is measured over the output in the order one
consumer of the topic sees it. :func:`optimum` adds the offline optimum to each workload's runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np

from bench import analysis, collect, scenarios
from bench.analysis import Inputs, Output
from bench.plan import Plan
from bench.progress import console, track
from bench.scenarios import Scenario
from bench.systems import SystemSpec, running, usage, usage_fields
from testkit.workloads import Event


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


async def live_run(
    bootstrap: str, tag: str, p: Plan, name: str, spec: SystemSpec, log_dir: Path, round_no: int = 1
) -> tuple[dict[str, Any], Scenario, Inputs]:
    """One system on one workload: the backlog, then the live records at their arrival times and
    the end markers; the output read back and measured against the inputs."""
    round_suffix = f"-r{round_no}" if round_no > 1 else ""
    prefix = f"bench-{tag}-{name}-{spec.slug}{round_suffix}"
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
    run_id = f"{tag}-{name}-{spec.slug}{round_suffix}"
    warmup = _warmup(scenario, p)
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
        fields = usage_fields(system.pid, cpu_at_start)
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
        result["sidecar_status"] = _sidecar_totals(status)
    return result, scenario, inputs


def _warmup(scenario: Scenario, p: Plan) -> list[Event]:
    """Records written before the measured ones, to warm the system up (none after a backlog)."""
    if p.sizes.warmup_s <= 0 or scenario.backlog:
        return []
    return collect.warmup_events(
        scenario.topics, scenario.partitions, scenario.first_ts, p.sizes.warmup_s, p.sizes.rate_per_s
    )


def _sidecar_totals(status: dict[str, Any]) -> dict[str, int]:
    """Records out, enforced and late, summed over the tasks of a sidecar's ``/status``."""
    tasks = status.get("tasks", {}).values()
    return {
        "records_out": sum(int(t.get("records_out", 0)) for t in tasks),
        "enforced": sum(int(t.get("enforced", 0)) for t in tasks),
        "late": sum(int(t.get("late", 0)) for t in tasks),
    }


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
