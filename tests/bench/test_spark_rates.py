"""The Spark jobs' rate is read from their progress reports with start-up apart
(bench.spark_rates.rate): pure arithmetic over what Spark reports, no Spark here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.goals import suppress_goals
from bench.proc_cpu import spark_jvm_child, stat_cpu_ticks
from bench.spark_rates import cpu_per_record, first_data_batch_done, job_args, orders_and_payments, rate


def batch(batch_id: int, records: int, ms: int, sides: int = 1, end: int | None = None) -> dict[str, Any]:
    """A progress report of a batch that read ``records`` of one partition up to ``end``; a
    self-join's scans count each record once per side in ``numInputRows``."""
    end = (batch_id + 1) * records if end is None else end
    start = "null" if batch_id == 0 else json.dumps({"ordered": {"0": end - records}})
    sources = [{"startOffset": start, "endOffset": json.dumps({"ordered": {"0": end}}),
                "numInputRows": records * sides}]  # fmt: skip
    return {
        "batchId": batch_id,
        "numInputRows": records * sides,
        "sources": sources,
        "durationMs": {"triggerExecution": ms},
    }


def test_the_first_data_batch_is_start_up_and_left_out_of_the_rate() -> None:
    r = rate([batch(0, 1000, 9000), batch(1, 1000, 500), batch(2, 1000, 500)])
    assert r["records_per_s"] == 2000
    assert r["first_batch_s"] == 9.0
    assert (r["records"], r["micro_batches"]) == (3000, 3)


def test_batches_without_data_count_as_time_they_fire_timers_and_move_the_watermark() -> None:
    r = rate([batch(0, 1000, 9000), batch(1, 1000, 500), batch(2, 0, 500, end=2000)])
    assert r["records_per_s"] == 1000


def test_a_join_reading_the_topic_once_per_side_counts_each_record_once() -> None:
    r = rate([batch(0, 1000, 9000, sides=2), batch(1, 1000, 1000, sides=2)])
    assert r["records_per_s"] == 1000
    assert r["records"] == 2000


