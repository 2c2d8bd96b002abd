"""The Markdown report and the PNG plots, made from a results dict (``results.json``).

Plots (matplotlib, Agg backend — no display needed):

* ``latency-disorder-<workload>.png`` — one point per system/setting: p99 end-to-end latency
  against the share of records out of order (both axes symlog, so 0 shows);
* ``throughput.png`` — records/s per system draining the same backlog;
* ``latency-cdf.png`` — the latency CDF of every system on each workload.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker

from bench.systems import LZ4_HC

COLOURS = {
    "passthrough": "#7f7f7f",
    "rdkafka-copy": "#8c564b",
    "timesync": "#1f77b4",
    "kafka-streams": "#d62728",
    "optimum": "#2ca02c",
}
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

    written.append(throughput_plot(results["throughput"], out_dir / "throughput.png"))
    if results.get("curves"):
        written += curve_plots(results["curves"], out_dir)

    n = len(results["workloads"])
    if not n:  # --no-live
        return written
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


def throughput_plot(shapes: list[dict[str, Any]], path: Path) -> Path:
    """records/s per system, one panel per record shape, the ceiling as a dashed line."""
    rows = max(len(tp["runs"]) for tp in shapes)
    fig, axes = plt.subplots(
        1, len(shapes), figsize=(7 * len(shapes), 0.45 * max(4, rows) + 1.5), squeeze=False
    )
    for ax, tp in zip(axes.flat, shapes, strict=True):
        runs = [r for r in tp["runs"] if r["records_per_s"]]
        ax.barh(
            [r["system"]["label"] for r in runs],
            [r["records_per_s"] for r in runs],
            color=[_colour(r["system"]) for r in runs],
        )
        for y, r in enumerate(runs):
            ratio = f" ({r['vs_ceiling']:.2f}×)" if r.get("vs_ceiling") else ""
            ax.text(r["records_per_s"], y, f" {r['records_per_s']:,}{ratio}", va="center", fontsize=7)
        top = tp["ceiling"]["records_per_s"]
        ax.set_xlim(0, 1.3 * max([top, *(r["records_per_s"] for r in runs)]))  # room for the labels
        ax.axvline(top, color="black", linestyle="--", linewidth=1)
        ax.text(top, 1.01, f"ceiling {top:,}", fontsize=7, ha="center", transform=ax.get_xaxis_transform())
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:,.0f}"))
        ax.invert_yaxis()
        ax.set_xlabel("records/s (steady, same backlog; × = ratio to the ceiling)")
        ax.set_title(
            f"{tp['shape']}: {tp['records']:,} records, {tp['value_bytes']:g} B values", fontsize=9, pad=14
        )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


CURVE_LABELS = {
    "records_per_s": "records/s",
    "cpu_us_per_record": "CPU µs / record",
    "peak_rss_mib": "peak RSS MiB",
}


def curve_plots(curves: dict[str, Any], out_dir: Path) -> list[Path]:
    """``curves-partitions.png`` and ``curves-record-size.png``: records/s, CPU per record and
    peak RSS of each curve system against the axis (log x)."""
    written = []
    runs = curves["runs"]
    for axis, fixed, held, name, xlabel in (
        ("partitions", "value_bytes", curves["value_bytes"][0], "curves-partitions.png", "input partitions"),
        ("value_bytes", "partitions", curves["partitions"][0], "curves-record-size.png", "value bytes"),
    ):
        fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
        for label in dict.fromkeys(r["system"]["label"] for r in runs):
            line = sorted(
                (r for r in runs if r["system"]["label"] == label and r[fixed] == held), key=lambda r: r[axis]
            )
            if not line:
                continue
            system = line[0]["system"]
            for ax, metric in zip(axes, CURVE_LABELS, strict=True):
                ax.plot(
                    [r[axis] for r in line],
                    [r[metric] for r in line],
                    marker="o",
                    color=_colour(system),
                    label=label,
                )
        ticks = sorted({r[axis] for r in runs if r[fixed] == held})
        for ax, metric in zip(axes, CURVE_LABELS, strict=True):
            ax.set_xscale("log")
            ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:,.6g}"))
            ax.set_xlabel(xlabel)
            ax.set_title(CURVE_LABELS[metric])
            ax.grid(True, which="both", alpha=0.3)
            ax.set_ylim(bottom=0)
        axes[0].legend(fontsize=8)
        fixed_text = f"{held:,} B values" if fixed == "value_bytes" else f"{held} input partitions"
        fig.suptitle(f"Cost against {xlabel} ({fixed_text}, backlog drained as fast as possible)")
        fig.tight_layout()
        path = out_dir / name
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
        *(
            [
                "> `--quick`: small backlogs on whatever else the machine runs — these figures show that "
                "every part works, not how fast it is.",
                "",
            ]
            if results["quick"]
            else []
        ),
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
        f"| timesync vs Kafka Streams (idle 0; `{t.get('kafka_streams_reference')}`) | single task "
        f"{_fmt(t['timesync_vs_kafka_streams'])}×, "
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

    lines += ["", "## Throughput", ""]
    for tp in results["throughput"]:
        lines += throughput_section(tp)
    if results.get("curves"):
        lines += ["", "## Cost curves", "", *curves_section(results["curves"])]

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
    if results.get("spark_jobs"):
        lines += ["", "## Spark jobs: records/s", "", *spark_jobs_section(results["spark_jobs"])]
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


def spark_jobs_section(sj: dict[str, Any]) -> list[str]:
    """Each Spark job's own rate over the ordered topic, start-up apart (bench.spark_rates)."""
    lines = [
        f"{sj['workload']}; {sj['records']:,} records, micro-batches of "
        f"{sj['records_per_micro_batch']:,}. Records/s = the records of every batch after the first "
        "/ those batches' execution time; the first batch (plan, code generation, state store, "
        "Python workers) is shown apart.",
        "",
        "| job | records/s after the first batch | first batch s | wall s (start to end) | micro-batches |",
        "|---|---:|---:|---:|---:|",
    ]
    for job, r in sj["jobs"].items():
        lines.append(
            f"| {job} | {_fmt(r['records_per_s'])} | {_fmt(r['first_batch_s'])} | {_fmt(r['wall_s'])} "
            f"| {_fmt(r['micro_batches'])} |"
        )
    return lines


