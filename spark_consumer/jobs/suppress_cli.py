"""``timesync-spark suppress``: the command line of :mod:`spark_consumer.jobs.suppress`.

The job's module is imported only when this job is chosen: ``--help`` and the other jobs need
not wait for pyspark's import.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from spark_consumer.common_options import JobInput
from spark_consumer.jobs import JobOutput, window_cli
from spark_consumer.jobs.command import Job
from spark_consumer.options import parse_duration

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_consumer.jobs.suppress import SuppressOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    window_cli.add_window_group(parser)
    parser.add_argument("--window", choices=("tumbling", "hopping"), default="tumbling")
    parser.add_argument(
        "--grace", default="0ms", metavar="DURATION", help="how long a key's window stays open after its end"
    )
    parser.add_argument(
        "--ttl", required=True, metavar="DURATION", help="evict keys idle this long (event time)"
    )
    parser.add_argument(
        "--closed-retention",
        metavar="DURATION",
        help="how long an evicted key remembers the windows it closed, so a straggler cannot "
        "reopen one (event time; default: --ttl)",
    )


def plan(args: argparse.Namespace) -> SuppressOptions:
    """The job's options from its arguments, all but the value schema (which needs Spark).

    :class:`SuppressOptions` checks the bounds (a TTL longer than a window and its grace).
    """
    from spark_consumer.jobs.suppress import SuppressOptions

    aggs = window_cli.aggs(args)
    window = window_cli.window(args)
    grace_ms = parse_duration(args.grace, "--grace", allow_zero=True)
    ttl_ms = parse_duration(args.ttl, "--ttl")
    closed_retention_ms = (
        None
        if args.closed_retention is None
        else parse_duration(args.closed_retention, "--closed-retention", allow_zero=True)
    )
    options = SuppressOptions(
        window, grace_ms, ttl_ms, aggs, args.key_field, closed_retention_ms=closed_retention_ms
    )
    window_cli.require_schema_for(args, aggs)
    return options


def build(spark: SparkSession, given: JobInput, options: SuppressOptions) -> JobOutput:
    from spark_consumer.jobs import suppress

    window_cli.check_agg_fields(given.value_schema, options.aggs)
    complete = dataclasses.replace(options, value_schema=given.value_schema)
    return suppress.build(spark, given.source, complete)


JOB = Job(
    "suppress",
    "per-key final window results",
    add_arguments,
    plan,
    build,
    counts_late_per_key=True,
)
