"""The jobs ``timesync-spark`` runs, in the order its ``--help`` lists them.

A new job is its module (its query), its ``*_cli.py`` (its :class:`~spark_consumer.jobs.command.Job`)
and one line here.
"""

from __future__ import annotations

from typing import Any

from spark_consumer.jobs import aggregate_cli, join_cli, suppress_cli
from spark_consumer.jobs.command import Job

JOBS: tuple[Job[Any], ...] = (join_cli.JOB, aggregate_cli.JOB, suppress_cli.JOB)


def job(name: str) -> Job[Any]:
    """The job named ``name`` (one argparse already accepted as a subcommand)."""
    return next(j for j in JOBS if j.name == name)
