"""The remembered-keys case of suppress and join (bench.spark_state): its workload, how its active
phase is read from the progress reports, and the goals read off it — no Spark here."""

from __future__ import annotations

import json
from typing import Any

import orjson

from bench.goals import join_goals, suppress_goals
from bench.report_goals import join_rows
from bench.spark_state import active_phase, remember_events


def batch(batch_id: int, start: int, records: int, ms: int, rows_updated: int) -> dict[str, Any]:
    begin = "null" if batch_id == 0 else json.dumps({"ordered": {"0": start}})
    return {
        "batchId": batch_id,
        "numInputRows": records,
        "sources": [{"startOffset": begin, "endOffset": json.dumps({"ordered": {"0": start + records}})}],
        "durationMs": {"triggerExecution": ms},
        "stateOperators": [{"numRowsUpdated": rows_updated}],
    }


def test_every_remembered_record_has_its_own_key_in_event_time_order_per_partition() -> None:
    events = remember_events("orders", 10, 0, 100, 1_000, seed=1)
    assert len(events) == 10
    assert len({e.key for e in events}) == 10
    for part in {e.partition for e in events}:
        ts = [e.ts for e in events if e.partition == part]
        assert ts == sorted(ts)
    assert orjson.loads(events[3].value)["customer"] == events[3].key.decode()  # type: ignore[union-attr]


def test_chunks_of_the_remember_phase_add_up_to_the_whole() -> None:
    whole = remember_events("orders", 25, 0, 25, 0, seed=1)
    parts = [
        e for start in range(0, 25, 10) for e in remember_events("orders", 25, start, start + 10, 0, seed=1)
    ]
    assert [(e.key, e.ts, e.partition) for e in parts] == [(e.key, e.ts, e.partition) for e in whole]


def test_the_active_phase_starts_at_the_boundary_and_leaves_its_first_batch_out() -> None:
    progress = [
        batch(0, 0, 1000, 9000, 1000),  # remember phase
        batch(1, 1000, 1000, 3000, 1000),  # remember phase
        batch(2, 2000, 1000, 2000, 300),  # the active phase's first batch
        batch(3, 3000, 1000, 500, 200),
        batch(4, 4000, 1000, 500, 100),
    ]
    a = active_phase(progress, 2000)
    assert a["records_per_s"] == 2000
    assert a["micro_batches"] == 3
    assert a["state_rows_updated_per_batch"] == [200, 100]
    assert a["state_rows_updated_median"] == 100


def test_no_active_batches_after_the_first_gives_no_rate() -> None:
    a = active_phase([batch(0, 0, 1000, 9000, 1000), batch(1, 1000, 1000, 500, 10)], 1000)
    assert a["records_per_s"] is None
    assert a["state_rows_updated_median"] is None


def test_the_remembered_keys_goal_compares_with_the_active_keys_only_rate() -> None:
    jobs = {
        "jobs": {"suppress": {"records_per_s": 10_000}},
        "suppress_keys_remembered": {"records_per_s": 8_000},
    }
    goal = suppress_goals(jobs)["spark_suppress_keys_remembered"]
    assert (goal["ratio"], goal["met"]) == (0.8, True)
    assert suppress_goals({"jobs": {}})["spark_suppress_keys_remembered"]["met"] is None


def test_the_join_goals_compare_its_rate_with_aggregate_and_its_remembered_keys_with_its_active_keys() -> (
    None
):
    jobs = {
        "jobs": {
            "aggregate": {"records_per_s": 10_000},
            "join": {"records_per_s": 11_000, "state_rows_updated_median": 1_000},
        },
        "join_keys_remembered": {
            "keys_remembered": 1_000_000,
            "records_per_s": 9_900,
            "state_rows_updated_median": 1_200,
        },
    }
    goals = join_goals(jobs)
    rate, kept = goals["spark_join_rate_vs_aggregate"], goals["spark_join_keys_remembered"]
    assert (rate["ratio"], rate["met"]) == (1.1, True)
    assert (kept["ratio"], kept["state_rows_ratio"], kept["met"]) == (0.9, 1.2, True)
    lines = join_rows(goals)
    assert lines[0].startswith(
        "| Spark join records/s ≥ 1.0× aggregate's | 1.1× (11,000 vs 10,000 records/s) | yes |"
    )
    assert "1,000,000 keys remembered" in lines[1]


def test_a_join_whose_state_writes_follow_the_remembered_keys_misses_its_goal() -> None:
    jobs = {
        "jobs": {"join": {"records_per_s": 11_000, "state_rows_updated_median": 1_000}},
        "join_keys_remembered": {"records_per_s": 10_000, "state_rows_updated_median": 1_000_000},
    }
    assert join_goals(jobs)["spark_join_keys_remembered"]["met"] is False
    assert join_goals({"jobs": {}})["spark_join_keys_remembered"]["met"] is None
    assert join_goals(None)["spark_join_rate_vs_aggregate"]["met"] is None
