"""The README blocks and the cost-curve growth words, without a broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import readmes
from bench.curves import _slope, classify

REPO = Path(__file__).resolve().parents[2]


def test_only_the_named_block_bodies_are_rewritten() -> None:
    text = (
        "intro\n<!-- bench:results -->\nold figure\n<!-- /bench:results -->\n"
        "middle\n<!-- bench:other -->\nkept\n<!-- /bench:other -->\n"
    )
    new = readmes.rewrite_blocks(text, {"results": "new figure"})
    assert new == text.replace("old figure", "new figure")


def test_rewriting_twice_gives_the_same_text() -> None:
    text = "<!-- bench:summary -->\nx\n<!-- /bench:summary -->\n"
    once = readmes.rewrite_blocks(text, {"summary": "a\nb\n"})
    assert readmes.rewrite_blocks(once, {"summary": "a\nb\n"}) == once


def test_every_readme_holds_the_blocks_the_generator_writes() -> None:
    found = {name for readme in readmes.READMES for name in readmes.block_names((REPO / readme).read_text())}
    assert found == set(readmes.BLOCKS)


def test_growth_is_named_from_the_log_log_slope() -> None:
    assert classify(_slope([4, 32, 128, 512], [10, 10, 10.5, 10])) == "flat"
    assert classify(_slope([100, 1000, 10000], [1, 10, 100])) == "linear"
    assert classify(_slope([100, 1000, 10000], [1, 3, 10])) == "sub-linear"
    assert classify(_slope([4, 512], [200_000, 50_000])) == "falls"
    assert classify(_slope([4], [1])) is None


def test_the_run_behind_the_blocks_is_kept_beside_its_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m bench readme`` copies the run's results.json and report.md into bench/figures/
    with the figures, so every figure a README shows can be checked against the run it came from."""
    repo = tmp_path / "repo"
    for name in readmes.READMES:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("<!-- bench:summary -->\nold\n<!-- /bench:summary -->\n")
    run = tmp_path / "results"
    run.mkdir()
    for name in (*readmes.FIGURES, *readmes.RUN_FILES):
        (run / name).write_text(f"from the run: {name}")

    readmes.update_readmes(None, repo, run)  # the pending text: no run, nothing copied
    assert not (repo / readmes.FIGURE_DIR).exists()

    monkeypatch.setattr(readmes, "readme_blocks", lambda results: {"summary": "new"})
    readmes.update_readmes({"run_id": "r1"}, repo, run)
    kept = repo / readmes.FIGURE_DIR
    assert {p.name for p in kept.iterdir()} == {*readmes.FIGURES, "results.json", "report.md"}
    assert (kept / "results.json").read_text() == "from the run: results.json"
    assert "new" in (repo / "README.md").read_text()


def test_the_noise_stated_is_the_widest_spread_of_repeated_rounds_in_the_run() -> None:
    def run(label: str, rounds: list[int]) -> dict[str, object]:
        return {"system": {"label": label}, "records_per_s_runs": rounds}

    results = {
        "throughput": [
            {"shape": "keyless", "runs": [run("a", [90, 100, 110]), run("b", [100])]},
            {"shape": "json", "runs": [run("c", [80, 100, 120])]},
        ]
    }
    assert readmes.round_spread(results) == (0.4, "c, json")
    assert readmes.round_spread({"throughput": [{"shape": "x", "runs": [run("b", [100])]}]}) is None
