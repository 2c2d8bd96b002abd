"""``timesync-sidecar offsets reset``: a subcommand beside the run command, which is unchanged."""

from __future__ import annotations

import pytest

from sidecar.cli import main

KEYS = ["--set", "bootstrap.servers=127.0.0.1:1", "--set", "input.topics=a", "--set", "output.topic=o"]


def test_the_run_command_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("timesync ")
    assert main(["--set", "output.topic=o"]) == 2  # still the sidecar's config error
    assert "bootstrap.servers is required" in capsys.readouterr().err


def test_offsets_reset_has_its_own_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["offsets", "reset", "--help"])
    assert done.value.code == 0
    assert "usage: timesync-sidecar offsets reset" in capsys.readouterr().out


def test_exactly_one_target_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["offsets", "reset", *KEYS, "--to-earliest", "--to-latest"])
    assert done.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_bad_target_is_one_line_and_exit_2_before_any_connection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["offsets", "reset", *KEYS, "--to-datetime", "2027-01-01T00:00"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("timesync-sidecar offsets: --to-datetime '2027-01-01T00:00' has no time zone")
