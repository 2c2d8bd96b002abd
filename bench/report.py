"""The Markdown report and the PNG plots, made from a results dict (``results.json``).

Plots (matplotlib, Agg backend — no display needed):

* ``latency-disorder-<workload>.png`` — one point per system/setting: p99 end-to-end latency
  against the share of records out of order (both axes symlog, so 0 shows);
* ``throughput.png`` — records/s per system draining the same backlog;
* ``latency-cdf.png`` — the latency CDF of every system on each workload.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.systems import LZ4_HC

COLOURS = {"passthrough": "#7f7f7f", "timesync": "#1f77b4", "kafka-streams": "#d62728", "optimum": "#2ca02c"}
MARKERS = {"-1": "v", "0": "o", "100": "s", "1000": "D", "max": "^", None: "*"}


def _colour(system: dict[str, Any]) -> str:
    if system["kind"] == "timesync" and system.get("grouping") == "partition":
        return "#17becf"
    return COLOURS.get(system["kind"], "black")


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.3g}{unit}" if abs(value) < 100 else f"{value:,.0f}{unit}"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value}{unit}"


def plots(results: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write every plot; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for w in results["workloads"]:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in w["runs"]:
            lat, dis = r["latency"]["p99_ms"], r["disorder"]["late_share"]
            if lat is None:
                continue
            system = r["system"]
            ax.scatter(
                [dis * 100],
                [lat],
                color=_colour(system),
                marker=MARKERS.get(system["idle"], "o"),
                s=60,
                label=system["label"],
                edgecolors="black",
                linewidths=0.4,
            )
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set_yscale("symlog", linthresh=10)
        ax.set_xlabel("records out of event-time order (%)")
        ax.set_ylabel("p99 end-to-end latency (ms)")
        ax.set_title(f"{w['name']}: latency vs disorder ({w['records']:,} records)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best", ncol=2)
        fig.tight_layout()
        path = out_dir / f"latency-disorder-{w['name']}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    runs = [r for r in results["throughput"]["runs"] if r["records_per_s"]]
    fig, ax = plt.subplots(figsize=(8, 0.45 * max(4, len(runs)) + 1))
    labels = [r["system"]["label"] for r in runs]
    ax.barh(labels, [r["records_per_s"] for r in runs], color=[_colour(r["system"]) for r in runs])
    for y, r in enumerate(runs):
        ax.text(r["records_per_s"], y, f" {r['records_per_s']:,}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("records/s (draining the same backlog)")
    tp = results["throughput"]
    ax.set_title(f"Throughput — {tp['records']:,} records of {tp['value_bytes']} B")
    fig.tight_layout()
    path = out_dir / "throughput.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    n = len(results["workloads"])
    cols = min(3, n) or 1
    rows = (n + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, w in zip(axes.flat, results["workloads"], strict=False):
        for r in w["runs"]:
            cdf = r["latency"]["cdf"]
            if not cdf:
                continue
            ax.plot(
                [max(1, v) for _, v in cdf],
                [p for p, _ in cdf],
                color=_colour(r["system"]),
                marker=MARKERS.get(r["system"]["idle"], "o"),
                markersize=3,
                linewidth=1,
                label=r["system"]["label"],
            )
        ax.set_xscale("log")
        ax.set_title(w["name"])
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("percentile")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=7)
    fig.suptitle("End-to-end latency CDF (produce → visible in the output)")
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    path = out_dir / "latency-cdf.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


def markdown(results: dict[str, Any], plot_paths: list[Path] | None = None) -> str:
    """The report: goals, throughput, one table per workload, Spark."""
    m, v = results["machine"], results["versions"]
    lines = [
        f"# timesync benchmark — run {results['run_id']} ({'quick' if results['quick'] else 'full'})",
        "",
        f"{results['started_at']} · {results['duration_s']:.0f} s · seed {results['seed']} · "
        f"{m['cpus']} CPUs ({m['cpu']}), load average at start {m['load_average_at_start'][0]:.1f} · "
        f"Python {v['python']}, aiokafka {v['aiokafka']}, Kafka broker {v['kafka_broker']}, "
        f"Kafka Streams {v['kafka_streams']}, pyspark {v['pyspark']}, {v['java']}",
        "",
        "## Goals",
        "",
        "| goal | measured | met |",
        "|---|---|:-:|",
    ]
    g = results["goals"]
    t = g["throughput"]
    yes = {True: "yes", False: "**no**", None: "–"}
    lines.append(
        f"| timesync throughput ≥ {t['target_vs_passthrough']}× passthrough | "
        f"{_fmt(t['timesync_vs_passthrough'])}× ({_fmt(t['timesync_idle_0_records_per_s'])} vs "
        f"{_fmt(t['passthrough_records_per_s'])} records/s) | {yes[t['met']]} |"
    )
    if t.get("timesync_lz4_hc_vs_passthrough") is not None:
        lines.append(
            f"| … at the passthrough's compression effort (`compression.lz4.level={LZ4_HC}`, LZ4 HC) | "
            f"{_fmt(t['timesync_lz4_hc_vs_passthrough'])}× "
            f"({_fmt(t['timesync_lz4_hc_idle_0_records_per_s'])} records/s) | – |"
        )
    lines.append(
        f"| timesync vs Kafka Streams (idle 0) | single task {_fmt(t['timesync_vs_kafka_streams'])}×, "
        f"task.grouping=partition {_fmt(t['timesync_partition_vs_kafka_streams'])}× "
        f"(Kafka Streams {_fmt(t['kafka_streams_idle_0_records_per_s'])} records/s) | – |"
    )
    im = g["idle_max_no_inversions_beyond_partitions"]
    detail = ", ".join(
        f"{name}: {d['inversions']:,} vs {d['held_by_single_partitions']:,}"
        for name, d in im["per_workload"].items()
    )
    lines.append(f"| idle max: no inversions beyond single partitions | {detail or '–'} | {yes[im['met']]} |")
    ks = g["same_order_as_kafka_streams_idle_0"]
    if "records_compared" in ks:
        lines.append(
            f"| pre-produced, idle 0: same order as Kafka Streams (up to ties) | "
            f"{ks['records_compared']:,} records, {ks['tie_runs_differing']} tie runs differ, "
            f"{ks['positions_differing']:,} positions differ only among equal timestamps | {yes[ks['met']]} |"
        )
    st = g["steady_idle_0_added_p99_ms"]
    lines.append(
        f"| steady, idle 0: p99 added over passthrough ≤ {st['target_ms']} ms | "
        f"{_fmt(st['added_p99_ms'], ' ms')} (p99 {_fmt(st.get('timesync_idle_0_p99_ms'))} vs "
        f"{_fmt(st.get('passthrough_p99_ms'))} ms, median of "
        f"{len((st.get('p99_rounds_ms') or {}).get('passthrough', [])) or 1} round(s)) | {yes[st['met']]} |"
    )
    sp = g["spark_fewer_drops_on_ordered_topic"]
    if sp["jobs"]:
        detail = ", ".join(
            f"{job}: raw {d['raw']:,}, ordered {d['ordered']:,}" for job, d in sp["jobs"].items()
        )
        lines.append(f"| Spark drops fewer late rows on the ordered topic | {detail} | {yes[sp['met']]} |")

    tp = results["throughput"]
    lines += [
        "",
        "## Throughput",
        "",
        f"{tp['records']:,} records of {tp['value_bytes']} B on {tp['topics']} topics × "
        f"{tp['partitions_per_topic']} partitions, written before each system starts. records/s: while "
        "the output grew from 25 % to 75 % of the backlog (steady state); overall: first to last output "
        "record. CPU seconds of the merging process between its first and last output record. "
        + (
            f"Systems drained {tp['rounds']} times show the round with the median rate, the others' "
            "rates in brackets."
            if tp.get("rounds", 1) > 1
            else ""
        ),
        "",
        "| system | records/s | overall records/s | CPU s | µs CPU / record | peak RSS MiB | start s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in tp["runs"]:
        lines.append(
            f"| {r['system']['label']} | {_fmt(r['records_per_s'])}{_other_rounds(r)} | "
            f"{_fmt(r['records_per_s_overall'])} | "
            f"{_fmt(r['cpu_s'])} | {_fmt(r['cpu_us_per_record'])} | {_fmt(r['peak_rss_mib'])} | "
            f"{_fmt(r['start_s'])} |"
        )

    for w in results["workloads"]:
        lines += [
            "",
            f"## {w['name']}",
            "",
            f"{w['description']}. {w['records']:,} records"
            + (f" ({w['backlog_records']:,} of them a backlog written first)" if w["backlog_records"] else "")
            + f" over {w['duration_s']} s; {w['topics']} topics × {w['partitions_per_topic']} partitions. "
            f"Inversions held by the partitions themselves (the full-knowledge merge): "
            f"{_fmt(w['runs'][-1]['reference_inversions'])}.",
            "",
            "| system | p50 ms | p95 ms | p99 ms | max ms | out of order | inversions "
            "| lateness p99 / max ms | enforced | CPU s | peak RSS MiB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in w["runs"]:
            lat, dis = r["latency"], r["disorder"]
            within = r.get("inversions_within_partitions")
            inv = _fmt(dis["inversions"]) + (
                f" ({_fmt(within)} within partitions)" if within is not None else ""
            )
            missing = f" **{r['missing']} missing**" if r["missing"] else ""
            p99 = _fmt(lat["p99_ms"])
            p99_runs = [v for v in r.get("latency_p99_runs_ms") or [] if v is not None]
            if len(p99_runs) > 1:  # the row is round 1; the goal takes the median over the rounds
                p99 += f" (median of {len(p99_runs)} rounds {_fmt(statistics.median_low(p99_runs))})"
            lines.append(
                f"| {r['system']['label']}{missing} | {_fmt(lat['p50_ms'])} | {_fmt(lat['p95_ms'])} | "
                f"{p99} | {_fmt(lat['max_ms'])} | {dis['late_share']:.2%} | {inv} | "
                f"{_fmt(dis['lateness_p99_ms'])} / {_fmt(dis['lateness_max_ms'])} | {_fmt(r['enforced'])} | "
                f"{_fmt(r['cpu_s'])} | {_fmt(r['peak_rss_mib'])} |"
            )

    spark = results.get("spark")
    if spark:
        lines += [
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
                    f"| {job} | {side} | {_fmt(r['rows_dropped'])} | {_fmt(r['results'])} | "
                    f"{_fmt(r['rows_in_results'])} / {_fmt(r['rows_expected'])} | {_fmt(lat['p50_ms'])} | "
                    f"{_fmt(lat['p99_ms'])} | {_fmt(lat['max_ms'])} |"
                )
    if plot_paths:
        lines += ["", "## Plots", ""]
        lines += [f"![{p.stem}]({p.name})" for p in plot_paths]
    lines += [
        "",
        "Kafka Streams orders only within a task (partition *i* of every input); across tasks there is "
        "no order, so its disorder is measured over the whole output as one consumer sees it, with the "
        "inversions inside its output partitions alongside. Its enforced-processing count is a "
        "DEBUG-level metric and is not collected (turning DEBUG on would slow it down).",
    ]
    return "\n".join(lines) + "\n"


def _other_rounds(run: dict[str, Any]) -> str:
    """The rates of the rounds not shown, for a system drained more than once."""
    rates = [r for r in run.get("records_per_s_runs") or [] if r is not None]
    if len(rates) < 2:
        return ""
    others = list(rates)
    others.remove(run["records_per_s"])
    return " (" + ", ".join(_fmt(r) for r in others) + ")"
