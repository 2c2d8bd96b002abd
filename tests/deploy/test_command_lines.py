"""Every command line we ship parses with the real CLI parsers.

A user copies the commands in the docs; Compose, Kubernetes and the chart run the ones in their
files. Each is found by ``tests/deploy/command_lines.py`` and handed to ``sidecar.cli``'s and
``spark_consumer.cli``'s own parsers — for Spark also to the checks that run before Spark starts
(``Plan``): a command that exits 2 there would make Compose restart-loop and leave a copying user
with a usage error.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from unittest import mock

import pytest
import yaml

from sidecar import cli as sidecar_cli
from sidecar.config import KEYS
from sidecar.config import listing as config_listing
from sidecar.config.surface import key_docs
from sidecar.offsets import cli as offsets_cli
from sidecar.offsets.plan import PlanError
from spark_consumer import cli as spark_cli
from spark_consumer import common_options
from spark_consumer.options import UsageError
from tests.deploy import command_lines
from tests.deploy.command_lines import SIDECAR, SPARK, CommandLine, shipped_commands

COMMANDS = shipped_commands()


def problem(command: CommandLine) -> str | None:
    """Why the real CLI would refuse this command line before doing any work, or None."""
    err = io.StringIO()
    argv = list(command.argv)
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            if command.program == SIDECAR and argv[:1] == ["offsets"]:  # its own command
                offsets_args = offsets_cli.build_parser().parse_args(argv[1:])
                offsets_cli._goal(offsets_args)
            elif command.program == SIDECAR and argv[:1] == ["config"]:  # the key listing
                listing_args = config_listing.build_parser().parse_args(argv[1:])
                config_listing.chosen(key_docs(), listing_args.keys)
            elif command.program == SIDECAR:
                args = sidecar_cli.build_parser().parse_args(argv)
                unknown = [s.partition("=")[0] for s in args.set if s.partition("=")[0].strip() not in KEYS]
                if unknown:
                    return f"--set of unknown config keys {unknown}"
            else:
                # A shipped Avro/Protobuf command names a registry that is not running here: the
                # plan's one network step (fetching the subject's schemas) answers "no schemas";
                # every option is still parsed and checked as the real CLI does.
                with mock.patch.object(common_options, "plan_values", return_value=None):
                    spark_cli.Plan(spark_cli.build_parser().parse_args(argv))
        except SystemExit as e:
            if e.code == 0 and ("--help" in argv or "-h" in argv or "--version" in argv):
                return None
            return f"exit {e.code}: {err.getvalue().strip()}"
        except (UsageError, PlanError, ValueError) as e:
            return f"usage error: {e}"
    return None


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_shipped_command_line_parses(command: CommandLine) -> None:
    assert problem(command) is None, f"{command}\n  -> {problem(command)}"


def test_every_place_a_user_finds_a_command_is_scanned() -> None:
    """The scan finds commands in each kind of place (an empty scan would pass every test)."""
    places = {c.where.split(":")[0] for c in COMMANDS}
    assert {
        "README.md",
        "docs/sidecar.md",
        "docs/spark.md",
        "deploy/README.md",
        "deploy/compose.yaml",
        "deploy/docker/Dockerfile",
        "deploy/k8s/deployment.yaml",
        "deploy/k8s/spark-driver-pod-template.yaml",
        "deploy/helm/timesync/templates/deployment.yaml",
    } <= places
    compose = {c.where for c in COMMANDS if c.where.startswith("deploy/compose.yaml")}
    assert compose == {"deploy/compose.yaml: service timesync", "deploy/compose.yaml: service spark"}
    programs = {(c.where.split(":")[0], c.program) for c in COMMANDS}
    assert ("deploy/README.md", SPARK) in programs  # the spark-submit ... spark_main.py JOB example
    assert ("deploy/k8s/spark-driver-pod-template.yaml", SPARK) in programs  # its comment
    assert ("deploy/k8s/spark-driver-pod-template.yaml", SIDECAR) in programs  # the native sidecar


def test_the_scan_reads_a_shell_block_as_a_shell_would(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "Prose with `timesync-spark aggregate` inline is not a command.\n"
        "```sh\n"
        "cat > t.properties <<'CONF'\n"
        "timesync-sidecar --inside-a-heredoc\n"
        "CONF\n"
        "TIMESYNC_X=1 timesync-sidecar --config t.properties \\\n"
        "    --set max.task.idle.ms=5   # a comment\n"
        "make x && .venv/bin/python -m spark_consumer join --topic t | tee log\n"
        "spark-submit --master k8s://x local:///opt/timesync/spark_main.py suppress --ttl 1h\n"
        "```\n"
        "```json\n"
        '{"cmd": "timesync-sidecar --nope"}\n'
        "```\n"
    )
    found = [(c.program, c.argv, c.where) for c in command_lines.markdown_commands(doc)]
    where = str(doc.relative_to(doc.parents[0]))
    assert [(p, a) for p, a, _ in found] == [
        (SIDECAR, ("--config", "t.properties", "--set", "max.task.idle.ms=5")),
        (SPARK, ("join", "--topic", "t")),
        (SPARK, ("suppress", "--ttl", "1h")),
    ]
    assert [w.rsplit(":", 1)[1] for _, _, w in found] == ["6", "8", "9"], where


def test_the_check_refuses_what_the_cli_refuses() -> None:
    bad = [
        CommandLine(SPARK, ("aggregate", "--bootstrap-servers", "k:9092", "--topic", "t"), "x"),
        CommandLine(SPARK, ("join", "--bootstrap-servers", "k", "--topic", "t", "--checkpoint", "/c"), "x"),
        CommandLine(
            SPARK,
            (
                "aggregate",
                "--bootstrap-servers",
                "k",
                "--topic",
                "t",
                "--checkpoint",
                "/c",
                "--key-field",
                "id",
            ),
            "x",
        ),
        CommandLine(SIDECAR, ("--config",), "x"),
        CommandLine(SIDECAR, ("--set", "max.task.idle=5"), "x"),
    ]
    for command in bad:
        assert problem(command) is not None, command
    assert problem(CommandLine(SPARK, ("--help",), "x")) is None
    assert problem(CommandLine(SIDECAR, ("--config", "f", "--set", "max.task.idle.ms=5"), "x")) is None


def test_compose_runs_the_images_entrypoints() -> None:
    """The resolution the scan relies on: which program each image's entrypoint runs."""
    stages = command_lines.dockerfile_stages()
    assert command_lines._program_of(stages["sidecar"]["ENTRYPOINT"]) == SIDECAR
    assert command_lines._program_of(stages["spark"]["ENTRYPOINT"]) == SPARK
    script = (command_lines.DEPLOY / "docker" / "spark-entrypoint.sh").read_text()
    assert 'exec timesync-spark "$@"' in script
    compose = yaml.safe_load(command_lines.COMPOSE.read_text())["services"]
    assert compose["spark"]["build"]["target"] == "spark"
    assert compose["timesync"]["build"]["target"] == "sidecar"
