"""``timesync-spark join``: the command line of :mod:`spark_consumer.jobs.join`."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_consumer.common_options import JobInput
from spark_consumer.jobs import JobOutput
from spark_consumer.jobs.command import Job
from spark_consumer.options import UsageError, parse_duration

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_consumer.jobs.join import JoinOptions


@dataclass(frozen=True, slots=True)
class JoinPlan:
    """The join's options without the schemas, and ``--right-value-schema`` still as given."""

    options: JoinOptions
    right_value_schema: str | None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--left", required=True, metavar="SOURCE_TOPIC", help="input topic of the left side")
    parser.add_argument(
        "--right", required=True, metavar="SOURCE_TOPIC", help="input topic of the right side"
    )
    parser.add_argument("--within", required=True, metavar="DURATION", help="max |right.ts - left.ts|")
    parser.add_argument("--how", choices=("inner", "left", "outer"), default="inner")
    parser.add_argument("--right-value-schema", metavar="DDL|FILE", help="when the right side differs")


def plan(args: argparse.Namespace) -> JoinPlan:
    from spark_consumer.jobs.join import JoinOptions  # pyspark: only once a job runs

    within_ms = parse_duration(args.within, "--within", allow_zero=True)
    if args.left == args.right:
        raise UsageError(f"--right: the right source topic must differ from the left ({args.left!r})")
    if args.right_value_schema and args.value_format != "json":
        raise UsageError(
            f"--right-value-schema: only with --value-format json; {args.value_format} values of both "
            "sides decode with the value subject's schemas"
        )
    options = JoinOptions(args.left, args.right, within_ms, args.how, args.key_field)
    return JoinPlan(options, args.right_value_schema)


def build(spark: SparkSession, given: JobInput, planned: JoinPlan) -> JobOutput:
    """Both sides read ``--value-schema`` unless the right one has its own."""
    from spark_consumer.jobs import join
    from spark_consumer.schema import field_type, load_schema

    left = given.value_schema
    right = (
        load_schema(planned.right_value_schema, "--right-value-schema")
        if planned.right_value_schema
        else left
    )
    if right is not None and given.key_field:
        field_type(right, given.key_field, "--key-field")
    options = dataclasses.replace(planned.options, left_schema=left, right_schema=right)
    return join.build(spark, given.source, options)


JOB = Job("join", "stream-stream join of two source topics", add_arguments, plan, build)
