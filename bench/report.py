"""The Markdown report of a run (``report.md``), made from its results dict (``results.json``).

:func:`markdown` writes the goals (:mod:`bench.report_goals`), the throughput per record shape,
the cost curves, one table per workload and the Spark sections. The sections the README blocks
share are :mod:`bench.report_sections`'s; :func:`~bench.formatting.fmt` and the words for the
curves are :mod:`bench.formatting`'s.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench import idle_auto
from bench.formatting import fmt
from bench.report_goals import goals_section
from bench.report_sections import (
    curves_section,
    extractors_section,
    idle_auto_section,
    spark_jobs_section,
    throughput_section,
)

__all__ = ["extractors_section", "markdown"]

FOOTNOTE = (
    "Kafka Streams orders only within a task (partition *i* of every input); across tasks there is "
    "no order, so its disorder is measured over the whole output as one consumer sees it, with the "
    "inversions inside its output partitions alongside. Its enforced-processing count is a "
    "DEBUG-level metric and is not collected (turning DEBUG on would slow it down)."
)


def markdown(results: dict[str, Any], plot_paths: list[Path] | None = None) -> str:
    """The report: goals, throughput, one table per workload, Spark."""
    lines = [*_heading(results), *goals_section(results["goals"])]
    lines += ["", "## Throughput", ""]
    for tp in results["throughput"]:
        lines += throughput_section(tp)
    if results.get("curves"):
        lines += ["", "## Cost curves", "", *curves_section(results["curves"])]
    for w in results["workloads"]:
        lines += workload_section(w)
    if results.get("spark"):
        lines += spark_section(results["spark"])
    if results.get("spark_jobs"):
        lines += ["", "## Spark jobs: records/s", "", *spark_jobs_section(results["spark_jobs"])]
    auto = idle_auto.summary(results)
    if auto:
        lines += ["", "## max.task.idle.ms=auto against the fixed settings", "", *idle_auto_section(auto)]
    if results.get("extractors"):
        lines += ["", "## Timestamp extractors", "", *extractors_section(results["extractors"])]
    if plot_paths:
        lines += ["", "## Plots", ""]
        lines += [f"![{p.stem}]({p.name})" for p in plot_paths]
    lines += ["", FOOTNOTE]
    return "\n".join(lines) + "\n"


def _heading(results: dict[str, Any]) -> list[str]:
    """The title, the run line (when, how long, the machine, the versions), the --quick warning."""
    m, v = results["machine"], results["versions"]
    lines = [
        f"# timesync benchmark — run {results['run_id']} ({'quick' if results['quick'] else 'full'})",
        "",
        f"{results['started_at']} · {results['duration_s']:.0f} s · seed {results['seed']} · "
        f"{m['cpus']} CPUs ({m['cpu']}), load average at start {m['load_average_at_start'][0]:.1f} · "
        f"Python {v['python']}, aiokafka {v['aiokafka']}, Kafka broker {v['kafka_broker']}, "
        f"Kafka Streams {v['kafka_streams']}, pyspark {v['pyspark']}, {v['java']}",
        "",
    ]
    if results["quick"]:
        lines += [
            "> `--quick`: small backlogs on whatever else the machine runs — these figures show that "
            "every part works, not how fast it is.",
            "",
        ]
    return lines


def workload_section(w: dict[str, Any]) -> list[str]:
    """One live workload: what it is, then one row per system."""
    lines = [
        "",
        f"## {w['name']}",
        "",
        f"{w['description']}. {w['records']:,} records"
        + (f" ({w['backlog_records']:,} of them a backlog written first)" if w["backlog_records"] else "")
        + f" over {w['duration_s']} s; {w['topics']} topics × {w['partitions_per_topic']} partitions. "
        f"Inversions held by the partitions themselves (the full-knowledge merge): "
        f"{fmt(w['runs'][-1]['reference_inversions'])}.",
        "",
        "| system | p50 ms | p95 ms | p99 ms | max ms | out of order | inversions "
        "| lateness p99 / max ms | enforced | CPU s | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in w["runs"]:
        lat, dis = r["latency"], r["disorder"]
        within = r.get("inversions_within_partitions")
        inv = fmt(dis["inversions"]) + (f" ({fmt(within)} within partitions)" if within is not None else "")
        missing = f" **{r['missing']} missing**" if r["missing"] else ""
        p99 = fmt(lat["p99_ms"])
        p99_runs = [v for v in r.get("latency_p99_runs_ms") or [] if v is not None]
        if len(p99_runs) > 1:  # the row is round 1; the goal takes the median over the rounds
            p99 += f" (median of {len(p99_runs)} rounds {fmt(statistics.median_low(p99_runs))})"
        lines.append(
            f"| {r['system']['label']}{missing} | {fmt(lat['p50_ms'])} | {fmt(lat['p95_ms'])} | "
            f"{p99} | {fmt(lat['max_ms'])} | {dis['late_share']:.2%} | {inv} | "
            f"{fmt(dis['lateness_p99_ms'])} / {fmt(dis['lateness_max_ms'])} | {fmt(r['enforced'])} | "
            f"{fmt(r['cpu_s'])} | {fmt(r['peak_rss_mib'])} |"
        )
    return lines


def spark_section(spark: dict[str, Any]) -> list[str]:
    """The Spark part: each job on the raw inputs and on the ordered topic."""
    lines = [
        "",
        "## Spark: raw inputs vs the ordered topic",
        "",
        f"{spark['workload']}; {spark['records']:,} records over {spark['duration_s']} s; sidecar at "
        f"max.task.idle.ms={spark['sidecar_max_task_idle_ms']}; watermark delay "
        f"{spark['watermark_delay_ms']} ms on both sides; micro-batches of "
        f"{spark['records_per_micro_batch']} records. Final-result latency = arrival of the input "
        "that let the result out − the event time it closes (Spark's own processing time excluded).",
        "",
        "| job | reads | rows dropped as late | results | rows in results / expected "
        "| final-result p50 ms | p99 ms | max ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for job, sides in spark["jobs"].items():
        for side, r in sides.items():
            lat = r["final_result_latency"]
            lines.append(
                f"| {job} | {side} | {fmt(r['rows_dropped'])} | {fmt(r['results'])} | "
                f"{fmt(r['rows_in_results'])} / {fmt(r['rows_expected'])} | {fmt(lat['p50_ms'])} | "
                f"{fmt(lat['p99_ms'])} | {fmt(lat['max_ms'])} |"
            )
    return lines
