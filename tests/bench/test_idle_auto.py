"""``auto`` against the fixed idle settings per live workload (bench.idle_auto), from results:
no broker here."""

from __future__ import annotations

from typing import Any

from bench.idle_auto import points, summary, versus_fixed


def run(label: str, idle: str | None, p99: int | None, late: int, kind: str = "timesync") -> dict[str, Any]:
    return {
        "system": {"kind": kind, "idle": idle, "grouping": "single", "label": label},
        "latency": {"p99_ms": p99},
        "disorder": {"late_records": late},
    }


def workload(*runs: dict[str, Any], name: str = "steady") -> dict[str, Any]:
    return {"name": name, "runs": [run("passthrough", None, 10, 500, kind="passthrough"), *runs]}


def test_added_p99_is_over_the_passthrough_and_only_single_task_timesync_runs_count() -> None:
    w = workload(
        run("timesync idle 0", "0", 15, 20),
        run("kafka-streams idle 0", "0", 12, 30, kind="kafka-streams"),
        run("timesync idle auto", "auto", 40, 0),
    )
    assert points(w) == {
        "timesync idle 0": {"idle": "0", "added_p99_ms": 5, "late_records": 20},
        "timesync idle auto": {"idle": "auto", "added_p99_ms": 30, "late_records": 0},
    }


def test_a_fixed_setting_beats_auto_only_when_lower_on_both_axes() -> None:
    w = workload(
        run("timesync idle 0", "0", 15, 20),  # faster but more disorder: a trade-off, not a win
        run("timesync idle max", "max", 900, 0),  # as ordered, slower
        run("timesync idle 500", "500", 20, 0),  # faster, as ordered: 0 is not fewer than 0
        run("timesync idle auto", "auto", 40, 0),
    )
    assert versus_fixed(w)["beaten_by"] == []  # type: ignore[index]
    late = workload(run("timesync idle 500", "500", 20, 1), run("timesync idle auto", "auto", 40, 5))
    assert versus_fixed(late)["beaten_by"] == ["timesync idle 500"]  # type: ignore[index]


def test_workloads_without_auto_or_without_a_passthrough_are_left_out() -> None:
    no_auto = workload(run("timesync idle 0", "0", 15, 20), name="skewed")
    no_base = {"name": "quiet", "runs": [run("timesync idle auto", "auto", 40, 0)]}
    with_auto = workload(run("timesync idle auto", "auto", 40, 0), name="lagging")
    assert list(summary({"workloads": [no_auto, no_base, with_auto]})) == ["lagging"]
    assert summary({"workloads": []}) == {}
