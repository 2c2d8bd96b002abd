"""``timesync-spark join``: the command line of :mod:`spark_consumer.jobs.join`."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_consumer.common_options import JobInput, subject_values
from spark_consumer.jobs import JobOutput
from spark_consumer.jobs.command import Job
from spark_consumer.options import UsageError, parse_duration
from spark_consumer.schema_registry import value_subject
from spark_consumer.value_decoders import formats_where, spark_decoder, with_messages, with_registry
from spark_consumer.value_formats import BinaryValues

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

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
    parser.add_argument(
        "--right-value-subject",
        metavar="SUBJECT",
        help="--value-format avro|protobuf: the right side's subject, when it differs (e.g. <--right>-value)",
    )
    parser.add_argument(
        "--right-value-message",
        metavar="NAME",
        help="--value-format protobuf: the right side's message, when it differs",
    )


def plan(args: argparse.Namespace) -> JoinPlan:
    from spark_consumer.jobs.join import JoinOptions  # pyspark: only once a job runs

    within_ms = parse_duration(args.within, "--within", allow_zero=True)
    if args.left == args.right:
        raise UsageError(f"--right: the right source topic must differ from the left ({args.left!r})")
    if args.right_value_schema and spark_decoder(args.value_format).registry:
        raise UsageError(
            f"--right-value-schema: only with --value-format {formats_where(lambda d: not d.registry)}; the "
            f"right side's {args.value_format} schema is its subject's (--right-value-subject)"
        )
    options = JoinOptions(
        args.left, args.right, within_ms, args.how, args.key_field, right_values=right_registry_values(args)
    )
    return JoinPlan(options, args.right_value_schema)


def right_registry_values(args: argparse.Namespace) -> BinaryValues | None:
    """The right side's own Avro or Protobuf values (``--right-value-subject``, and for Protobuf
    ``--right-value-message``), fetched before Spark starts; ``None`` when both sides share the
    value subject's."""
    if args.right_value_subject is None and args.right_value_message is None:
        return None
    flag = "--right-value-subject" if args.right_value_subject is not None else "--right-value-message"
    decoder = spark_decoder(args.value_format)
    if not decoder.registry:
        raise UsageError(
            f"{flag}: only with --value-format {formats_where(with_registry)} "
            f"({args.value_format}: --right-value-schema)"
        )
    if args.right_value_message is not None and not decoder.format.message_indexes:
        raise UsageError(f"--right-value-message: only with --value-format {formats_where(with_messages)}")
    subject = args.right_value_subject or value_subject(args.topic, args.value_subject)
    return subject_values(args, subject, args.right_value_message, "--right-value-message")


def build(spark: SparkSession, given: JobInput, planned: JoinPlan) -> JobOutput:
    """Both sides read ``--value-schema`` (or the value subject's) unless the right one has its own."""
    from spark_consumer.jobs import join
    from spark_consumer.schema import field_type, load_schema

    left = given.value_schema
    if planned.options.right_values is not None:
        from spark_consumer.value_decoders import value_struct

        right: StructType | None = value_struct(spark, planned.options.right_values)
    elif planned.right_value_schema:
        right = load_schema(planned.right_value_schema, "--right-value-schema")
    else:
        right = left
    if right is not None and given.key_field:
        field_type(right, given.key_field, "--key-field")
    options = dataclasses.replace(planned.options, left_schema=left, right_schema=right)
    return join.build(spark, given.source, options)


JOB = Job("join", "stream-stream join of two source topics", add_arguments, plan, build)
