"""``timesync-spark aggregate``: the command line of :mod:`spark_consumer.jobs.aggregate`."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from spark_consumer.common_options import JobInput
from spark_consumer.jobs import JobOutput, window_cli
from spark_consumer.jobs.command import Job
from spark_consumer.options import UsageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_consumer.jobs.aggregate import AggregateOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    window_cli.add_window_group(parser)
    parser.add_argument("--window", choices=("tumbling", "hopping", "session"), default="tumbling")
    parser.add_argument("--gap", metavar="DURATION", help="session gap (session windows)")
    parser.add_argument("--output-mode", choices=("append", "update"), default="append")


def plan(args: argparse.Namespace) -> AggregateOptions:
    """The job's options from its arguments, all but the value schema (which needs Spark)."""
    from spark_consumer.jobs.aggregate import AggregateOptions  # pyspark: only once a job runs

    aggs = window_cli.aggs(args)
    window = window_cli.window(args)
    if args.sink == "parquet" and args.output_mode != "append":
        raise UsageError("--output-mode: Spark's Parquet sink writes only append mode")
    window_cli.require_schema_for(args, aggs)
    return AggregateOptions(window, aggs, args.key_field, None, args.output_mode)


def build(spark: SparkSession, given: JobInput, options: AggregateOptions) -> JobOutput:
    from spark_consumer.jobs import aggregate

    window_cli.check_agg_fields(given.value_schema, options.aggs)
    complete = dataclasses.replace(options, value_schema=given.value_schema)
    return aggregate.build(spark, given.source, complete)


JOB = Job("aggregate", "windowed count/sum/min/max", add_arguments, plan, build)
