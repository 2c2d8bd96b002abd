"""The Markdown report of a run (``report.md``), made from its results dict (``results.json``).

:func:`markdown` writes the goals, the throughput per record shape, the cost curves, one table
per workload and the Spark sections; the section functions are shared with the README blocks
(:mod:`bench.readmes`), and so are :func:`fmt` and the words for the curves.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench import idle_auto
from bench.report_spark import spark_jobs_section
from bench.systems import LZ4_HC
from bench.table_format import fmt

#: What each cost-curve metric is called, in the tables and on the plots.
CURVE_LABELS = {
    "records_per_s": "records/s",
    "cpu_us_per_record": "CPU µs / record",
    "peak_rss_mib": "peak RSS MiB",
}


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
        f"{fmt(t['timesync_vs_passthrough'])}× ({fmt(t['timesync_idle_0_records_per_s'])} vs "
        f"{fmt(t['passthrough_records_per_s'])} records/s) | {yes[t['met']]} |"
    )
    if t.get("timesync_lz4_hc_vs_passthrough") is not None:
        lines.append(
            f"| … at the passthrough's compression effort (`compression.lz4.level={LZ4_HC}`, LZ4 HC) | "
            f"{fmt(t['timesync_lz4_hc_vs_passthrough'])}× "
            f"({fmt(t['timesync_lz4_hc_idle_0_records_per_s'])} records/s) | – |"
        )
    lines.append(
        f"| timesync vs Kafka Streams (idle 0; `{t.get('kafka_streams_reference')}`) | single task "
        f"{fmt(t['timesync_vs_kafka_streams'])}×, "
        f"task.grouping=partition {fmt(t['timesync_partition_vs_kafka_streams'])}× "
        f"(Kafka Streams {fmt(t['kafka_streams_idle_0_records_per_s'])} records/s) | – |"
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
        f"{fmt(st['added_p99_ms'], ' ms')} (p99 {fmt(st.get('timesync_idle_0_p99_ms'))} vs "
        f"{fmt(st.get('passthrough_p99_ms'))} ms, median of "
        f"{len((st.get('p99_rounds_ms') or {}).get('passthrough', [])) or 1} round(s)) | {yes[st['met']]} |"
    )
    sp = g["spark_fewer_drops_on_ordered_topic"]
    if sp["jobs"]:
        detail = ", ".join(
            f"{job}: raw {d['raw']:,}, ordered {d['ordered']:,}" for job, d in sp["jobs"].items()
        )
        lines.append(f"| Spark drops fewer late rows on the ordered topic | {detail} | {yes[sp['met']]} |")
    sr, sc = g.get("spark_suppress_rate_vs_aggregate"), g.get("spark_suppress_cpu_vs_aggregate")
    if sr and sr["ratio"] is not None:
        lines.append(
            f"| Spark suppress records/s ≥ {sr['target']}× aggregate's | {fmt(sr['ratio'])}× "
            f"({fmt(sr['suppress_records_per_s'])} vs {fmt(sr['aggregate_records_per_s'])} records/s) "
            f"| {yes[sr['met']]} |"
        )
    if sc and sc["ratio"] is not None:
        lines.append(
            f"| Spark suppress CPU/record ≤ {sc['target']}× aggregate's | {fmt(sc['ratio'])}× "
            f"({fmt(sc['suppress_cpu_us_per_record'])} vs "
            f"{fmt(sc['aggregate_cpu_us_per_record'])} µs/record) "
            f"| {yes[sc['met']]} |"
        )
    sk = g.get("spark_suppress_keys_remembered")
    if sk and sk["ratio"] is not None:
        lines.append(
            f"| Spark suppress with {fmt(sk['keys_remembered'])} keys remembered ≥ {sk['target']}× its rate "
            f"over the active keys alone | {fmt(sk['ratio'])}× ({fmt(sk['records_per_s'])} vs "
            f"{fmt(sk['active_keys_only_records_per_s'])} records/s) | {yes[sk['met']]} |"
        )
    lines += join_goal_lines(g, yes)

    ia = g.get("idle_auto_not_beaten_by_a_fixed_setting")
    if ia and ia["per_workload"]:
        detail = ", ".join(
            f"{name}: " + (", ".join(f"`{b}`" for b in beaten) if beaten else "none")
            for name, beaten in ia["per_workload"].items()
        )
        lines.append(
            f"| idle `auto`: no fixed setting has both lower added p99 and fewer records out of order "
            f"| beaten by — {detail} | {yes[ia['met']]} |"
        )
    ea = g.get("extractor_avro_over_record")
    if ea and ea["added_us_per_record"] is not None:
        lines.append(
            f"| `timestamp.extractor=avro:` adds ≤ {ea['target_us_per_record']} µs/record over `record` | "
            f"{ea['added_us_per_record']:+.2f} µs/record | {yes[ea['met']]} |"
        )
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
            f"{fmt(w['runs'][-1]['reference_inversions'])}.",
            "",
            "| system | p50 ms | p95 ms | p99 ms | max ms | out of order | inversions "
            "| lateness p99 / max ms | enforced | CPU s | peak RSS MiB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in w["runs"]:
            lat, dis = r["latency"], r["disorder"]
            within = r.get("inversions_within_partitions")
            inv = fmt(dis["inversions"]) + (
                f" ({fmt(within)} within partitions)" if within is not None else ""
            )
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
                    f"| {job} | {side} | {fmt(r['rows_dropped'])} | {fmt(r['results'])} | "
                    f"{fmt(r['rows_in_results'])} / {fmt(r['rows_expected'])} | {fmt(lat['p50_ms'])} | "
                    f"{fmt(lat['p99_ms'])} | {fmt(lat['max_ms'])} |"
                )
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
    lines += [
        "",
        "Kafka Streams orders only within a task (partition *i* of every input); across tasks there is "
        "no order, so its disorder is measured over the whole output as one consumer sees it, with the "
        "inversions inside its output partitions alongside. Its enforced-processing count is a "
        "DEBUG-level metric and is not collected (turning DEBUG on would slow it down).",
    ]
    return "\n".join(lines) + "\n"


def join_goal_lines(g: dict[str, Any], yes: dict[bool | None, str]) -> list[str]:
    """The goal table's rows for ``join`` (bench.goals.join_goals), those with figures."""
    lines = []
    jr, jk = g.get("spark_join_rate_vs_aggregate"), g.get("spark_join_keys_remembered")
    if jr and jr["ratio"] is not None:
        lines.append(
            f"| Spark join records/s ≥ {jr['target']}× aggregate's | {fmt(jr['ratio'])}× "
            f"({fmt(jr['join_records_per_s'])} vs {fmt(jr['aggregate_records_per_s'])} records/s) "
            f"| {yes[jr['met']]} |"
        )
    if jk and jk["ratio"] is not None:
        lines.append(
            f"| Spark join with {fmt(jk['keys_remembered'])} keys remembered ≥ {jk['target']}× its rate over "
            f"the active keys alone, ≤ {jk['state_rows_target']}× the state rows per batch | "
            f"{fmt(jk['ratio'])}× ({fmt(jk['records_per_s'])} vs {fmt(jk['active_keys_only_records_per_s'])} "
            f"records/s); rows {fmt(jk['state_rows_ratio'])}× ({fmt(jk['state_rows_updated_median'])} vs "
            f"{fmt(jk['active_keys_only_state_rows_updated_median'])}) | {yes[jk['met']]} |"
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
            f"| {r['system']['label']} | {fmt(r['records_per_s'])}{_other_rounds(r)} | "
            f"{fmt(r.get('vs_ceiling'))} | {fmt(r['records_per_s_overall'])} | "
            f"{fmt(r['cpu_us_per_record'])} | {fmt(r['peak_rss_mib'])} | {fmt(r['start_s'])} |"
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
            f"{fmt(r['records_per_s'])} | {fmt(r['cpu_us_per_record'])} | {fmt(r['peak_rss_mib'])} |"
        )
    lines.append("")
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for g in curves["growth"]:
        by.setdefault((g["system"], g["axis"]), []).append(g)
    axis_words = {"partitions": "input partitions", "value_bytes": "value size"}
    for (system, axis), items in by.items():
        parts = [
            f"{CURVE_LABELS[g['metric']]} {GROWTH_WORDS[g['grows']]} (slope {fmt(g['slope'])}: "
            f"{fmt(g['from'][1])} → {fmt(g['to'][1])})"
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
    return " (" + ", ".join(fmt(r) for r in others) + ")"


def extractors_section(results: dict[str, Any]) -> list[str]:
    """What each ``timestamp.extractor`` costs per record (bench.extractors), from the ``extractors``
    part of results.json."""
    lines = [
        f"`timestamp.extractor` on the core's path (`extract_all` over {results['records']:,} records, "
        f"schemas cached), best of {results['repeats']} passes, CPU by `time.process_time`.",
        "",
        "| `timestamp.extractor` | value bytes | CPU µs/record | records/s | over `record` µs/record |",
        "|---|---:|---:|---:|---:|",
    ]
    base = results["extractors"]["record"]["cpu_us_per_record"]
    for spec, r in results["extractors"].items():
        over = "–" if spec == "record" else f"{r['cpu_us_per_record'] - base:+.2f}"
        rate = f"{r['records_per_s']:,}" if r["records_per_s"] else "–"
        lines.append(f"| `{spec}` | {r['value_bytes']:,} | {r['cpu_us_per_record']:.3f} | {rate} | {over} |")
    lines += [
        "",
        f"`avro:` adds {results['avro_added_us_per_record']:.2f} µs/record over `record` "
        f"(target ≤ {results['target_avro_added_us_per_record']}: "
        f"{'met' if results['met'] else '**not met**'}).",
    ]
    return lines


def idle_auto_section(auto: dict[str, dict[str, Any]]) -> list[str]:
    """Per live workload, ``auto`` beside every fixed timesync setting (bench.idle_auto): added
    p99 over the passthrough and records out of order, and whether a fixed setting beats it on
    both."""
    lines = [
        "Added p99 = the run's p99 end-to-end latency − the passthrough's on the same workload; out "
        "of order = records emitted below the running maximum of event time. A fixed setting beats "
        "`auto` when it is lower on both (plot: `idle-auto.png`).",
    ]
    for name, v in auto.items():
        a = v["auto"]
        verdict = (
            "no fixed setting beats `auto` on both axes"
            if not v["beaten_by"]
            else "beaten on both axes by " + ", ".join(f"`{b}`" for b in v["beaten_by"])
        )
        lines += [
            "",
            f"**{name}**: {verdict}.",
            "",
            "| setting | added p99 ms | records out of order |",
            "|---|---:|---:|",
            f"| **auto** | {fmt(a['added_p99_ms'])} | {fmt(a['late_records'])} |",
        ]
        for label, p in v["fixed"].items():
            mark = " (beats auto)" if label in v["beaten_by"] else ""
            lines.append(f"| {p['idle']}{mark} | {fmt(p['added_p99_ms'])} | {fmt(p['late_records'])} |")
    return lines
