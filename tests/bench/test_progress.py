"""Progress in CI: no terminal, so every task becomes plain lines (started, every few seconds, done)."""

from __future__ import annotations

import pytest

from bench import progress


@pytest.fixture(autouse=True)
def in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")


def test_ci_is_never_interactive_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert not progress.interactive()


def test_a_counted_task_prints_start_progress_and_done_with_its_total(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with progress.track("produce", total=10, every_s=0.0) as task:
        task.update(4)
        task.update(10)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "produce: started"
    assert lines[1].startswith("produce: 4/10 (")
    assert lines[-1].startswith("produce: done 10/10 in ")


def test_a_task_without_a_count_says_only_how_long_it_took(capsys: pytest.CaptureFixture[str]) -> None:
    with progress.track("Spark replays"):
        pass
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0] == "Spark replays: started"
    assert lines[1].startswith("Spark replays: done in ")
    assert lines[1].endswith(" s")


def test_updates_within_the_interval_print_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with progress.track("drain", total=3, every_s=3600) as task:
        task.update(1)
        task.update(2)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0] == "drain: started"
    assert lines[1].startswith("drain: done 2/3 in ")
