"""What a job gives ``timesync-spark``: its subcommand, as one :class:`Job` value.

A job owns its command line: the arguments only it takes, their checks before Spark starts, and
how they become its query. The options every job shares are not a job's business
(:mod:`spark_consumer.common_options`); the CLI finds the jobs in
:mod:`spark_consumer.jobs.registry`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from spark_consumer.common_options import JobInput
from spark_consumer.jobs import JobOutput

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: What a job's ``plan`` makes of its arguments and its ``build`` starts from.
Planned = TypeVar("Planned")


@dataclass(frozen=True, slots=True)
class Job(Generic[Planned]):
    """One ``timesync-spark JOB`` subcommand.

    ``add_arguments`` adds the job's own arguments to its subcommand's parser (which already
    holds the common ones). ``plan`` reads them from the parsed arguments and checks everything
    that can be checked without Spark, raising :class:`~spark_consumer.options.UsageError` (one
    line naming the option and the value); it runs before the session starts, so a mistake costs
    no Spark start-up. ``build`` makes the job's stream from what ``plan`` returned, once the
    session runs (it may check what needs Spark, such as fields against the value schema).
    ``counts_late_per_key``: the job also drops rows late for their key, reported apart from
    those Spark's watermark drops.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    plan: Callable[[argparse.Namespace], Planned]
    build: Callable[[SparkSession, JobInput, Planned], JobOutput]
    counts_late_per_key: bool = False
