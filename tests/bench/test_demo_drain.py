"""The demo's drain line: seconds from the producers' stop to the last record out, held to one idle
plus ``BOUND_S``."""

from __future__ import annotations

from bench import demo_drain


def test_the_drain_is_the_last_arrival_after_the_producers_stopped() -> None:
    assert demo_drain.drain_s(30_000.0, [100.0, 31_200.0, 32_500.0]) == 2.5
    assert demo_drain.drain_s(30_000.0, [29_000.0]) == 0.0, "all out before they stopped"
    assert demo_drain.drain_s(30_000.0, []) is None


def test_the_line_is_green_within_one_idle_and_the_bound_red_past_it() -> None:
    assert demo_drain.line(4.5, 2_500).startswith("[green]drain: the last record came out 4.5 s after")
    assert demo_drain.line(4.6, 2_500).startswith("[red]")
    assert demo_drain.line(None, 2_500).startswith("[red]")
