"""The report's sections that the README blocks share (:mod:`bench.readmes`): throughput per record
shape, the cost curves, the Spark jobs' rates and where their time went, the timestamp extractors,
and ``max.task.idle.ms=auto`` against the fixed settings. Each turns one part of ``results.json``
into Markdown lines.
"""

from __future__ import annotations

from typing import Any

from bench.formatting import CURVE_LABELS, GROWTH_WORDS, fmt


def spark_jobs_section(sj: dict[str, Any]) -> list[str]:
    """Each Spark job's own rate over the ordered topic, start-up apart (bench.spark_rates)."""
    lines = [
        f"{sj['workload']}; {sj['records']:,} records, micro-batches of "
        f"{sj['records_per_micro_batch']:,}. Records/s = the records of every batch after the first "
        "/ those batches' execution time; the first batch (plan, code generation, state store, "
        "Python workers) is shown apart. CPU µs/record = the Spark JVM's and its Python workers' CPU "
        "time over the batches after the first / their records.",
        "",
        "| job | records/s after the first batch | CPU µs/record | first batch s | wall s (start to end) "
        "| micro-batches |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for job, r in sj["jobs"].items():
        lines.append(
            f"| {job} | {fmt(r['records_per_s'])} | {fmt(r.get('cpu_us_per_record'))} "
            f"| {fmt(r['first_batch_s'])} | {fmt(r['wall_s'])} | {fmt(r['micro_batches'])} |"
        )
    lines += ["", *time_split_table(sj["jobs"])]
    kr = sj.get("suppress_keys_remembered")
    if kr:
        lines += [
            "",
            f"`suppress` with {kr['keys_remembered']:,} keys remembered (a backlog of one record per key "
            f"first, TTL {kr['ttl']}), then {kr['keys_active']:,} active keys: {fmt(kr['records_per_s'])} "
            f"records/s after the active phase's first batch ({fmt(kr['vs_active_keys_only'])}× the "
            f"suppress figure above); state rows written per batch: median "
            f"{fmt(kr['state_rows_updated_median'])} over {len(kr['state_rows_updated_per_batch'])} batches.",
        ]
    jr = sj.get("join_keys_remembered")
    if jr:
        lines += [
            "",
            f"`join` over the same backlog, keyed by order id with `--within {jr['within']}` (each of the "
            f"{jr['keys_remembered']:,} remembered records held as a key of its own): "
            f"{fmt(jr['records_per_s'])} records/s after the active phase's first batch "
            f"({fmt(jr['vs_active_keys_only'])}× the join figure above); state rows written per batch: "
            f"median {fmt(jr['state_rows_updated_median'])} ({fmt(jr['state_rows_vs_active_keys_only'])}× "
            "the join's over the active keys alone).",
        ]
    return lines


def time_split_table(jobs: dict[str, Any]) -> list[str]:
    """Where each job's batches after the first spent their time (``bench.spark_rates.time_split``):
    the plan's execution against the fixed costs every batch pays, whatever its size."""
    lines = [
        "Where those batches spent their time (ms per batch, mean): `addBatch` is the plan's "
        "execution (read, shuffle, state, sink); the fixed costs are paid by every batch whatever its "
        "size (offsets, planning, the offset and commit logs); state = the stateful operators' "
        "updates, removals and commit, task time summed over the shuffle partitions.",
        "",
        "| job | batch ms | addBatch | fixed: offsets | planning | offset & commit logs | other | "
        "state updates | removals | commit |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for job, r in jobs.items():
        split = r.get("time_split_ms")
        if not split or not split.get("batches"):
            continue
        n = split["batches"]

        def per(*parts: str, n: int = n, split: dict[str, int] = split) -> str:
            return fmt(round(sum(split.get(p, 0) for p in parts) / n))

        lines.append(
            f"| {job} | {per('trigger_execution')} | {per('addBatch')} | {per('latestOffset', 'getBatch')} "
            f"| {per('queryPlanning')} | {per('walCommit', 'commitOffsets')} | {per('other')} "
            f"| {per('state_updates')} | {per('state_removals')} | {per('state_commit')} |"
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
    added = results.get("added_us_per_record") or {"avro:meta.ts": results["avro_added_us_per_record"]}
    target = results["target_avro_added_us_per_record"]
    said = ", ".join(f"`{spec.split(':')[0]}:` {us:+.2f}" for spec, us in added.items())
    lines += [
        "",
        f"Added over `record`, µs/record: {said} (target ≤ {target} each: "
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


def extractors_e2e_section(results: dict[str, Any]) -> list[str]:
    """The extractors end to end (bench.extractors_e2e), from the ``extractors_e2e`` part of
    results.json (or the ``extractors_e2e.json`` of ``python -m bench extractors-e2e``)."""
    lines = [
        f"The sidecar as a process draining {results['records']:,} records per extractor from one "
        "partition of a local broker (a format's schemas, where it has them, from a local registry): "
        "records/s and the sidecar's CPU per record over the middle half of the drain.",
        "",
        "| `timestamp.extractor` | value bytes | records/s | CPU µs/record | over `record` µs/record |",
        "|---|---:|---:|---:|---:|",
    ]
    added = results["added_cpu_us_per_record"]
    for spec, r in results["extractors"].items():
        over = f"{added[spec]:+.2f}" if spec in added else "–"
        rate, cpu = fmt(r["records_per_s"]), f"{r['cpu_us_per_record']:.2f}"
        lines.append(f"| `{spec}` | {r['value_bytes']:,} | {rate} | {cpu} | {over} |")
    return lines
