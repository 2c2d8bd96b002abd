"""The README blocks and the cost-curve growth words, without a broker."""

from __future__ import annotations

from pathlib import Path

from bench import report
from bench.curves import _slope, classify

REPO = Path(__file__).resolve().parents[2]


def test_only_the_named_block_bodies_are_rewritten() -> None:
    text = (
        "intro\n<!-- bench:results -->\nold figure\n<!-- /bench:results -->\n"
        "middle\n<!-- bench:other -->\nkept\n<!-- /bench:other -->\n"
    )
    new = report.rewrite_blocks(text, {"results": "new figure"})
    assert new == text.replace("old figure", "new figure")


def test_rewriting_twice_gives_the_same_text() -> None:
    text = "<!-- bench:summary -->\nx\n<!-- /bench:summary -->\n"
    once = report.rewrite_blocks(text, {"summary": "a\nb\n"})
    assert report.rewrite_blocks(once, {"summary": "a\nb\n"}) == once


def test_every_readme_holds_the_blocks_the_generator_writes() -> None:
    found = {name for readme in report.READMES for name in report.block_names((REPO / readme).read_text())}
    assert found == {"summary", "results", "sizing"}


def test_growth_is_named_from_the_log_log_slope() -> None:
    assert classify(_slope([4, 32, 128, 512], [10, 10, 10.5, 10])) == "flat"
    assert classify(_slope([100, 1000, 10000], [1, 10, 100])) == "linear"
    assert classify(_slope([100, 1000, 10000], [1, 3, 10])) == "sub-linear"
    assert classify(_slope([4, 512], [200_000, 50_000])) == "falls"
    assert classify(_slope([4], [1])) is None
