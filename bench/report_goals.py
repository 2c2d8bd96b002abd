"""The report's goals table: one row per goal of ``results.json``'s ``goals`` (:mod:`bench.goals`
decides whether each is met; this module only writes it down).

Rows for goals a run did not measure (a run without Spark, without the extractors) are left out.
"""

from __future__ import annotations

from typing import Any

from bench.formatting import fmt
from bench.systems import LZ4_HC

YES = {True: "yes", False: "**no**", None: "–"}


def goals_section(goals: dict[str, Any]) -> list[str]:
    """The ``## Goals`` heading and its table."""
    return [
        "## Goals",
        "",
        "| goal | measured | met |",
        "|---|---|:-:|",
        *_throughput_rows(goals),
        *_order_rows(goals),
        *_latency_rows(goals),
        *_spark_rows(goals),
        *join_rows(goals),
        *_idle_auto_rows(goals),
        *_extractor_rows(goals),
    ]


def _throughput_rows(g: dict[str, Any]) -> list[str]:
    t = g["throughput"]
    lines = [
        f"| timesync throughput ≥ {t['target_vs_passthrough']}× passthrough | "
        f"{fmt(t['timesync_vs_passthrough'])}× ({fmt(t['timesync_idle_0_records_per_s'])} vs "
        f"{fmt(t['passthrough_records_per_s'])} records/s) | {YES[t['met']]} |"
    ]
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
    return lines


def _order_rows(g: dict[str, Any]) -> list[str]:
    im = g["idle_max_no_inversions_beyond_partitions"]
    detail = ", ".join(
        f"{name}: {d['inversions']:,} vs {d['held_by_single_partitions']:,}"
        for name, d in im["per_workload"].items()
    )
    lines = [f"| idle max: no inversions beyond single partitions | {detail or '–'} | {YES[im['met']]} |"]
    ks = g["same_order_as_kafka_streams_idle_0"]
    if "records_compared" in ks:
        lines.append(
            f"| pre-produced, idle 0: same order as Kafka Streams (up to ties) | "
            f"{ks['records_compared']:,} records, {ks['tie_runs_differing']} tie runs differ, "
            f"{ks['positions_differing']:,} positions differ only among equal timestamps | {YES[ks['met']]} |"
        )
    return lines


def _latency_rows(g: dict[str, Any]) -> list[str]:
    st = g["steady_idle_0_added_p99_ms"]
    return [
        f"| steady, idle 0: p99 added over passthrough ≤ {st['target_ms']} ms | "
        f"{fmt(st['added_p99_ms'], ' ms')} (p99 {fmt(st.get('timesync_idle_0_p99_ms'))} vs "
        f"{fmt(st.get('passthrough_p99_ms'))} ms, median of "
        f"{len((st.get('p99_rounds_ms') or {}).get('passthrough', [])) or 1} round(s)) | {YES[st['met']]} |"
    ]


def _spark_rows(g: dict[str, Any]) -> list[str]:
    lines = []
    sp = g["spark_fewer_drops_on_ordered_topic"]
    if sp["jobs"]:
        detail = ", ".join(
            f"{job}: raw {d['raw']:,}, ordered {d['ordered']:,}" for job, d in sp["jobs"].items()
        )
        lines.append(f"| Spark drops fewer late rows on the ordered topic | {detail} | {YES[sp['met']]} |")
    sr, sc = g.get("spark_suppress_rate_vs_aggregate"), g.get("spark_suppress_cpu_vs_aggregate")
    if sr and sr["ratio"] is not None:
        lines.append(
            f"| Spark suppress records/s ≥ {sr['target']}× aggregate's | {fmt(sr['ratio'])}× "
            f"({fmt(sr['suppress_records_per_s'])} vs {fmt(sr['aggregate_records_per_s'])} records/s) "
            f"| {YES[sr['met']]} |"
        )
    if sc and sc["ratio"] is not None:
        lines.append(
            f"| Spark suppress CPU/record ≤ {sc['target']}× aggregate's | {fmt(sc['ratio'])}× "
            f"({fmt(sc['suppress_cpu_us_per_record'])} vs "
            f"{fmt(sc['aggregate_cpu_us_per_record'])} µs/record) "
            f"| {YES[sc['met']]} |"
        )
    sk = g.get("spark_suppress_keys_remembered")
    if sk and sk["ratio"] is not None:
        lines.append(
            f"| Spark suppress with {fmt(sk['keys_remembered'])} keys remembered ≥ {sk['target']}× its rate "
            f"over the active keys alone | {fmt(sk['ratio'])}× ({fmt(sk['records_per_s'])} vs "
            f"{fmt(sk['active_keys_only_records_per_s'])} records/s) | {YES[sk['met']]} |"
        )
    return lines


def join_rows(g: dict[str, Any]) -> list[str]:
    """The rows for ``join`` (:func:`bench.goals.join_goals`), those with figures."""
    lines = []
    jr, jk = g.get("spark_join_rate_vs_aggregate"), g.get("spark_join_keys_remembered")
    if jr and jr["ratio"] is not None:
        lines.append(
            f"| Spark join records/s ≥ {jr['target']}× aggregate's | {fmt(jr['ratio'])}× "
            f"({fmt(jr['join_records_per_s'])} vs {fmt(jr['aggregate_records_per_s'])} records/s) "
            f"| {YES[jr['met']]} |"
        )
    if jk and jk["ratio"] is not None:
        lines.append(
            f"| Spark join with {fmt(jk['keys_remembered'])} keys remembered ≥ {jk['target']}× its rate over "
            f"the active keys alone, ≤ {jk['state_rows_target']}× the state rows per batch | "
            f"{fmt(jk['ratio'])}× ({fmt(jk['records_per_s'])} vs {fmt(jk['active_keys_only_records_per_s'])} "
            f"records/s); rows {fmt(jk['state_rows_ratio'])}× ({fmt(jk['state_rows_updated_median'])} vs "
            f"{fmt(jk['active_keys_only_state_rows_updated_median'])}) | {YES[jk['met']]} |"
        )
    return lines


def _idle_auto_rows(g: dict[str, Any]) -> list[str]:
    ia = g.get("idle_auto_not_beaten_by_a_fixed_setting")
    if not (ia and ia["per_workload"]):
        return []
    detail = ", ".join(
        f"{name}: " + (", ".join(f"`{b}`" for b in beaten) if beaten else "none")
        for name, beaten in ia["per_workload"].items()
    )
    return [
        f"| idle `auto`: no fixed setting has both lower added p99 and fewer records out of order "
        f"| beaten by — {detail} | {YES[ia['met']]} |"
    ]


def _extractor_rows(g: dict[str, Any]) -> list[str]:
    ex = g.get("extractors_over_record")
    if not (ex and ex["added_us_per_record"]):
        return []
    added = ex["added_us_per_record"]
    named = ", ".join(f"`{spec.split(':')[0]}:`" for spec in added)
    said = ", ".join(f"`{spec.split(':')[0]}:` {us:+.2f}" for spec, us in added.items())
    return [
        f"| `timestamp.extractor` {named}: each adds ≤ {ex['target_us_per_record']} µs/record over "
        f"`record` | {said} µs/record | {YES[ex['met']]} |"
    ]
