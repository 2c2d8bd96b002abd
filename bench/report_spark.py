"""The Spark jobs' part of the report: each job's own rate over the ordered topic, where its
batches spend their time, and the remembered-keys cases (bench.spark_rates, bench.spark_state)."""

from __future__ import annotations

from typing import Any

from bench.table_format import fmt


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
