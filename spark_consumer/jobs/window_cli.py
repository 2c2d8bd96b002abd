"""The window and aggregation options that ``aggregate`` and ``suppress`` share.

``--size``, ``--slide`` and ``--agg`` (the "window" group of their ``--help``) mean the same in
both jobs; ``--window`` is each job's own (suppress has no session windows), and so is ``--gap``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spark_consumer.common_options import require_value_schema
from spark_consumer.options import AggSpec, UsageError, WindowSpec, parse_duration

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def add_window_group(parser: argparse.ArgumentParser) -> None:
    """``--size``, ``--slide`` and ``--agg``."""
    win = parser.add_argument_group("window")
    win.add_argument("--size", metavar="DURATION", help="window size (tumbling, hopping)")
    win.add_argument("--slide", metavar="DURATION", help="hop between window starts (hopping)")
    win.add_argument(
        "--agg",
        action="append",
        default=[],
        metavar="SPEC",
        help="count | count:FIELD | sum:FIELD | min:FIELD | max:FIELD (repeatable; default count)",
    )


def aggs(args: argparse.Namespace) -> list[AggSpec]:
    """``--agg`` parsed (``count`` when none is given)."""
    return [AggSpec.parse(a) for a in args.agg] or [AggSpec("count")]


def window(args: argparse.Namespace) -> WindowSpec:
    """``--window`` with the durations its kind needs (``--gap`` for session windows)."""
    if args.window == "session":
        if args.gap is None:
            raise UsageError("--gap: required for session windows")
        return WindowSpec("session", gap_ms=parse_duration(args.gap, "--gap"))
    if args.size is None:
        raise UsageError(f"--size: required for {args.window} windows")
    size = parse_duration(args.size, "--size")
    if args.window == "hopping":
        if args.slide is None:
            raise UsageError("--slide: required for hopping windows")
        return WindowSpec("hopping", size_ms=size, slide_ms=parse_duration(args.slide, "--slide"))
    return WindowSpec("tumbling", size_ms=size)


def require_schema_for(args: argparse.Namespace, specs: Sequence[AggSpec]) -> None:
    """An aggregation of a value field needs ``--value-schema``."""
    require_value_schema(args, any(a.field for a in specs))


def check_agg_fields(schema: StructType | None, specs: Sequence[AggSpec]) -> None:
    """Every aggregated field is in the value schema; sum, min and max need a numeric one."""
    from spark_consumer.schema import check_numeric, field_type  # pyspark: only once a job runs

    for spec in specs:
        if spec.field and schema is not None:
            if spec.function == "count":
                field_type(schema, spec.field, "--agg")
            else:
                check_numeric(schema, spec.field, "--agg")