def test_state_rows_written_are_the_median_over_the_data_batches_after_the_first() -> None:
    progress = [batch(0, 1000, 9000), batch(1, 1000, 500), batch(2, 1000, 500), batch(3, 0, 500, end=3000)]
    for b, rows in zip(progress, (1000, 300, 100, 50_000), strict=True):
        b["stateOperators"] = [{"numRowsUpdated": rows // 2}, {"numRowsUpdated": rows - rows // 2}]
    assert rate(progress)["state_rows_updated_median"] == 100, "the first and the no-data batch left out"


def test_a_partition_new_in_a_batch_counts_from_its_start() -> None:
    second = batch(1, 1000, 1000)
    second["sources"][0]["endOffset"] = json.dumps({"ordered": {"0": 2000, "1": 500}})
    assert rate([batch(0, 1000, 9000), second])["records_per_s"] == 1500


def test_progress_reports_out_of_order_are_read_by_batch_id() -> None:
    r = rate([batch(2, 1000, 500), batch(0, 1000, 9000), batch(1, 1000, 500)])
    assert r["first_batch_s"] == 9.0
    assert r["records_per_s"] == 2000


def test_the_time_split_sums_the_batches_after_the_first_and_keeps_state_time_apart() -> None:
    """Execution against the fixed per-batch costs; what Spark did not name is ``other``; the
    state operators' task time is reported beside, not subtracted (it lies inside addBatch)."""
    first, second, third = batch(0, 1000, 9000), batch(1, 1000, 500), batch(2, 1000, 700)
    first["durationMs"].update(addBatch=8000, queryPlanning=900)
    for b, (add, offsets, wal, commit) in ((second, (300, 20, 40, 30)), (third, (500, 30, 60, 40))):
        parts = {"addBatch": add, "latestOffset": offsets, "walCommit": wal, "commitOffsets": commit}
        b["durationMs"].update(parts, queryPlanning=50)
    second["stateOperators"] = [{"allUpdatesTimeMs": 120, "allRemovalsTimeMs": 10, "commitTimeMs": 30}]
    third["stateOperators"] = [
        {"allUpdatesTimeMs": 200, "allRemovalsTimeMs": 0, "commitTimeMs": 25},
        {"allUpdatesTimeMs": 100, "commitTimeMs": 5},  # a second stateful operator (a join's side)
    ]
    split = rate([first, second, third])["time_split_ms"]
    assert split == {
        "addBatch": 800, "latestOffset": 50, "getBatch": 0, "queryPlanning": 100, "walCommit": 100,
        "commitOffsets": 70, "other": 80, "state_updates": 420, "state_removals": 10,
        "state_commit": 60, "batches": 2, "trigger_execution": 1200,
    }  # fmt: skip


def test_a_single_batch_or_no_data_gives_no_rate_rather_than_a_made_up_one() -> None:
    assert rate([batch(0, 1000, 9000)])["records_per_s"] is None
    assert rate([{"batchId": 0, "numInputRows": 0, "sources": [], "durationMs": {}}]) == {
        "records_per_s": None,
        "first_batch_s": None,
        "micro_batches": 0,
        "records": 0,
    }


def test_the_workload_pairs_each_order_with_a_later_payment_of_the_same_customer() -> None:
    events = orders_and_payments("orders", "payments", 500, keys=20, base_ms=1_700_000_000_000, seed=1)
    assert len(events) == 1000
    by_topic: dict[str, dict[bytes, tuple[int, bytes | None]]] = {"orders": {}, "payments": {}}
    import orjson

    for e in events:
        value = orjson.loads(e.value)
        by_topic[e.topic][value["id"]] = (e.ts, e.key)
        assert 200 <= len(e.value) <= 250
    assert by_topic["orders"].keys() == by_topic["payments"].keys()
    for order_id, (ts, key) in by_topic["orders"].items():
        pay_ts, pay_key = by_topic["payments"][order_id]
        assert 50 <= pay_ts - ts < 500
        assert pay_key == key
    assert len({e.key for e in events}) == 20
    # Each partition is written in event-time order, as its producer would have.
    for topic in ("orders", "payments"):
        for part in range(3):
            times = [e.ts for e in events if (e.topic, e.partition) == (topic, part)]
            assert times == sorted(times)


def test_every_job_is_the_cli_command_line_a_user_would_run() -> None:
    from spark_consumer import cli

    for job in ("aggregate", "join", "suppress"):
        args = job_args(job, "127.0.0.1:9092", "ordered", "out", "orders", "payments")
        plan = cli.Plan(cli.build_parser().parse_args([*args, "--checkpoint", "/tmp/ck"]))
        assert plan.job == job
        assert plan.sink.kind == "kafka"
        assert plan.sink.trigger == "available-now"


def test_cpu_per_record_is_the_jvm_cpu_after_the_first_batch_over_those_records() -> None:
    assert cpu_per_record(10.0, 14.0, 2_000_000) == {"cpu_s_after_first_batch": 4.0, "cpu_us_per_record": 2.0}


def test_no_cpu_reading_or_no_records_gives_no_cpu_figure() -> None:
    none = {"cpu_s_after_first_batch": None, "cpu_us_per_record": None}
    assert cpu_per_record(None, 14.0, 1000) == none
    assert cpu_per_record(10.0, 14.0, 0) == none


def test_the_first_data_batch_is_done_once_a_batch_with_records_has_reported() -> None:
    assert not first_data_batch_done([])
    assert not first_data_batch_done([{"batchId": 0, "numInputRows": 0, "sources": [], "durationMs": {}}])
    assert first_data_batch_done([batch(0, 1000, 9000)])


def test_suppress_goals_compare_rate_and_cpu_with_aggregate() -> None:
    jobs = {
        "aggregate": {"records_per_s": 100_000, "cpu_us_per_record": 10.0},
        "suppress": {"records_per_s": 60_000, "cpu_us_per_record": 19.0},
    }
    goals = suppress_goals({"jobs": jobs})
    rate_goal, cpu_goal = goals["spark_suppress_rate_vs_aggregate"], goals["spark_suppress_cpu_vs_aggregate"]
    assert (rate_goal["ratio"], rate_goal["met"]) == (0.6, False)
    assert (cpu_goal["ratio"], cpu_goal["met"]) == (1.9, True)


def test_suppress_goals_without_figures_are_not_judged() -> None:
    g = suppress_goals(None)
    assert g["spark_suppress_rate_vs_aggregate"]["met"] is None
    assert g["spark_suppress_cpu_vs_aggregate"]["met"] is None


def test_a_proc_stat_line_sums_user_system_and_reaped_children_ticks() -> None:
    # comm with spaces and parentheses; utime 100, stime 20, cutime 3, cstime 4
    assert stat_cpu_ticks("1234 (we ird) (x)) S 1 2 3 4 5 6 7 8 9 10 100 20 3 4 20 0 1 0") == 127


def test_the_spark_jvm_is_the_child_running_spark_submit_not_any_java(tmp_path: Path) -> None:
    for pid, cmd in (
        (10, b"java\0kafka.Kafka\0"),
        (11, b"java\0org.apache.spark.deploy.SparkSubmit\0pyspark-shell\0"),
    ):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes(cmd)
    (tmp_path / "1" / "task" / "1").mkdir(parents=True)
    (tmp_path / "1" / "task" / "1" / "children").write_text("10 11")
    assert spark_jvm_child(1, tmp_path) == 11
    (tmp_path / "1" / "task" / "1" / "children").write_text("10")
    assert spark_jvm_child(1, tmp_path) is None
