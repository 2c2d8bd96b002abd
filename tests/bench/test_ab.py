"""``python -m bench ab``: both sidecars take turns fairly, and the comparison is the medians'
ratio with the per-round ratios beside it (no broker here: the drains are bench.backlog's)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench import ab
from bench.systems import SystemSpec
from testkit.sidecar_process import SidecarProcess

BASE = Path("/cache/bench-ab/464a63f1b2c3")


def test_every_setting_runs_on_both_sides_once_per_round_and_the_first_side_alternates() -> None:
    plan = ab.schedule(ab.SETTINGS, BASE, rounds=3)
    assert Counter(spec.label for _, spec in plan) == {
        label: 3 for s in ab.SETTINGS for label in (s.label, f"{s.label} @{BASE.name}")
    }
    firsts = [plan[i][1].checkout is None for i in range(0, len(plan), 2)]
    per_round = len(ab.SETTINGS)
    assert firsts == [True] * per_round + [False] * per_round + [True] * per_round
    # each round starts one setting further on
    assert [plan[r * 2 * per_round][1].grouping for r in range(3)] == ["single", "partition", "single"]
    assert plan[4 * per_round][1].idle == "max"


def result(rate: int | None, cpu: float | None = 2.0) -> dict[str, Any]:
    return {"records_per_s": rate, "cpu_us_per_record": cpu}


def test_the_ratio_is_of_the_medians_and_the_rounds_ratios_show_the_noise() -> None:
    spec = ab.SETTINGS[0]
    base = SystemSpec(spec.kind, spec.idle, spec.grouping, checkout=BASE)
    runs = [
        (spec, result(300_000, 2.0)), (base, result(250_000, 2.5)),
        (base, result(200_000, 3.0)), (spec, result(330_000, 1.8)),
        (spec, result(270_000, 2.2)), (base, result(300_000, 2.4)),
    ]  # fmt: skip
    (c,) = [c.as_json() for c in ab.compare("keyless", runs)]
    assert (c["records_per_s"], c["baseline_records_per_s"]) == (300_000, 250_000)
    assert c["ratio"] == 1.2
    assert c["per_round_ratios"] == [1.2, 1.65, 0.9]
    assert c["cpu_ratio"] == round(2.0 / 2.5, 3)
    table = ab.markdown(
        {"head": "f5c4fc9", "baseline": "464a63f", "records": 1000, "rounds": 3,
         "load_average_at_start": [0.5, 0, 0], "load_average_at_end": [1.5, 0, 0], "comparisons": [c]}
    )  # fmt: skip
    assert (
        "| keyless | timesync idle 0 | 300,000 | 250,000 | 1.200 | 1.20, 1.65, 0.90 | 2.00 | 2.50 | 0.800 |"
        in table
    )
    assert "load average 0.50 at the start, 1.50 at the end" in table


def test_a_drain_that_measured_nothing_is_left_out_of_the_ratios_not_counted_as_zero() -> None:
    spec = ab.SETTINGS[1]
    base = SystemSpec(spec.kind, spec.idle, spec.grouping, checkout=BASE)
    runs = [
        (spec, result(None, None)),
        (base, result(100_000)),
        (spec, result(120_000)),
        (base, result(100_000)),
    ]
    (c,) = [c.as_json() for c in ab.compare("json", runs)]
    assert c["records_per_s"] == 120_000
    assert c["per_round_ratios"] == [1.2]


def test_a_revision_that_names_no_commit_is_one_clear_error() -> None:
    with pytest.raises(ab.BaselineError, match=r"--baseline no-such-rev: not a commit of this repository"):
        ab.resolve("no-such-rev")


def test_the_baseline_sidecar_runs_by_its_checkouts_python_from_its_folder() -> None:
    spec = SystemSpec("timesync", "0", checkout=BASE)
    assert spec.label == f"timesync idle 0 @{BASE.name}"
    assert "@" not in spec.slug
    assert " " not in spec.slug
    assert spec.as_json()["checkout"] == BASE.name
    sidecar = SidecarProcess("127.0.0.1:9092", ["a"], "out", checkout=BASE)
    assert sidecar.args()[:3] == [str(BASE / ".venv" / "bin" / "python"), "-m", "sidecar"]
    assert sidecar.checkout == BASE