def throughput_section(tp: dict[str, Any]) -> list[str]:
    """One record shape: the ceiling, then one row per system."""
    top = tp["ceiling"]
    prod, cons = top["producer"], top["consumer"]
    lines = [
        f"### {tp['shape']}: {tp['workload']}",
        "",
        f"{tp['records']:,} records ({tp['value_bytes']:g} B values on average) on {tp['topics']} topics × "
        f"{tp['partitions_per_topic']} partitions. records/s: while the output grew from 25 % to 75 % of "
        "the backlog (steady state); overall: first to last output record; CPU of the merging process "
        "between its first and last output record. Kafka Streams first drained "
        f"{tp.get('warmup_records', 0):,} records of other topics in the same JVM (warm-up)."
        + (
            f" Systems drained {tp['rounds']} times show the round with the median rate, the others' "
            "rates in brackets."
            if tp.get("rounds", 1) > 1
            else ""
        ),
        "",
        f"**Ceiling: {top['records_per_s']:,} records/s** (bound by the {top['bound_by']}): Kafka's "
        f"`ProducerPerformance` {prod['records_per_s']:,} records/s ({prod['records']:,} records of "
        f"{prod['record_bytes']} B, {prod['payload']}, "
        + ", ".join(f"{k}={v}" for k, v in prod["producer_props"].items())
        + f", 1 partition); `ConsumerPerformance` {cons['records_per_s']:,} records/s "
        f"({cons['records']:,} records of this backlog).",
        "",
        "| system | records/s | × ceiling | overall records/s | µs CPU / record | peak RSS MiB | start s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in tp["runs"]:
        lines.append(
            f"| {r['system']['label']} | {_fmt(r['records_per_s'])}{_other_rounds(r)} | "
            f"{_fmt(r.get('vs_ceiling'))} | {_fmt(r['records_per_s_overall'])} | "
            f"{_fmt(r['cpu_us_per_record'])} | {_fmt(r['peak_rss_mib'])} | {_fmt(r['start_s'])} |"
        )
    profiles = [r["system"]["profile"] for r in tp["runs"] if r["system"].get("profile")]
    if profiles:
        lines += ["", "Kafka Streams profiles: " + "; ".join(_profile_text(pr) for pr in profiles) + "."]
    return [*lines, ""]


def _profile_text(profile: dict[str, Any]) -> str:
    extra = ", ".join(f"`{k}={v}`" for k, v in profile["config"].items())
    return f"`{profile['name']}`: `commit.interval.ms={profile['commit_interval_ms']}`" + (
        f", {extra}" if extra else ""
    )


GROWTH_WORDS = {
    "flat": "stays flat",
    "linear": "grows linearly",
    "sub-linear": "grows sub-linearly",
    "super-linear": "grows faster than linearly",
    "falls": "falls",
    None: "could not be fitted",
}


def curves_section(curves: dict[str, Any]) -> list[str]:
    """The points as a table, then one sentence per system and axis on how each metric grows."""
    lines = [
        f"Input partitions {', '.join(map(str, curves['partitions']))} (at {curves['value_bytes'][0]:,} B "
        f"values) and value sizes {', '.join(f'{b:,} B' for b in curves['value_bytes'])} (at "
        f"{curves['partitions'][0]} partitions); keyless records, a backlog drained as fast as possible. "
        "Growth is the slope on log–log axes over the whole range (0 flat, 1 linear).",
        "",
        "| system | partitions | value B | records | records/s | µs CPU / record | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in curves["runs"]:
        lines.append(
            f"| {r['system']['label']} | {r['partitions']} | {r['value_bytes']:,} | {r['records']:,} | "
            f"{_fmt(r['records_per_s'])} | {_fmt(r['cpu_us_per_record'])} | {_fmt(r['peak_rss_mib'])} |"
        )
    lines.append("")
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for g in curves["growth"]:
        by.setdefault((g["system"], g["axis"]), []).append(g)
    axis_words = {"partitions": "input partitions", "value_bytes": "value size"}
    for (system, axis), items in by.items():
        parts = [
            f"{CURVE_LABELS[g['metric']]} {GROWTH_WORDS[g['grows']]} (slope {_fmt(g['slope'])}: "
            f"{_fmt(g['from'][1])} → {_fmt(g['to'][1])})"
            for g in items
        ]
        lines.append(f"- **{system}**, against {axis_words[axis]}: " + "; ".join(parts) + ".")
    return lines


def _other_rounds(run: dict[str, Any]) -> str:
    """The rates of the rounds not shown, for a system drained more than once."""
    rates = [r for r in run.get("records_per_s_runs") or [] if r is not None]
    if len(rates) < 2:
        return ""
    others = list(rates)
    others.remove(run["records_per_s"])
    return " (" + ", ".join(_fmt(r) for r in others) + ")"


# --------------------------------------------------------------------------------------------
# The README blocks: figures in README.md, bench/README.md and deploy/README.md come from one
# results.json, never retyped. A block is the text between ``<!-- bench:NAME -->`` and
# ``<!-- /bench:NAME -->``; ``python -m bench readme`` rewrites every block it knows.

BLOCK = re.compile(r"(<!-- bench:(?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- /bench:(?P=name) -->)", re.S)
READMES = ("README.md", "bench/README.md", "deploy/README.md")
FIGURES = ("throughput.png", "curves-partitions.png", "curves-record-size.png")
#: The run itself, kept beside the figures so that every README figure can be checked against it.
RUN_FILES = ("results.json", "report.md")
FIGURE_DIR = "bench/figures"


def rewrite_blocks(text: str, blocks: dict[str, str]) -> str:
    """``text`` with the body of every marked block named in ``blocks`` replaced; other text and
    blocks of other names are left as they are."""

    def body(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in blocks:
            return match.group(0)
        return match.group(1) + blocks[name].rstrip("\n") + "\n" + match.group(4)

    return BLOCK.sub(body, text)


def block_names(text: str) -> list[str]:
    return [m.group("name") for m in BLOCK.finditer(text)]


def _run(tp: dict[str, Any], label: str) -> dict[str, Any] | None:
    return next((r for r in tp["runs"] if r["system"]["label"] == label), None)


def _provenance(results: dict[str, Any]) -> str:
    m = results["machine"]
    load = m["load_average_at_start"][0]
    end = (results.get("load_average_at_end") or [None])[0]
    return (
        f"Generated from `results.json` of run {results['run_id']} ({results['started_at']}, "
        f"{'quick — not a measurement' if results['quick'] else 'full'}, seed {results['seed']}) by "
        f"`python -m bench readme`: {m['cpus']} CPUs ({m['cpu']}), one local broker on the same machine, "
        f"load average {load:.2f} at start"
        + (f" and {end:.2f} at the end" if end is not None else "")
        + ". "
        + _noise(results)
    )


def round_spread(results: dict[str, Any]) -> tuple[float, str] | None:
    """The widest spread of a repeated throughput system's rounds in this run: (max − min) ÷
    median, and which system; ``None`` when no system ran more than one round."""
    widest: tuple[float, str] | None = None
    for tp in results.get("throughput") or []:
        for run in tp["runs"]:
            rounds = sorted(run.get("records_per_s_runs") or [])
            if len(rounds) < 2 or not rounds[len(rounds) // 2]:
                continue
            spread = (rounds[-1] - rounds[0]) / rounds[len(rounds) // 2]
            if widest is None or spread > widest[0]:
                widest = (spread, f"{run['system']['label']}, {tp['shape']}")
    return widest


def _noise(results: dict[str, Any]) -> str:
    widest = round_spread(results)
    if widest is None:
        return "How noisy: not measured in this run (one round per system): read the ratios within one run."
    spread, where = widest
    return (
        f"How noisy: the repeated throughput rounds of one system spread by up to {spread:.0%} of "
        f"their median ({where}); read the ratios within one run."
    )


def _headline_rows(tp: dict[str, Any]) -> list[str]:
    wanted = [
        "timesync idle 0",
        "timesync/partition idle 0",
        "passthrough",
        "rdkafka-copy",
        *(f"kafka-streams idle 0 {n}" for n in ("defaults", "tuned", "tuned commit 100 ms")),
    ]
    rows = []
    for label in wanted:
        r = _run(tp, label)
        if r is not None:
            rows.append(
                f"| {tp['shape']} | {label} | {_fmt(r['records_per_s'])} | {_fmt(r.get('vs_ceiling'))} | "
                f"{_fmt(r['cpu_us_per_record'])} |"
            )
    top = tp["ceiling"]
    rows.append(
        f"| {tp['shape']} | ceiling: Kafka's own producer / consumer alone | "
        f"{_fmt(top['producer']['records_per_s'])} / {_fmt(top['consumer']['records_per_s'])} | 1 | – |"
    )
    return rows


def _headline_table(results: dict[str, Any]) -> list[str]:
    lines = [
        "| records | system | records/s | × ceiling | µs CPU / record |",
        "|---|---|---:|---:|---:|",
    ]
    for tp in results["throughput"]:
        lines += _headline_rows(tp)
    return lines


def _added_p99(results: dict[str, Any]) -> str:
    st = results["goals"]["steady_idle_0_added_p99_ms"]
    if st["added_p99_ms"] is None:
        return "not measured"
    rounds = len((st.get("p99_rounds_ms") or {}).get("passthrough", [])) or 1
    return (
        f"{st['added_p99_ms']:+d} ms (timesync idle 0 p99 {st['timesync_idle_0_p99_ms']} ms vs the "
        f"passthrough's {st['passthrough_p99_ms']} ms, medians of {rounds} round(s) on `steady`)"
    )


def readme_blocks(results: dict[str, Any]) -> dict[str, str]:
    """Every README block, from one results dict."""
    summary = [
        _provenance(results),
        "",
        *_headline_table(results),
        "",
        "Steady traffic, `max.task.idle.ms=0`: p99 latency added over the raw passthrough "
        + _added_p99(results)
        + ". Details, cost curves and every workload: [bench/README.md](bench/README.md).",
    ]
    # The report's "## Heading" sections by heading (the first part is the title and run line).
    parts = markdown(results).split("\n## ")[1:]
    sections = {part.split("\n", 1)[0]: part.split("\n", 1)[1] for part in parts}
    goals_table = sections.get("Goals", "").strip()
    results_block = [
        _provenance(results),
        "",
        "### Goals",
        "",
        goals_table,
        "",
        "### Throughput and the ceiling",
        "",
        *_headline_table(results),
        "",
        f"![throughput]({Path(FIGURE_DIR).name}/throughput.png)",
    ]
    if results.get("curves"):
        results_block += [
            "",
            "### Cost curves",
            "",
            *curves_section(results["curves"]),
            "",
            f"![curves against partitions]({Path(FIGURE_DIR).name}/curves-partitions.png)",
            f"![curves against record size]({Path(FIGURE_DIR).name}/curves-record-size.png)",
        ]
    if results.get("spark_jobs"):
        results_block += ["", "### The Spark jobs behind it", "", *spark_jobs_section(results["spark_jobs"])]
    sizing = _sizing(results)
    return {"summary": "\n".join(summary), "results": "\n".join(results_block), "sizing": "\n".join(sizing)}


def _sizing(results: dict[str, Any]) -> list[str]:
    """The deploy sizing figures: CPU per record and records/s per core per shape, memory, latency."""
    lines = [_provenance(results), ""]
    for tp in results["throughput"]:
        ts, pt, ks = (
            _run(tp, "timesync idle 0"),
            _run(tp, "passthrough"),
            _run(tp, "kafka-streams idle 0 tuned"),
        )
        if ts is None or not ts["cpu_us_per_record"]:
            continue
        per_core = round(1e6 / ts["cpu_us_per_record"], -3)
        lines.append(
            f"- **CPU, {tp['shape']} records** ({tp['workload'].split(',')[0]}): timesync idle 0 uses "
            f"{_fmt(ts['cpu_us_per_record'])} µs of CPU per record — about "
            f"**{per_core:,.0f} records/s per core** — and drained the backlog at "
            f"{_fmt(ts['records_per_s'])} records/s ({_fmt(ts.get('vs_ceiling'))}× the broker's ceiling here)"
            + (f"; the raw aiokafka passthrough {_fmt(pt['cpu_us_per_record'])} µs" if pt else "")
            + (f"; Kafka Streams tuned for throughput {_fmt(ks['cpu_us_per_record'])} µs" if ks else "")
            + f"; peak RSS {_fmt(ts['peak_rss_mib'])} MiB."
        )
    if results.get("curves"):
        for g in results["curves"]["growth"]:
            if g["system"] == "timesync idle 0" and g["metric"] in ("cpu_us_per_record", "peak_rss_mib"):
                axis = "input partitions" if g["axis"] == "partitions" else "value size"
                lines.append(
                    f"- {CURVE_LABELS[g['metric']]} against {axis}: {GROWTH_WORDS[g['grows']]} "
                    f"({_fmt(g['from'][1])} at {g['from'][0]:,} → {_fmt(g['to'][1])} at {g['to'][0]:,})."
                )
    lines.append(
        f"- **Latency** added by the merge on steady traffic at `max.task.idle.ms=0`: {_added_p99(results)}."
    )
    sj = results.get("spark_jobs")
    if sj:
        rates = ", ".join(
            f"`{job}` {_fmt(r['records_per_s'])}" for job, r in sj["jobs"].items() if r["records_per_s"]
        )
        lines.append(
            f"- **The Spark job, not the sidecar, bounds the pipeline**: in `local[2]` with "
            f"{sj['keys']:,} keys the jobs process {rates} records/s once started (start-up apart); "
            "size the executors for the job, the sidecar for its CPU per record above."
        )
    return lines


PENDING = (
    "No full run of this benchmark version is recorded yet. Run `make bench` on a quiet machine "
    "(load average < 0.5, nothing else running); it rewrites this block from its `results.json`."
)


def update_readmes(results: dict[str, Any] | None, repo: Path, results_dir: Path | None = None) -> list[Path]:
    """Rewrite the blocks of every README under ``repo`` (``results=None``: the pending text) and
    copy the figures the blocks show, with the run's ``results.json`` and ``report.md``, into
    ``bench/figures/``. Returns the files changed."""
    blocks = (
        readme_blocks(results)
        if results is not None
        else dict.fromkeys(("summary", "results", "sizing"), PENDING)
    )
    changed = []
    for name in READMES:
        path = repo / name
        text = path.read_text()
        new = rewrite_blocks(text, blocks)
        if new != text:
            path.write_text(new)
            changed.append(path)
    if results is not None and results_dir is not None:
        target = repo / FIGURE_DIR
        target.mkdir(parents=True, exist_ok=True)
        for figure in (*FIGURES, *RUN_FILES):
            source = results_dir / figure
            if source.is_file():
                (target / figure).write_bytes(source.read_bytes())
                changed.append(target / figure)
    return changed
