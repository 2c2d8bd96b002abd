"""``python -m bench spark-knobs``: its settings vary one knob at a time from the bench's, and its
table reads the per-batch split the bench records (no Spark here: the runs are bench.spark_rates')."""

from __future__ import annotations

from bench import spark_knobs
from bench.spark_rates import JOB_CONF


def test_each_setting_moves_one_knob_away_from_the_benchs_own() -> None:
    bench = spark_knobs.BENCH
    assert str(bench.shuffle_partitions) == JOB_CONF["spark.sql.shuffle.partitions"]
    for s in spark_knobs.SETTINGS:
        moved = (s.per_batch != bench.per_batch) + (s.shuffle_partitions != bench.shuffle_partitions)
        assert moved == (0 if s is bench else 1), s


def test_the_table_gives_each_batch_its_execution_fixed_costs_and_state_commit() -> None:
    split = {"addBatch": 800, "latestOffset": 50, "getBatch": 0, "queryPlanning": 100, "walCommit": 100,
             "commitOffsets": 70, "other": 80, "state_updates": 420, "state_removals": 10,
             "state_commit": 60, "batches": 2, "trigger_execution": 1200}  # fmt: skip
    per_batch = {"batch": 600, "execution": 400, "fixed": 160, "state_commit": 30}
    assert spark_knobs.per_batch_ms(split) == per_batch
    assert spark_knobs.per_batch_ms({"batches": 0}) is None
    result = {"records_per_s": 41_000, "cpu_us_per_record": 30.25, "micro_batches": 10}
    result["time_split_ms"] = split
    table = spark_knobs.markdown(
        {"records": 500_000, "keys": 5_000, "load_average_at_start": [0.4, 0, 0],
         "load_average_at_end": [1.9, 0, 0],
         "runs": [{"job": "join", "setting": "10,000 per batch", "result": result}]}
    )  # fmt: skip
    assert "| join | 10,000 per batch | 41,000 | 30.2 | 600 | 400 | 160 | 30 | 10 |" in table
    assert "load average 0.40 at the start and 1.90 at the end" in table
