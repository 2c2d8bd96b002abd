"""The bench's plots read at a glance: each axis linear or symlog as its values need, plain tick
labels, a sensible range for a panel whose values are all the same (bench/axes.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import plots
from bench.axes import MINUS, Scale, choose_scale, plain_number, set_axis

#: What a reader calls a plain number: digits with thousands separators, maybe a fraction, maybe
#: a minus sign — no exponent, no "×10", no offset.
PLAIN = re.compile(rf"^{MINUS}?\d{{1,3}}(,\d{{3}})*(\.\d+)?$")


def tick_labels(ax: Any, which: str) -> list[str]:
    ax.figure.canvas.draw()
    ticks = ax.get_xticklabels() if which == "x" else ax.get_yticklabels()
    low, high = ax.get_xlim() if which == "x" else ax.get_ylim()
    return [t.get_text() for t in ticks if min(low, high) <= t.get_position()[which == "y"] <= max(low, high)]


@pytest.fixture
def ax() -> Iterator[Any]:
    fig, axes = plt.subplots()
    yield axes
    plt.close(fig)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (25, "25"),
        (1000, "1,000"),
        (-10, f"{MINUS}10"),
        (2.5, "2.5"),
        (0.05, "0.05"),
        (0.125, "0.125"),
        (3.55, "3.55"),
        (123456.0, "123,456"),
    ],
)
def test_a_tick_label_is_the_number_as_a_reader_writes_it(value: float, text: str) -> None:
    assert plain_number(value) == text


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False).filter(lambda v: v == 0 or abs(v) >= 1e-6))
def test_every_tick_label_is_plain_and_close_to_its_value(value: float) -> None:
    text = plain_number(value)
    assert PLAIN.match(text), text
    back = float(text.replace(MINUS, "-").replace(",", ""))
    assert back == pytest.approx(value, rel=1e-3, abs=1e-7)


def test_values_within_a_decade_get_a_linear_axis() -> None:
    assert choose_scale([-13, -12, -11, -9, -6]).kind == "linear"
    assert choose_scale([0, 40, 75, 185, 210]).kind == "linear"


def test_values_across_decades_get_a_symlog_axis_whose_linear_part_holds_the_smallest() -> None:
    assert choose_scale([-10, 80, 500, 1000, 2500]) == Scale("symlog", linthresh=10.0, subs=(1.0,))
    assert choose_scale([0, 27, 250, 50_000]) == Scale("symlog", linthresh=100.0, subs=(1.0,))
    # p99s of 324, 353, 443 and 18,975 ms: linear would press the first three together
    assert choose_scale([324, 353, 443, 18_975]) == Scale("symlog", linthresh=1000.0, subs=(1.0, 2.0, 5.0))


def test_noise_below_the_resolution_never_makes_an_axis_logarithmic() -> None:
    # added p99 of -8 … 3 ms with a 0.2 ms point: sub-millisecond is noise, the axis stays linear
    assert choose_scale([-8, -4, -1, 0.2, 2, 3], resolution=1.0).kind == "linear"


def test_a_panel_whose_values_are_all_zero_spans_zero_to_one() -> None:
    scale = choose_scale([0, 0, 0], nonnegative=True)
    assert scale.kind == "linear"
    assert scale.limits is not None
    low, high = scale.limits
    assert -0.1 <= low < 0
    assert 1 <= high <= 1.1


def test_a_panel_whose_values_are_all_the_same_is_centred_on_them() -> None:
    assert choose_scale([-30, -30]).limits == pytest.approx((-41.0, -19.0))


def test_an_all_zero_count_axis_is_ticked_at_0_and_1_not_at_tiny_fractions(ax: Any) -> None:
    ax.scatter([0, 0, 0], [-8, 2, 3])
    set_axis(ax, "x", [0, 0, 0], nonnegative=True, integer=True)
    set_axis(ax, "y", [-8, 2, 3])
    assert tick_labels(ax, "x") == ["0", "1"]
    assert all(PLAIN.match(t) for t in tick_labels(ax, "y")), tick_labels(ax, "y")


def test_a_symlog_axis_is_ticked_at_0_and_powers_of_ten_in_plain_numbers(ax: Any) -> None:
    values = [-9, 0, 80, 500, 1000, 2500]
    ax.scatter(range(len(values)), values)
    set_axis(ax, "y", values)
    labels = tick_labels(ax, "y")
    assert {"0", "10", "100", "1,000"} <= set(labels), labels
    assert all(PLAIN.match(t) for t in labels), labels


def test_the_idle_auto_figure_reads_at_a_glance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The panels the issue showed: one where nothing was out of order (once spanning ±5.5×10^-2)
    and one whose latencies sat within one decade (once labelled −10^1 alone)."""
    figures: list[Any] = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    fixed = {
        f"idle {idle}": {"idle": idle, "late_records": late, "added_p99_ms": p99}
        for idle, late, p99 in (("0", 211, -13), ("100", 0, -12), ("500", 0, -6), ("max", 0, -11))
    }
    in_order = {
        f"idle {i}": {"idle": i, "late_records": 0, "added_p99_ms": ms} for i, ms in (("0", -4), ("-1", 3))
    }
    summary = {
        "steady": {"fixed": fixed, "auto": {"late_records": 74, "added_p99_ms": -13}, "beaten_by": []},
        "log-append": {"fixed": in_order, "auto": {"late_records": 0, "added_p99_ms": -8}, "beaten_by": []},
    }
    plots.idle_auto_plot(summary, tmp_path / "idle-auto.png")
    (fig,) = figures
    steady, log_append = fig.axes[:2]
    try:
        for panel in (steady, log_append):
            for which in ("x", "y"):
                labels = tick_labels(panel, which)
                assert len(labels) >= 2, (panel.get_title(), which, labels)
                assert all(PLAIN.match(t) for t in labels), (panel.get_title(), which, labels)
        assert tick_labels(log_append, "x") == ["0", "1"]
        assert steady.get_yscale() == "linear"
    finally:
        plt.close(fig)
