"""``python -m bench live``: rounds alternate the settings' order, and the table gives medians
with every round beside them (no broker here: the runs are bench.live's)."""

from __future__ import annotations

from bench import live_rounds


def test_rounds_alternate_the_order_of_the_settings_on_every_workload() -> None:
    plan = live_rounds.schedule(["steady", "lagging"], ["0", "100", "auto"], rounds=2)
    assert [(r, w, s.idle) for r, w, s in plan] == [
        (1, "steady", "0"), (1, "steady", "100"), (1, "steady", "auto"),
        (1, "lagging", "0"), (1, "lagging", "100"), (1, "lagging", "auto"),
        (2, "steady", "auto"), (2, "steady", "100"), (2, "steady", "0"),
        (2, "lagging", "auto"), (2, "lagging", "100"), (2, "lagging", "0"),
    ]  # fmt: skip


def test_medians_per_workload_and_setting_with_each_round_kept() -> None:
    rows = [
        {"workload": "lagging", "idle": "auto", "p99_ms": p99, "late_records": late}
        for p99, late in ((152, 44), (186, 81), (166, 93))
    ] + [{"workload": "lagging", "idle": "100", "p99_ms": 175, "late_records": 0}]
    (auto, fixed) = live_rounds.medians(rows)
    assert (auto["idle"], auto["rounds"], auto["p99_ms"], auto["late_records"]) == ("auto", 3, 166, 81)
    assert auto["p99_ms_runs"] == [152, 186, 166]
    assert (fixed["idle"], fixed["rounds"]) == ("100", 1)
    table = live_rounds.markdown(
        {"rounds": 3, "idles": ["100", "auto"], "load_average_at_start": [0.5], "load_average_at_end": [1.5],
         "medians": [auto, fixed]}
    )  # fmt: skip
    assert "| lagging | auto | 166 | 81 | 152, 186, 166 | 44, 81, 93 |" in table
