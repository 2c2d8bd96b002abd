"""``python -m bench idle-backlog`` without a broker: the old rule it measures is the old rule
(N − 1 waits where the new one has one), its schedule alternates the rules, and its table and
plot come from the runs."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import sidecar.core.task
from bench import idle_backlog, idle_rules
from bench.idle_backlog import Case
from sidecar.core import Emit, MergeTask, Record, TaskConfig, TopicPartition, WaitUntil
from sidecar.core.idle_strategy import FixedIdle, LearntIdle, NoIdle
from sidecar.core.readiness import IDLE_AUTO, IDLE_FOREVER

IDLE = 100


def waits_to_drain(partitions: int, idle: int = IDLE) -> list[int]:
    """A backlog on ``partitions`` partitions fetched at 0 (record j of partition q at time
    jN + q), drained by a task polled whenever it asks: the times it asked to wait until."""
    parts = [TopicPartition("t", q) for q in range(partitions)]
    task = MergeTask(parts, TaskConfig(max_task_idle_ms=idle, watermark_heartbeat_ms=0))
    for q, tp in enumerate(parts):
        task.observe_fetch(tp, 20, 20, 0)
        task.push(tp, [Record("t", q, j, j * partitions + q) for j in range(20)])
    waits, now = [], 0
    while task.records_out < 20 * partitions:
        out = task.poll(now)
        if isinstance(out, WaitUntil):
            waits.append(out.deadline_ms)
            now = out.deadline_ms
        else:
            assert isinstance(out, Emit), f"{out}: only a wait or a batch while the backlog lasts"
    return waits


def test_the_old_rule_waits_once_per_partition_running_dry_the_new_one_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert waits_to_drain(6) == [IDLE]
    assert waits_to_drain(6, idle=0) == []

    monkeypatch.setattr(sidecar.core.task, "make_idle", idle_rules.old_rule)
    assert waits_to_drain(6) == [IDLE * k for k in range(1, 6)]
    assert waits_to_drain(6, idle=0) == [], "at 0 the old rule passes a partition as it runs dry"


def test_the_old_rule_starts_no_wait_while_the_task_holds_nothing_even_when_status_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sidecar.core.task, "make_idle", idle_rules.old_rule)
    a, b = TopicPartition("a", 0), TopicPartition("b", 0)
    task = MergeTask([a, b], TaskConfig(max_task_idle_ms=IDLE, watermark_heartbeat_ms=0))
    for tp in (a, b):
        task.observe_fetch(tp, 0, 0, 0)
    for now in (0, 1_000, 5_000):
        task.poll(now)
        task.snapshot(now)  # /status and the metrics read it between polls

    task.observe_fetch(a, 1, 1, 5_000)
    task.push(a, [Record("a", 0, 0, 1)])

    assert task.poll(5_000) == WaitUntil(5_000 + IDLE)


def test_the_old_rule_replaces_only_a_fixed_finite_idle() -> None:
    assert isinstance(idle_rules.old_rule(500, 1000, 2), idle_rules.RunDryIdle)
    assert isinstance(idle_rules.old_rule(0, 1000, 2), idle_rules.RunDryIdle)
    assert isinstance(idle_rules.old_rule(-1, 1000, 2), NoIdle)
    assert isinstance(idle_rules.old_rule(IDLE_FOREVER, 1000, 2), FixedIdle)
    assert isinstance(idle_rules.old_rule(IDLE_AUTO, 1000, 2), LearntIdle)


def test_the_old_rule_sidecar_is_the_same_command_through_the_launcher() -> None:
    process = idle_backlog.old_rule_sidecar("127.0.0.1:9", ["in"], "out", {"max.task.idle.ms": 500})
    args = process.args()
    assert args[1:3] == ["-m", "bench.idle_rules"]
    assert "max.task.idle.ms=500" in args


def test_the_schedule_starts_each_round_at_minus_one_and_alternates_the_rules() -> None:
    cases = idle_backlog.schedule([0, 500], rounds=2)
    assert [(c.round, c.idle, c.rule) for c in cases] == [
        (1, -1, "last-arrival"), (1, 0, "last-arrival"), (1, 0, "run-dry"),
        (1, 500, "run-dry"), (1, 500, "last-arrival"),
        (2, -1, "last-arrival"), (2, 0, "run-dry"), (2, 0, "last-arrival"),
        (2, 500, "last-arrival"), (2, 500, "run-dry"),
    ]  # fmt: skip
    assert len({c.slug for c in cases}) == len(cases), "each run has its own output topic"


def run_row(n: int, case: Case, drain_s: float | None) -> dict[str, object]:
    return {"partitions": n, "round": case.round, "idle": case.idle, "rule": case.rule, "drain_s": drain_s}


def results() -> dict[str, object]:
    runs = [
        run_row(8, Case(1, -1, "last-arrival"), 2.0),
        run_row(8, Case(1, 500, "last-arrival"), 2.6),
        run_row(8, Case(1, 500, "run-dry"), 5.5),
        run_row(64, Case(1, -1, "last-arrival"), 3.0),
        run_row(64, Case(1, 500, "run-dry"), None),  # did not finish
        run_row(64, Case(1, 500, "last-arrival"), 3.4),
    ]
    return {
        "quick": False,
        "size": {"partitions": [8, 64], "idles": [500], "records_per_partition": 200},
        "rounds": 1,
        "load_average_at_start": [1.0, 0.5, 0.2],
        "load_average_at_end": [1.5, 0.9, 0.4],
        "runs": runs,
        "summary": idle_backlog.summarize(runs),
    }


def test_the_summary_gives_what_each_rule_adds_over_minus_one() -> None:
    eight, sixty_four = results()["summary"]  # type: ignore[misc]
    assert eight == {
        "partitions": 8,
        "idle_ms": 500,
        "drain_at_minus_one_s": 2.0,
        "last-arrival_drain_s": 2.6,
        "last-arrival_added_s": 0.6,
        "run-dry_drain_s": 5.5,
        "run-dry_added_s": 3.5,
        "serial_idles_s": 3.5,
    }
    assert (sixty_four["run-dry_added_s"], sixty_four["last-arrival_added_s"]) == (None, 0.4)


def test_the_table_and_the_plot(tmp_path: Path) -> None:
    r = results()
    table = idle_backlog.markdown(r)
    assert "| 8 | 500 | 2.00 | 0.60 | 3.50 | 3.50 |" in table
    assert "| 64 | 500 | 3.00 | 0.40 | — | 31.50 |" in table
    assert "Load average 1.0/0.5/0.2 at the start" in table

    path = idle_backlog.plot(r, tmp_path / "idle-backlog.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_line() -> None:
    parser = argparse.ArgumentParser()
    idle_backlog.add_arguments(parser)
    args = parser.parse_args(["--quick", "--rounds", "2", "--out", "somewhere"])
    assert (args.quick, args.rounds, args.out) == (True, 2, Path("somewhere"))
    assert parser.parse_args([]).rounds == 1
